// One config per field manager. Two labellers with different configs under one server-side apply
// field manager remove each other's labels in a hot loop: each apply drops the keys the other
// applied. So the process that writes (the standalone process, or the leader of a
// leader-election group) holds a Lease, labelled with its field manager, that records the
// fingerprint and scope (kinds × namespaces) of the config in force. Before it writes, and before
// a reloaded config takes effect, a labeller looks for live holders of its field manager (across
// namespaces when it may list Leases cluster-wide, else in its own namespace, and it says so) and
// refuses (FieldManagerTaken, exit 2 or a rejected reload) when one has another config and a
// scope overlapping its own. Two that start together both write, then look again: the younger
// Lease gives way. Replicas of one group never block each other (their Lease already lets one
// write at a time, and a rolling update is how a group changes its config); the group's guard
// Lease is left to expire when its leader stops, so a successor of another config cannot slip
// in between. Holders that stopped renewing expire, and their Leases are deleted once they have
// been expired for a while (a crashed holder's successor has another identity, so another Lease).
// A holder whose own Lease lapsed (its process starved of CPU, or cut off from the API server)
// writes nothing until it has renewed it and found that no other config took the field manager
// meanwhile; if one did, it steps down (FieldManagerTaken), as client-go's leader election does
// after its renew deadline.
import type { KubeClient } from '../kube/client.ts';
import { isForbidden } from '../kube/errors.ts';
import { type Lease, LeaseApi } from '../kube/lease.ts';
import type { Logger } from '../util/log.ts';
import { microTime } from '../util/microtime.ts';
import { sleep } from '../util/sleep.ts';
import { UsageError } from '../util/usage.ts';
import { fieldManagerSelector } from '../config/fieldmanager.ts';
import {
  abandoned,
  blockers,
  type Claim,
  type ClaimedConfig,
  claimMetadata,
  describeHolder,
  guardLeaseName,
  olderThan,
} from './claim.ts';

/** A guard Lease expired for this many lease durations (30 s at least) was left behind by a holder that is gone. */
const ABANDONED_AFTER_LEASES = 10;

export interface GuardOptions {
  /** Where this process's own guard Lease lives (and where it looks when it may not list cluster-wide). */
  readonly namespace: string;
  readonly leaseDurationMs: number;
  /** --ignore-field-manager-guard: report holders of other configs, write anyway. */
  readonly ignore: boolean;
  readonly log: Logger;
}

/** Another labeller with another config holds the field manager: a usage error (exit 2). */
export class FieldManagerTaken extends UsageError {
  override readonly name: string = 'FieldManagerTaken';
}

export class FieldManagerGuard {
  readonly #api: LeaseApi;
  #claim: Claim;
  readonly #options: GuardOptions;
  readonly #name: string;
  /** The Lease as last written, while this process holds it. */
  #held: Lease | undefined;
  /** Said once: the guard sees only its own namespace. */
  #narrowed = false;
  /** Until when (monotonic ms) this process may write: its Lease renewed, and checked after a lapse. */
  #validUntil = -Infinity;
  /** The Lease cannot be held (no rights on Leases): the guard is off and holds no write back. */
  #off = false;
  /** Since when (performance.now()) renewals of a Lease once held have been refused with 403. */
  #forbiddenSince: number | undefined;
  /** Writes waiting for the Lease to be renewed. */
  #waiting: PromiseWithResolvers<void> | undefined;
  /** Set when another config holds the field manager and this process stepped down. */
  #lost: FieldManagerTaken | undefined;

  constructor(api: LeaseApi, claim: Claim, options: GuardOptions) {
    this.#api = api;
    this.#claim = claim;
    this.#options = options;
    this.#name = guardLeaseName(claim);
  }

  /**
   * Undefined when this process may write now (its Lease held and renewed in time: the check on
   * every write, without a promise); else a promise that resolves once it may: before its first
   * write of the Lease, and after a lapse (renewed too late for others to see it as live), once
   * hold() has renewed it and checked. The promise rejects when `signal` aborts first, or when
   * this process stepped down.
   */
  writable(signal?: AbortSignal): Promise<void> | undefined {
    return this.#off || performance.now() < this.#validUntil ? undefined : this.#untilWritable(signal);
  }

