// Which of a shard group's Leases are held, judged as client-go's leader election judges a
// leader's: by when this process saw each one change, on its own monotonic clock, so that clocks
// of other hosts never count. A Lease is held for its lease duration after it was seen to change.
// One not renewed for two lease durations by its renewTime is expired at first sight (a pod long
// gone): without that, a process that starts would wait a whole duration for every dead Lease.
import type { Lease } from '../kube/lease.ts';
import type { MonotonicClock } from '../runtime/leader.ts';

/** The Leases seen in one look, sorted into held and expired. */
export interface Observed {
  readonly held: Lease[];
  readonly expired: Lease[];
  /** When (our clock) the first held Lease expires unless renewed; Infinity when none is held. */
  readonly nextExpiry: number;
  /** The names of held Leases not seen renewed for longer than `lateAfterMs` (see observe). */
  readonly late: ReadonlySet<string>;
}

export class Liveness {
  readonly #clock: MonotonicClock;
  /** Each Lease's version as last seen, and when (our clock) it was first seen at that version. */
  readonly #seen = new Map<string, { readonly version: string | undefined; readonly at: number }>();

  constructor(clock: MonotonicClock) {
    this.#clock = clock;
  }

  /**
   * Sorts `leases`, every one there is now (a Lease not among them is forgotten), just listed; a
   * held one not seen renewed for `lateAfterMs` is late too.
   */
  observe(leases: readonly Lease[], lateAfterMs = Infinity): Observed {
    // After the answer: a version is seen no sooner than it was written, so expiry is never early.
    const now = this.#clock.now();
    const late = new Set<string>();
    const observed: Observed & { nextExpiry: number } = { held: [], expired: [], nextExpiry: Infinity, late };
    const names = new Set<string>();
    for (const lease of leases) {
      const { name, resourceVersion: version } = lease.metadata;
      names.add(name);
      const duration = (lease.spec.leaseDurationSeconds ?? 0) * 1000;
      const before = this.#seen.get(name);
      const renewed = Date.parse(lease.spec.renewTime ?? '') || 0;
      const at = before !== undefined && before.version === version
        ? before.at
        : before === undefined && Date.now() - renewed > 2 * duration
        ? -Infinity
        : now;
      this.#seen.set(name, { version, at });
      if (now - at <= duration) {
        observed.held.push(lease);
        if (now - at > lateAfterMs) late.add(name);
        observed.nextExpiry = Math.min(observed.nextExpiry, at + duration + 1);
      } else observed.expired.push(lease);
    }
    for (const name of this.#seen.keys()) if (!names.has(name)) this.#seen.delete(name);
    return observed;
  }
}
