// Whether other processes hold their Leases, judged as client-go's leader election judges a
// leader's: by when this process saw each Lease change, on its own monotonic clock. A Lease is
// held for its lease duration after it was seen to change, and one seen for the first time is
// held from then: a renewTime is another host's wall clock, so it never counts (a clock that runs
// ahead would otherwise find live holders long expired). The price is one lease duration before
// a Lease left behind by a process that crashed counts as expired, from the first look at it.
// A read shows the Leases as they were when the API server answered, somewhere between the
// request's send and its answer's arrival, and a process paused in between (SIGSTOP, a long GC, a
// starved CPU) reads an old answer long after. So a version is taken as seen when its answer
// arrived (no sooner than it was written), but judged expired only by when the read was sent:
// what the Lease showed then, it showed until that moment at least, whenever the answer is read.
import type { Lease } from '../kube/lease.ts';
import type { MonotonicClock } from './clock.ts';

/** The Leases seen in one look, sorted into held and expired. */
export interface Observed {
  readonly held: Lease[];
  readonly expired: Lease[];
  /** When (our clock) the first held Lease expires unless renewed; Infinity when none is held. */
  readonly nextExpiry: number;
  /** The names of held Leases not seen renewed for longer than `lateAfterMs` (see observe). */
  readonly late: ReadonlySet<string>;
  /** The names of held Leases seen at one version only so far: held, but not yet seen renewed. */
  readonly unconfirmed: ReadonlySet<string>;
}

export class LeaseObserver {
  readonly #clock: MonotonicClock;
  /** Each Lease's version as last seen, when (our clock) it was first seen at it, and whether it was seen at another before. */
  readonly #seen = new Map<
    string,
    { readonly version: string | undefined; readonly at: number; readonly renewed: boolean }
  >();

  constructor(clock: MonotonicClock) {
    this.#clock = clock;
  }

  /**
   * Sorts `leases`, every one there is now (a Lease not among them is forgotten), read by a request
   * sent at `sentAt` (this clock) and just answered; a held one not seen renewed for `lateAfterMs`
   * is late too. A Lease without a holder (released) is expired at once.
   */
  observe(leases: readonly Lease[], sentAt: number, lateAfterMs = Infinity): Observed {
    // A version first seen is seen now, after the answer; how long one has stood, until the send.
    const now = this.#clock.now();
    const late = new Set<string>();
    const unconfirmed = new Set<string>();
    const observed = { held: [] as Lease[], expired: [] as Lease[], nextExpiry: Infinity, late, unconfirmed };
    const names = new Set<string>();
    for (const lease of leases) {
      const { name, resourceVersion: version } = lease.metadata;
      names.add(name);
      const before = this.#seen.get(name);
      const seen = before !== undefined && before.version === version
        ? before
        : { version, at: now, renewed: before !== undefined };
      this.#seen.set(name, seen);
      const duration = (lease.spec.leaseDurationSeconds ?? 0) * 1000;
      if (lease.spec.holderIdentity && sentAt - seen.at <= duration) {
        observed.held.push(lease);
        if (sentAt - seen.at > lateAfterMs) late.add(name);
        if (!seen.renewed) unconfirmed.add(name);
        observed.nextExpiry = Math.min(observed.nextExpiry, seen.at + duration + 1);
      } else observed.expired.push(lease);
    }
    for (const name of this.#seen.keys()) if (!names.has(name)) this.#seen.delete(name);
    return observed;
  }
}

/**
 * Deletes the expired Leases of `observed`, each at the version judged expired (`remove` answers
 * false for a 409): one renewed since is live after all, and joins `observed.held` as last read.
 * Those deleted, or whose deletion failed otherwise (gone as judged; the next look deletes them).
 */
export async function deleteExpired(
  observed: Observed,
  remove: (lease: Lease) => Promise<boolean>,
): Promise<Lease[]> {
  const gone: Lease[] = [];
  for (const lease of observed.expired) {
    if (await remove(lease).catch(() => true)) gone.push(lease);
    else observed.held.push(lease);
  }
  return gone;
}
