// One config per field manager. Two labellers with different configs under one server-side apply
// field manager remove each other's labels in a hot loop: each apply drops the keys the other
// applied. So the process that writes (the standalone process, or the leader of a
// leader-election group) holds a Lease, labelled with its field manager, that records the
// fingerprint and scope (kinds × namespaces) of the config in force. Before it writes, and before
// a reloaded config takes effect, a labeller looks for live holders of its field manager (across
// namespaces when it may list Leases cluster-wide, else in its own namespace, and it says so) and
// refuses (FieldManagerTaken, exit 2 or a rejected reload) when one has another config and a
// scope overlapping its own. A holder is live as lease/observer.ts judges it, by this host's
// clock from when its Lease was seen to change: one seen once only is looked at again until it is
// seen renewed (live: a third of its duration at most) or unchanged for its whole duration (gone). Two that start together both write, then look again: the younger
// Lease gives way. Replicas of one group never block each other (their Lease already lets one
// write at a time, and a rolling update is how a group changes its config); the group's guard
// Lease is left to expire when its leader stops, so a successor of another config cannot slip
// in between. Holders that stopped renewing expire, and their Leases are deleted when a look sees
// them expired (a crashed holder's successor has another identity, so another Lease).
// A holder whose own Lease lapsed (its process starved of CPU, or cut off from the API server)
// writes nothing until it has renewed it and found that no other config took the field manager
// meanwhile; if one did, it steps down (FieldManagerTaken), as client-go's leader election does
// after its renew deadline.
import type { KubeClient } from '../kube/client.ts';
import { isForbidden } from '../apimachinery/errors.ts';
import { type Lease, LeaseApi } from '../kube/lease.ts';
import { type MonotonicClock, monotonicClock } from '../lease/clock.ts';
import { LeaseHolder, type LeaseStore } from '../lease/holder.ts';
import { deleteExpired, LeaseObserver, type Observed } from '../lease/observer.ts';
import type { Logger } from '../util/log.ts';
import { UsageError } from '../util/usage.ts';
import { fieldManagerSelector } from '../config/fieldmanager.ts';
import {
  blockers,
  type Claim,
  type ClaimedConfig,
  claimMetadata,
  describeHolder,
  guardLeaseName,
  olderThan,
} from './claim.ts';

export interface GuardOptions {
  /** Where this process's own guard Lease lives (and where it looks when it may not list cluster-wide). */
  readonly namespace: string;
  readonly leaseDurationMs: number;
  /** --ignore-field-manager-guard: report holders of other configs, write anyway. */
  readonly ignore: boolean;
  readonly log: Logger;
  readonly clock?: MonotonicClock | undefined;
}

/** Another labeller with another config holds the field manager: a usage error (exit 2). */
export class FieldManagerTaken extends UsageError {
  override readonly name: string = 'FieldManagerTaken';
}

export class FieldManagerGuard {
  readonly #api: LeaseStore;
  #claim: Claim;
  readonly #options: GuardOptions;
  readonly #clock: MonotonicClock;
  readonly #lease: LeaseHolder;
  /** Other holders' Leases, judged by this host's clock. */
  readonly #observer: LeaseObserver;
  /** Said once: the guard sees only its own namespace. */
  #narrowed = false;
  /** The Lease cannot be held (no rights on Leases): the guard is off and holds no write back. */
  #off = false;
  /** Writes wait while the holders are looked at: after the first write of the Lease, after a lapse, after a new claim. */
  #checking = false;
  /** The checks, one after another. */
  #checks: Promise<void> = Promise.resolve();
  /** Whether the Lease was written once: the first renewal is followed by a look for older holders. */
  #settled = false;
  /** Writes waiting for the Lease to be renewed and checked. */
  #waiting: PromiseWithResolvers<void> | undefined;
  /** Set when another config holds the field manager and this process stepped down. */
  #lost: FieldManagerTaken | undefined;

