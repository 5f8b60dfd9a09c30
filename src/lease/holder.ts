// One Lease held by this process: the building block under leader election, the field-manager
// guard and shard membership, each of which is a policy on top (who may take the Lease, what it
// carries, what a lapse means).
//  - Renewing runs in its own loop, every `renewEveryMs`, and nothing else waits in it: a drain,
//    a check of other holders or writes in flight never hold a renewal back.
//  - The claim is valid until a renewal's send time plus `validForMs` (less than the lease
//    duration, which is what others wait from when they saw it change), by this host's monotonic
//    clock only. Each round is given up at that instant. When it passes, `claim` aborts: writes
//    check `valid()` as they are sent, and those on the wire are aborted.
//  - A 403 on a Lease once held is borne for `forbiddenGraceMs` (an API server that has just
//    started answers 403 to everything until its RBAC is loaded); one before the first hold, or
//    past the grace, is reported and the loop ends.
//  - release() stops renewing and gives the Lease up: deleted, cleared for a successor, or kept.
// A write is a compare-and-swap on the resourceVersion last written: a 409 means someone else
// wrote, and the next round reads the Lease and asks the policy whether it may take it.
import { setMaxListeners } from 'node:events';
import { isForbidden, isNotFound } from '../apimachinery/errors.ts';
import type { Lease, LeaseApi } from '../kube/lease.ts';
import type { Logger } from '../util/log.ts';
import { microTime } from '../util/microtime.ts';
import { after, type MonotonicClock, monotonicClock } from './clock.ts';

/** What holding a Lease needs of the Lease API (kube/lease.ts's LeaseApi). */
export type LeaseStore = Pick<LeaseApi, 'get' | 'create' | 'update' | 'delete' | 'list'>;

/** Why the claim ended: it was not renewed in time, or it was released. */
export class ClaimLapsed extends Error {
  override readonly name = 'ClaimLapsed';
}

export interface HolderOptions {
  readonly namespace: string;
  readonly name: string;
  readonly identity: string;
  /** What others wait, from when they saw the Lease change, before they count it expired. */
  readonly leaseDurationMs: number;
  /** How long a renewal keeps the claim, from when it was sent: below the lease duration, the margin for requests on the wire. */
  readonly validForMs: number;
  readonly renewEveryMs: number;
  /** 403s on a Lease once held are borne this long; undefined: every round's failure is only retried. */
  readonly forbiddenGraceMs?: number | undefined;
  /** The labels and annotations the Lease carries, over those it has: asked at every write. */
  readonly content?:
    | ((current: Lease['metadata'] | undefined) => Pick<Lease['metadata'], 'labels' | 'annotations'>)
    | undefined;
  /**
   * Whether this process may write over a Lease another holds, `current` as read by a request
   * sent at `sentAt` (the clock's): leader election's rule. Default: always (a Lease only this
   * process, or its group's leader, writes).
   */
  readonly mayTake?: ((current: Lease, sentAt: number) => boolean) | undefined;
  readonly clock?: MonotonicClock | undefined;
  readonly log: Logger;
}

/** One round's answer. */
export type Round = 'renewed' | 'held' | 'failed' | 'forbidden';

export interface HolderEvents {
  /**
   * After each renewal, synchronously as the claim becomes valid (it must not throw); `lapsed`:
   * the claim had lapsed before it, so others may have acted meanwhile.
   */
  readonly renewed?: ((lapsed: boolean) => void) | undefined;
  /** The claim lapsed: not renewed in time. */
  readonly lapsed?: (() => void) | undefined;
  /** Another process holds the Lease, and the policy may not take it. */
  readonly held?: ((holder: string) => void) | undefined;
  /** 403s before the first hold, or past the grace; renewing ends. */
  readonly forbidden?: ((error: unknown) => void) | undefined;
}

export class LeaseHolder {
  readonly #api: LeaseStore;
  readonly #options: HolderOptions;
  readonly #clock: MonotonicClock;
  /** The Lease as last written by this process; undefined when it must be read first. */
  #held: Lease | undefined;
  /** As last read, when a write must be built on it. */
  #read: Lease | undefined;
  #validUntil = -Infinity;
  #everHeld = false;
  #forbiddenSince: number | undefined;
  #claim = new AbortController();
  #cancelLapse: () => void = () => {};
  #wake: (() => void) | undefined;
  #round: Promise<Round> | undefined;
  #events: HolderEvents = {};
  #released = false;