  async #untilWritable(signal?: AbortSignal): Promise<void> {
    while (!this.#off && performance.now() >= this.#validUntil) {
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
  async claim(config: ClaimedConfig, signal?: AbortSignal): Promise<void> {
    const next = { ...this.#claim, ...config };
    await this.#check(next, signal);
    this.#claim = next;
    if (this.#held) await this.#settle(signal);
  }

  /**
   * Holds this process's guard Lease while `writes` is not aborted (while it leads), renewed every
   * third of a lease duration; then gives it up, unless a leader-election group shares it. Calls
   * `taken` when an older holder of another config turns out to write what this process does
   * (both started together). Never rejects: without permission on Leases it reports that and stops.
   */
  async hold(writes: AbortSignal, taken: (error: FieldManagerTaken) => void): Promise<void> {
    const { namespace, leaseDurationMs, log } = this.#options;
    const renewMs = Math.ceil(leaseDurationMs / 3);
    while (!writes.aborted) {
      const sent = performance.now();
      // Held once and lapsed since: others may have seen it expired, and another config started.
      const lapsed = this.#validUntil !== -Infinity && sent >= this.#validUntil;
      try {
        if (this.#held) this.#held = await this.#write(this.#held, writes);
        else await this.#settle(writes);
        if (lapsed && this.#held) {
          log.warn('field-manager guard: its Lease lapsed; checking that no other config took the field manager', {
            lease: `${namespace}/${this.#name}`,
            lapsedMs: Math.round(sent - this.#validUntil),
          });
          await this.#check(this.#claim, writes);
        }
        // Others judge the Lease live for its duration from the renewal; a margin covers the request's own time.
        if (this.#held) {
          this.#validUntil = sent + leaseDurationMs * 0.9;
          this.#forbiddenSince = undefined;
          this.#release();
        }
      } catch (error) {
        this.#held = undefined;
        if (writes.aborted) break;
        if (error instanceof FieldManagerTaken) {
          this.#lost = error;
          this.#release();
          await this.#giveUp();
          taken(error);
          return;
        }
        // Once held, a 403 may pass: an API server that has just started answers 403 to everything
        // until its RBAC is loaded. Writes wait meanwhile (the Lease lapses); only rights gone for
        // a whole lease duration switch the guard off, as no rights at the start do at once.
        this.#forbiddenSince = isForbidden(error) ? (this.#forbiddenSince ?? sent) : undefined;
        if (
          this.#forbiddenSince !== undefined &&
          (this.#validUntil === -Infinity || sent - this.#forbiddenSince >= leaseDurationMs)
        ) {
          this.#off = true;
          this.#release();
          log.warn(
            'field-manager guard: cannot hold its Lease, so other labellers cannot see this one; grant create, get, update and delete on leases',
            { lease: `${namespace}/${this.#name}`, error },
          );
          return;
        }
        log.warn('field-manager guard: could not renew its Lease; retrying', {
          lease: `${namespace}/${this.#name}`,
          error,
        });
      }
      await sleep(renewMs, writes);
    }
    // A group's successor takes the Lease over; deleting it would let another config in meanwhile.
    if (!this.#claim.group) await this.#giveUp();
    this.#held = undefined;
  }

  /** Throws FieldManagerTaken when a live holder of another config writes what `claim` would. */
  async #check(claim: Claim, signal?: AbortSignal): Promise<void> {
    const holders = await this.#holders(signal);
    if (!holders) {
      // Nobody can be seen, so nobody can be waited for.
      this.#off = true;
      this.#release();
      return;
    }
    await this.#sweep(holders, signal);
    const found = blockers(holders, claim, Date.now());
    if (found.length > 0) this.#refuse(found, claim);
  }

  /** Lets the writes waiting for the Lease go. */
  #release(): void {
    this.#waiting?.resolve();
    this.#waiting = undefined;
  }

  /** Deletes the guard Leases of this field manager that crashed holders left behind (best effort). */
  async #sweep(holders: readonly Lease[], signal?: AbortSignal): Promise<void> {
    const graceMs = Math.max(30_000, ABANDONED_AFTER_LEASES * this.#options.leaseDurationMs);
    for (const lease of abandoned(holders, Date.now(), graceMs)) {
      // The resourceVersion precondition keeps a Lease renewed meanwhile.
      await this.#api.delete(lease, signal).catch(() => {});
    }
  }

  /** Writes the claim, then looks again: a holder of another config whose Lease is older wins. */
  async #settle(signal?: AbortSignal): Promise<void> {
    const current = this.#held ?? (await this.#api.get(this.#options.namespace, this.#name, signal));
    this.#held = await this.#write(current, signal);
    const mine = this.#held;
    if (!mine) return;
    const holders = await this.#holders(signal);
    const older = blockers(holders ?? [], this.#claim, Date.now()).filter((lease) => olderThan(lease, mine));
    if (older.length > 0) this.#refuse(older, this.#claim);
  }

  #refuse(found: readonly Lease[], claim: Claim): void {
    const { fieldManager } = claim;
    const described = found.map((lease) => describeHolder(lease, claim, Date.now())).join('; ');
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

  /** Given up, so a new config can start at once. A second at most: the API server may be away, and the Lease expires by itself. */
  async #giveUp(): Promise<void> {
    const timeout = AbortSignal.timeout(Math.min(Math.ceil(this.#options.leaseDurationMs / 3), 1000));
    // Read back first: a write cut short may still have reached the server.
    const mine = await this.#api.get(this.#options.namespace, this.#name, timeout).catch(() => undefined);
    if (mine?.spec.holderIdentity === this.#claim.identity) await this.#api.delete(mine, timeout).catch(() => {});
  }

  /** Writes the claim over `current` (the Lease as last written or read; undefined: none yet). A lost race (409) leaves nothing held, retried from a fresh read. */
  async #write(current: Lease | undefined, signal?: AbortSignal): Promise<Lease | undefined> {
    const { namespace, leaseDurationMs } = this.#options;
    const { identity } = this.#claim;
    const now = microTime();
    const lease: Lease = {
      metadata: { ...current?.metadata, name: this.#name, namespace, ...claimMetadata(current?.metadata, this.#claim) },
      spec: {
        holderIdentity: identity,
        leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
        acquireTime: current?.spec.holderIdentity === identity ? (current.spec.acquireTime ?? now) : now,
        renewTime: now,
      },
    };
    return current ? this.#api.update(lease, signal) : this.#api.create(lease, signal);
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
