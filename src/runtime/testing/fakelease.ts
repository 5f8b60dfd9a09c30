// Leader election's world for unit tests: a clock that moves when told, and an in-memory Lease
// that candidates' locks read and write with the API server's compare-and-swap.
import type { LeaseSpec } from '../../kube/lease.ts';
import type { ElectionLock, MonotonicClock } from '../leader.ts';

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

/** The API server's copy of the lease, shared by every candidate's lock. */
export class LeaseServer {
  spec: LeaseSpec | undefined;
  version = 0;
  writes: { identity: string | null | undefined; at: number }[] = [];
  readonly clock: FakeClock;
  constructor(clock: FakeClock) {
    this.clock = clock;
  }
}

/** One candidate's view of the lease; `hang` makes its requests never answer (a partitioned node). */
export class FakeLock implements ElectionLock {
  readonly description = 'test/lease';
  hang = false;
  aborted = 0;
  #version = -1;
  readonly server: LeaseServer;

  constructor(server: LeaseServer) {
    this.server = server;
  }

  async get(signal: AbortSignal): Promise<LeaseSpec | undefined> {
    await this.#answer(signal);
    this.#version = this.server.version;
    return this.server.spec;
  }

  async create(spec: LeaseSpec, signal: AbortSignal): Promise<boolean> {
    await this.#answer(signal);
    if (this.server.spec) return false;
    return this.#store(spec);
  }

  async update(spec: LeaseSpec, signal: AbortSignal): Promise<boolean> {
    await this.#answer(signal);
    if (this.#version !== this.server.version) return false;
    return this.#store(spec);
  }

  #store(spec: LeaseSpec): boolean {
    this.server.spec = spec;
    this.#version = ++this.server.version;
    this.server.writes.push({ identity: spec.holderIdentity, at: this.server.clock.now() });
    return true;
  }

  #answer(signal: AbortSignal): Promise<void> {
    if (!this.hang) return Promise.resolve();
    return new Promise((_, reject) => {
      signal.addEventListener('abort', () => {
        this.aborted++;
        reject(signal.reason);
      }, { once: true });
    });
  }
}
