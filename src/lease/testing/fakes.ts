// The world of Lease holders in unit tests: a clock that moves when told, and Leases in memory
// with the API server's compare-and-swap, reached by each process over a connection a test can
// cut (requests fail), hang (requests never answer until aborted) or deny (403).
import { ApiError } from '../../apimachinery/errors.ts';
import type { Lease } from '../../kube/lease.ts';
import type { MonotonicClock } from '../clock.ts';
import type { LeaseStore } from '../holder.ts';

/** A clock that moves only when told: sleeps end in order as advance() passes them. */
export class FakeClock implements MonotonicClock {
  #now = 0;
  #timers: { at: number; resolve: () => void }[] = [];

  now(): number {
    return this.#now;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (signal?.aborted) return resolve();
      const aborted = (): void => {
        this.#timers = this.#timers.filter((t) => t !== timer);
        resolve();
      };
      const timer = {
        at: this.#now + ms,
        resolve: () => {
          signal?.removeEventListener('abort', aborted);
          resolve();
        },
      };
      this.#timers.push(timer);
      signal?.addEventListener('abort', aborted, { once: true });
    });
  }

  /** Moves time on by `ms`, firing timers in order and letting promises settle after each. */
  async advance(ms: number): Promise<void> {
    const end = this.#now + ms;
    for (;;) {
      await settle();
      const next = this.#timers.filter((t) => t.at <= end).sort((a, b) => a.at - b.at)[0];
      if (!next) break;
      this.#timers = this.#timers.filter((t) => t !== next);
      this.#now = next.at;
      next.resolve();
    }
    this.#now = end;
    await settle();
  }
}

/** Lets pending promise reactions and I/O callbacks run, a few rounds over. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** Leases in memory, as the API server keeps them: a resourceVersion per write, compare-and-swap on it. */
export class FakeLeases {
  readonly clock: FakeClock;
  readonly #leases = new Map<string, Lease>();
  #version = 0;
  /** Every write that landed: the Lease, its holder, when (fake clock). */
  readonly writes: { name: string; identity: string | null | undefined; at: number }[] = [];
  /** Processes whose requests fail at once (cut off from the API server). */
  readonly cut = new Set<string>();
  /** Processes whose requests never answer until aborted (a partitioned node, a stopped process). */
  readonly hung = new Set<string>();
  /** Processes answered 403. */
  readonly denied = new Set<string>();
  /** How many hung requests of each process were aborted. */
  readonly aborted = new Map<string, number>();

  constructor(clock: FakeClock) {
    this.clock = clock;
  }

  get size(): number {
    return this.#leases.size;
  }

  /** The Lease of that name as stored. */
  lease(name: string): Lease | undefined {
    return this.#leases.get(name);
  }

  /** Process `who`'s connection to the Leases. */
  as(who: string): LeaseStore {
    const answer = async (signal?: AbortSignal): Promise<void> => {
      await Promise.resolve();
      if (this.cut.has(who)) throw new Error(`${who} is cut off`);
      if (this.denied.has(who)) {
        throw new ApiError('PUT', '/leases', 403, { reason: 'Forbidden', message: 'leases is forbidden' });
      }
      if (!this.hung.has(who)) return;
      await new Promise((_, reject) => {
        const abort = () => {
          this.aborted.set(who, (this.aborted.get(who) ?? 0) + 1);
          reject(signal?.reason);
        };
        if (signal?.aborted) abort();
        signal?.addEventListener('abort', abort, { once: true });
      });
    };
    return {
      get: async (_namespace, name, signal) => {
        await answer(signal);
        return this.#leases.get(name);
      },
      create: async (lease, signal) => {
        await answer(signal);
        if (this.#leases.has(lease.metadata.name)) return undefined;
        return this.#store(lease);
      },
      update: async (lease, signal) => {
        await answer(signal);
        const current = this.#leases.get(lease.metadata.name);
        if (!current) {
          throw new ApiError('PUT', '/leases', 404, {
            reason: 'NotFound',
            message: `leases "${lease.metadata.name}" not found`,
          });
        }
        if (current.metadata.resourceVersion !== lease.metadata.resourceVersion) return undefined;
        return this.#store(lease);
      },
      delete: async (lease, signal) => {
        await answer(signal);
        const current = this.#leases.get(lease.metadata.name);
        const precondition = lease.metadata.resourceVersion;
        if (current && precondition && current.metadata.resourceVersion !== precondition) return false;
        this.#leases.delete(lease.metadata.name);
        return true;
      },
      list: async (_namespace, selector, signal) => {
        await answer(signal);
        return [...this.#leases.values()].filter((lease) => matches(lease, selector));
      },
    };
  }

  #store(lease: Lease): Lease {
    const stored: Lease = {
      ...lease,
      metadata: {
        ...lease.metadata,
        resourceVersion: String(++this.#version),
        creationTimestamp: lease.metadata.creationTimestamp ??
          new Date(Date.UTC(2026, 0, 1) + this.clock.now()).toISOString(),
      },
    };
    this.#leases.set(lease.metadata.name, stored);
    this.writes.push({ name: lease.metadata.name, identity: lease.spec.holderIdentity, at: this.clock.now() });
    return stored;
  }
}

/** `key` or `key=value`, comma-separated: what the Lease tests select by. */
function matches(lease: Lease, selector: string): boolean {
  return selector.split(',').filter(Boolean).every((term) => {
    const [key = '', value] = term.split('=');
    const actual = lease.metadata.labels?.[key];
    return value === undefined ? actual !== undefined : actual === value;
  });
}