  constructor(api: LeaseStore, options: HolderOptions) {
    this.#api = api;
    this.#options = options;
    this.#clock = options.clock ?? monotonicClock;
    this.#claim.abort(new ClaimLapsed('not held yet'));
  }

  /** `namespace/name`, for logs. */
  get description(): string {
    return `${this.#options.namespace}/${this.#options.name}`;
  }

  /** Whether the claim holds now: the check a write makes as it is sent. */
  valid(): boolean {
    return this.#clock.now() < this.#validUntil;
  }

  /** Whether the Lease was held once and its claim lapsed since (not released). */
  #lapsed(): boolean {
    return this.#everHeld && !this.#released && !this.valid();
  }

  /** Aborted (with ClaimLapsed) when the current claim ends; a renewal after a lapse starts a new one. */
  get claim(): AbortSignal {
    return this.#claim.signal;
  }

  /** The Lease as this process last wrote it. */
  get lease(): Lease | undefined {
    return this.#held;
  }

  /** The Lease as last read when another held it. */
  get seen(): Lease | undefined {
    return this.#read;
  }

  /** Renews every `renewEveryMs` (at once first unless `delayFirst`) until `signal` aborts or 403s end it. */
  async run(signal: AbortSignal, events: HolderEvents = {}, delayFirst = false): Promise<void> {
    this.#events = events;
    let wait = delayFirst;
    while (!signal.aborted) {
      if (wait) await this.#sleep(this.#options.renewEveryMs, signal);
      wait = true;
      if (signal.aborted) break;
      const round = await this.round(signal);
      if (round === 'forbidden') return;
    }
  }

  /** Asks the loop for a write now: the content changed (published at once, not a round later). */
  renewSoon(): void {
    this.#wake?.();
  }

  /**
   * One round: read when needed, ask the policy, write; bounded by the claim (or a fresh one's
   * length). After the round in flight, if any: one write at a time.
   */
  round(signal: AbortSignal): Promise<Round> {
    const previous = this.#round;
    const next = (async () => {
      await previous;
      const round = await this.#roundOnce(signal);
      if (round.round === 'held') this.#events.held?.(round.holder);
      else if (round.round === 'forbidden') this.#events.forbidden?.(round.error);
      return round.round;
    })();
    this.#round = next;
    void next.finally(() => {
      if (this.#round === next) this.#round = undefined;
    });
    return next;
  }

  async #roundOnce(
    parent: AbortSignal,
  ): Promise<
    | { round: 'renewed' }
    | { round: 'held'; holder: string }
    | { round: 'failed' }
    | { round: 'forbidden'; error: unknown }
  > {
    const { validForMs, forbiddenGraceMs, log } = this.#options;
    const sent = this.#clock.now();
    const wasLapsed = this.#lapsed();
    const bound = new AbortController();
    const cancel = after(
      this.#clock,
      (this.valid() ? this.#validUntil : sent + validForMs) - sent,
      () => bound.abort(new ClaimLapsed('Lease round past its deadline')),
    );
    const signal = AbortSignal.any([parent, bound.signal]);
    try {
      const written = await this.#write(signal);
      if (typeof written === 'string') return { round: 'held', holder: written };
      if (!written || this.#released) return { round: 'failed' };
      this.#renewed(sent, wasLapsed);
      return { round: 'renewed' };
    } catch (error) {
      if (signal.aborted) {
        log.debug('Lease round cut short', { lease: this.description, reason: String(signal.reason) });
        return { round: 'failed' };
      }
      if (isForbidden(error) && forbiddenGraceMs !== undefined) {
        this.#forbiddenSince ??= sent;
        if (!this.#everHeld || sent - this.#forbiddenSince >= forbiddenGraceMs) return { round: 'forbidden', error };
      } else this.#forbiddenSince = undefined;
      log.warn('could not renew the Lease; retrying', { lease: this.description, error });
      return { round: 'failed' };
    } finally {
      cancel();
    }
  }

  /** Writes the Lease; the holder's identity when another holds it and the policy may not take it, undefined when a race was lost. */
  async #write(signal: AbortSignal): Promise<Lease | string | undefined> {
    const { namespace, name, identity, leaseDurationMs, content, mayTake } = this.#options;
    let current = this.#held;
    if (!current) {
      const sent = this.#clock.now();
      current = this.#read = await this.#api.get(namespace, name, signal);
      const holder = current?.spec.holderIdentity;
      if (current && holder && holder !== identity && mayTake && !mayTake(current, sent)) return holder;
    }
    const now = microTime(performance.timeOrigin + this.#clock.now());
    const holder = current?.spec.holderIdentity ?? '';
    const transition = holder !== identity;
    const lease: Lease = {
      metadata: { ...current?.metadata, name, namespace, ...content?.(current?.metadata) },
      spec: {
        holderIdentity: identity,
        leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
        acquireTime: transition ? now : (current?.spec.acquireTime ?? now),
        renewTime: now,
        leaseTransitions: (current?.spec.leaseTransitions ?? 0) + (transition && holder !== '' ? 1 : 0),
      },
    };
    try {
      this.#held = current ? await this.#api.update(lease, signal) : await this.#api.create(lease, signal);
    } catch (error) {
      // Deleted meanwhile (another member's sweep after a lapse): created anew next round.
      if (!isNotFound(error)) throw error;
      this.#held = undefined;
    }
    if (this.#held) return this.#held;
    // A race lost: someone else wrote. Who, is known at once; taking it over waits for the next round.
    const sent = this.#clock.now();
    const read = await this.#api.get(namespace, name, signal);
    this.#read = read;
    const taker = read?.spec.holderIdentity;
    return read && taker && taker !== identity && mayTake && !mayTake(read, sent) ? taker : undefined;
  }

  /** Told at once, before anything else runs (so a policy can hold writes back after a lapse before they see the claim valid). */
  #renewed(sent: number, lapsed: boolean): void {
    const { validForMs } = this.#options;
    this.#forbiddenSince = undefined;
    this.#validUntil = sent + validForMs;
    if (!this.#everHeld || this.#claim.signal.aborted) {
      this.#claim = new AbortController();
      // Every write of the process listens for the end of the claim: not a leak.
      setMaxListeners(0, this.#claim.signal);
    }
    this.#everHeld = true;
    this.#cancelLapse();
    this.#cancelLapse = after(this.#clock, this.#validUntil - this.#clock.now(), () => this.#lapse());
    this.#events.renewed?.(lapsed);
  }

  #lapse(): void {
    if (this.#claim.signal.aborted) return;
    this.#claim.abort(new ClaimLapsed(`Lease ${this.description} not renewed in time`));
    this.#events.lapsed?.();
  }

  /**
   * Stops the claim and gives the Lease up, after the round in flight: `delete` it (others see
   * this process gone at once), `clear` its holder (leader election: a standby takes it at once),
   * or `keep` it to expire (a successor of the group takes it over). The caller stops run() first.
   */
  async release(how: 'delete' | 'clear' | 'keep', timeoutMs: number): Promise<boolean> {
    this.#released = true;
    this.#validUntil = -Infinity;
    this.#cancelLapse();
    if (!this.#claim.signal.aborted) this.#claim.abort(new ClaimLapsed(`Lease ${this.description} released`));
    await this.#round;
    const held = this.#held;
    this.#held = undefined;
    if (how === 'keep' || !this.#everHeld) return false;
    const { namespace, name, identity, log } = this.#options;
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      // At the version last written; a write cut short may have landed after all, at a version
      // unknown here: a conflict reads the Lease again, given up if it is still this holder's.
      let current = held;
      for (let attempt = 0; attempt < 2; attempt++) {
        if (!current || attempt > 0) current = await this.#api.get(namespace, name, signal);
        if (current?.spec.holderIdentity !== identity) return false;
        if (how === 'delete') {
          if (await this.#api.delete(current, signal)) return true;
          continue;
        }
        const cleared: Lease = {
          metadata: current.metadata,
          spec: { ...current.spec, holderIdentity: null, acquireTime: null, renewTime: null, leaseDurationSeconds: 1 },
        };
        if (await this.#api.update(cleared, signal)) return true;
      }
      log.warn('could not give the Lease up; it expires by itself', { lease: this.description });
    } catch (error) {
      log.warn('could not give the Lease up; it expires by itself', { lease: this.description, error });
    }
    return false;
  }

  /** Sleeps `ms`, or until renewSoon(). */
  async #sleep(ms: number, signal: AbortSignal): Promise<void> {
    const woken = new AbortController();
    this.#wake = () => woken.abort();
    try {
      await this.#clock.sleep(ms, AbortSignal.any([signal, woken.signal]));
    } finally {
      this.#wake = undefined;
    }
  }
}