  constructor(api: LeaseStore, claim: Claim, options: GuardOptions) {
    this.#api = api;
    this.#claim = claim;
    this.#options = options;
    this.#clock = options.clock ?? monotonicClock;
    this.#observer = new LeaseObserver(this.#clock);
    const { namespace, leaseDurationMs, log } = options;
    this.#lease = new LeaseHolder(api, {
      namespace,
      name: guardLeaseName(claim),
      identity: claim.identity,
      leaseDurationMs,
      // Others judge the Lease live for its duration from the renewal; a margin covers the request's own time.
      validForMs: leaseDurationMs * 0.9,
      renewEveryMs: Math.ceil(leaseDurationMs / 3),
      // Once held, a 403 may pass: an API server that has just started answers 403 to everything
      // until its RBAC is loaded. Writes wait meanwhile; only rights gone for a whole lease duration
      // switch the guard off, as no rights at the start do at once.
      forbiddenGraceMs: leaseDurationMs,
      content: (current) => claimMetadata(current, this.#claim),
      clock: this.#clock,
      log,
    });
  }

  /**
   * Undefined when this process may write now (its Lease held, renewed in time and checked: the
   * check on every write, without a promise); else a promise that resolves once it may: before
   * its first write of the Lease, and after a lapse (renewed too late for others to see it as
   * live), once hold() has renewed it and checked. The promise rejects when `signal` aborts
   * first, or when this process stepped down.
   */
  writable(signal?: AbortSignal): Promise<void> | undefined {
    return this.holds() ? undefined : this.#untilWritable(signal);
  }

  /** Whether this process may write now: the check as each write is sent. */
  holds(): boolean {
    return this.#off || (!this.#checking && this.#lease.valid());
  }

  async #untilWritable(signal?: AbortSignal): Promise<void> {
    while (!this.holds()) {
      // Stepped down: nothing more is written (the process is stopping).
      if (this.#lost) throw this.#lost;
      signal?.throwIfAborted();
      this.#waiting ??= Promise.withResolvers<void>();
      const { promise } = this.#waiting;
      await new Promise<void>((resolve, reject) => {
        const abort = () => reject(signal?.reason);
        signal?.addEventListener('abort', abort, { once: true });
        void promise.then(() => {
          signal?.removeEventListener('abort', abort);
          resolve();
        });
      });
    }
  }

  /**
   * Makes `config` the claim of this process: throws FieldManagerTaken when a live holder of
   * another config writes what it would; while this process holds its Lease, the Lease says the
   * new config at once (and is checked again, as after a first write).
   */
  async claim(config: ClaimedConfig, signal: AbortSignal = new AbortController().signal): Promise<void> {
    const next = { ...this.#claim, ...config };
    const found = await this.#blockers(next, signal);
    if (found.length > 0) this.#refuse(found, next);
    this.#claim = next;
    if (!this.#settled) return;
    await this.#lease.round(signal);
    await this.#checkHeld(false, signal);
  }

  /**
   * Holds this process's guard Lease while `writes` is not aborted (while it leads), renewed every
   * third of a lease duration; then gives it up, unless a leader-election group shares it. Calls
   * `taken` when an older holder of another config turns out to write what this process does
   * (both started together), or one took the field manager while its Lease had lapsed. Never
   * rejects: without permission on Leases it reports that and stops.
   */
  async hold(writes: AbortSignal, taken: (error: FieldManagerTaken) => void): Promise<void> {
    const { namespace, leaseDurationMs, log } = this.#options;
    const stop = new AbortController();
    const signal = AbortSignal.any([writes, stop.signal]);
    const check = (lapsed: boolean) => {
      this.#checking = true;
      this.#checks = this.#checks.then(async () => {
        try {
          await this.#checkHeld(lapsed, signal);
          this.#checking = false;
          this.#release();
        } catch (error) {
          if (signal.aborted) return;
          if (!(error instanceof FieldManagerTaken)) {
            // Looked at again at the next renewal; writes wait meanwhile.
            log.warn('field-manager guard: could not look for other holders; retrying', { error });
            return;
          }
          this.#lost = error;
          this.#release();
          stop.abort();
          await this.#giveUp();
          taken(error);
        }
      });
    };
    let renewals = 0;
    await this.#lease.run(signal, {
      renewed: (lapsed) => {
        if (!this.#settled || lapsed || this.#checking) {
          const first = !this.#settled;
          this.#settled = true;
          check(!first);
          return;
        }
        this.#release();
        // About once a lease duration, a look at the others, so Leases left behind are seen expired and deleted.
        if (++renewals % 3 === 0) {
          this.#checks = this.#checks.then(() => this.#look(this.#claim, signal).then(() => {}, () => {}));
        }
      },
      forbidden: (error) => {
        this.#off = true;
        this.#release();
        log.warn(
          'field-manager guard: cannot hold its Lease, so other labellers cannot see this one; grant create, get, update and delete on leases',
          { lease: `${namespace}/${guardLeaseName(this.#claim)}`, error, leaseDurationMs },
        );
      },
    });
    await this.#checks;
    if (this.#lost) return;
    // A group's successor takes the Lease over; deleting it would let another config in meanwhile.
    await this.#lease.release(this.#claim.group ? 'keep' : 'delete', this.#giveUpMs());
  }

  /**
   * After the first write of the Lease, a holder of another config whose Lease is older wins
   * (both started together); after a lapse, any live holder of another config does (it started
   * while this one's Lease looked expired).
   */
  async #checkHeld(lapsed: boolean, signal: AbortSignal): Promise<void> {
    const mine = this.#lease.lease;
    if (lapsed) {
      this.#options.log.warn(
        'field-manager guard: its Lease lapsed; checking that no other config took the field manager',
        {
          lease: this.#lease.description,
        },
      );
    }
    const found = (await this.#blockers(this.#claim, signal))
      .filter((lease) => lapsed || (mine !== undefined && olderThan(lease, mine)));
    if (found.length > 0) this.#refuse(found, this.#claim);
  }

  /**
   * The live holders of another config that must stop `claim` from writing. A Lease seen once
   * only is looked at again until it is seen renewed (then it blocks) or unchanged for its whole
   * duration (left behind: deleted).
   */
  async #blockers(claim: Claim, signal: AbortSignal): Promise<Lease[]> {
    for (;;) {
      const seen = await this.#look(claim, signal);
      if (!seen) return [];
      const found = blockers(seen.held, claim);
      const unsure = found.filter((lease) => seen.unconfirmed.has(lease.metadata.name));
      if (unsure.length === 0) return found;
      const waitMs = Math.min(Math.ceil(this.#options.leaseDurationMs / 3), seen.nextExpiry - this.#clock.now());
      this.#options.log.info(
        'field-manager guard: a holder of another config seen for the first time; looking again to tell whether it is live',
        { holders: unsure.map((lease) => describeHolder(lease, claim)).join('; '), waitMs },
      );
      await this.#clock.sleep(waitMs, signal);
      signal.throwIfAborted();
    }
  }

  /**
   * The other holders of this field manager as the observer judges them; those seen expired are
   * deleted (a holder that crashed: its successor has another identity, so another Lease).
   * Undefined when they cannot be listed: the guard is off.
   */
  async #look(claim: Claim, signal: AbortSignal): Promise<Observed | undefined> {
    const sent = this.#clock.now();
    const holders = await this.#holders(signal);
    if (!holders) {
      // Nobody can be seen, so nobody can be waited for.
      this.#off = true;
      this.#release();
      return undefined;
    }
    const mine = guardLeaseName(claim);
    const seen = this.#observer.observe(
      holders.filter((lease) =>
        !(lease.metadata.name === mine && lease.metadata.namespace === this.#options.namespace)
      ),
      sent,
    );
    await deleteExpired(seen, (lease) => this.#api.delete(lease, signal));
    return seen;
  }

  /** Lets the writes waiting for the Lease go. */
  #release(): void {
    this.#waiting?.resolve();
    this.#waiting = undefined;
  }

  #refuse(found: readonly Lease[], claim: Claim): void {
    const { fieldManager } = claim;
    const described = found.map((lease) => describeHolder(lease, claim)).join('; ');
    if (this.#options.ignore) {
      this.#options.log.warn(
        "field manager held by another config; writing anyway (--ignore-field-manager-guard): the two will remove each other's labels",
        { fieldManager, holders: described },
      );
      return;
    }
    throw new FieldManagerTaken(
      `field manager "${fieldManager}" is held by another labeller with a different config: ${described}. ` +
        "Two configs under one field manager remove each other's labels; run with the same config, pick another --field-manager, or pass --ignore-field-manager-guard to write anyway",
    );
  }

  /** A second at most: the API server may be away, and the Lease expires by itself. */
  #giveUpMs(): number {
    return Math.min(Math.ceil(this.#options.leaseDurationMs / 3), 1000);
  }

  /** Given up, so a new config can start at once. */
  async #giveUp(): Promise<void> {
    await this.#lease.release('delete', this.#giveUpMs());
  }

  /** The guard Leases of this field manager: cluster-wide if allowed, else in the own namespace; undefined when neither is. */
  async #holders(signal?: AbortSignal): Promise<readonly Lease[] | undefined> {
    const selector = fieldManagerSelector(this.#claim.fieldManager);
    const { namespace, log } = this.#options;
    try {
      return await this.#api.list('', selector, signal);
    } catch (error) {
      if (!isForbidden(error)) throw error;
    }
    try {
      const leases = await this.#api.list(namespace, selector, signal);
      if (!this.#narrowed) {
        this.#narrowed = true;
        log.warn(
          'field-manager guard sees only its own namespace: may not list leases cluster-wide, so a labeller of another config under this field manager in another namespace goes unnoticed; grant list on leases cluster-wide',
          { namespace },
        );
      }
      return leases;
    } catch (error) {
      if (!isForbidden(error)) throw error;
    }
    log.warn(
      'field-manager guard off: may not list leases, so labellers with other configs under this field manager go unnoticed; grant list on leases',
      { namespace },
    );
    return undefined;
  }
}

/** The guard of this process, grouped with its leader-election replicas; its first claim is made with claim(). */
export function guardFor(
  client: KubeClient,
  options: {
    readonly fieldManager: string;
    readonly leaderElection?: { readonly namespace: string; readonly name: string } | undefined;
    readonly guard: Omit<GuardOptions, 'log'> & { readonly identity: string; readonly shardGroup?: string | undefined };
  },
  log: Logger,
): FieldManagerGuard {
  const group = options.leaderElection && `${options.leaderElection.namespace}/${options.leaderElection.name}`;
  return new FieldManagerGuard(
    new LeaseApi(client),
    {
      fieldManager: options.fieldManager,
      fingerprint: '',
      scope: [],
      group,
      shardGroup: options.guard.shardGroup,
      identity: options.guard.identity,
    },
    { ...options.guard, log },
  );
}
