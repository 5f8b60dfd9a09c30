// Leader election on a lease, as client-go's leaderelection does it, with a deadline that makes
// "one writer at a time" hold:
//  - A candidate acquires the lease when it is free or expired. Expiry is judged by its own
//    monotonic clock, counting from when it last saw the lease change, so clock skew between
//    nodes does not matter.
//  - The leader renews every retry period. It stays leader until the start of its last
//    successful renewal plus the renew deadline; each renewal round (read and write together)
//    is bounded by that instant. When it passes, `leadership` aborts: no new work, and writes
//    still in flight are aborted. A standby takes over no earlier than that renewal's start plus
//    the lease duration, so the difference is the margin for aborted requests still on the wire.
//  - Renewal goes on until release() (after a shutdown has drained), which gives the lease up.
import { setMaxListeners } from 'node:events';
import type { LeaseSpec } from '../kube/lease.ts';
import type { Logger } from '../util/log.ts';
import { microTime } from '../util/microtime.ts';
import { sleep } from '../util/sleep.ts';

/** The lease as a lock (kube/lease.ts's LeaseLock): `false` from a write means another candidate wrote first. */
export interface ElectionLock {
  /** `namespace/name`, for logs. */
  readonly description: string;
  get(signal: AbortSignal): Promise<LeaseSpec | undefined>;
  create(spec: LeaseSpec, signal: AbortSignal): Promise<boolean>;
  update(spec: LeaseSpec, signal: AbortSignal): Promise<boolean>;
}

export interface MonotonicClock {
  /** Milliseconds on a monotonic clock. */
  now(): number;
  /** Waits `ms` on this clock, or less if `signal` aborts first (never rejects). */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const monotonicClock: MonotonicClock = { now: () => performance.now(), sleep };

export interface LeaderElectionOptions {
  /** Unique per process: hostname plus a random suffix. */
  readonly identity: string;
  /** controller-runtime's defaults: 15 s, 10 s, 2 s; retry < renew deadline < lease duration. */
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  readonly log: Logger;
  readonly onLeadingChange?: ((leading: boolean) => void) | undefined;
}

/** Why `leadership` aborted when it was not released: another process may be writing now. */
export class LeadershipLost extends Error {
  override readonly name = 'LeadershipLost';
}

export class LeaderElector {
  readonly #lock: ElectionLock;
  readonly #options: LeaderElectionOptions;
  readonly #clock: MonotonicClock;
  readonly #leadership = new AbortController();
  /** The lease as last read or written, and when (our clock) it last changed. */
  #observed: LeaseSpec | undefined;
  #observedAt = 0;
  #leading = false;
  /** When (our clock) the last successful acquire or renewal round started. */
  #lastRenew = 0;
  #renewing: Promise<void> = Promise.resolve();
  #cancelDeadline: () => void = () => {};

  constructor(lock: ElectionLock, options: LeaderElectionOptions, clock: MonotonicClock = monotonicClock) {
    this.#lock = lock;
    this.#options = options;
    this.#clock = clock;
    // Every controller listens for the end of leadership: not a leak, however many kinds.
    setMaxListeners(0, this.#leadership.signal);
  }

  get leading(): boolean {
    return this.#leading;
  }

  /**
   * Aborted the moment this process must stop writing: with a LeadershipLost when the renew
   * deadline passed or another holder was seen, or at release().
   */
  get leadership(): AbortSignal {
    return this.#leadership.signal;
  }

  /**
   * Resolves true once this process leads, then renews in the background until release() or
   * until leadership is lost; false if `signal` aborts first. Aborting `signal` later does not
   * stop the renewals: a leader keeps its lease while it drains.
   */
  async acquire(signal: AbortSignal): Promise<boolean> {
    const { retryPeriodMs, renewDeadlineMs, log, identity } = this.#options;
    log.info('waiting for leadership', { lease: this.#lock.description, identity });
    for (;;) {
      if (signal.aborted) return false;
      const start = this.#clock.now();
      if (await this.#round(start + renewDeadlineMs, signal)) {
        this.#setLeading(true);
        this.#renewed(start);
        log.info('became leader', { lease: this.#lock.description, identity });
        this.#renewing = this.#renewLoop();
        return true;
      }
      await this.#clock.sleep(jittered(retryPeriodMs), signal);
    }
  }

  /** Stops renewing and gives the lease up, so a standby takes over without waiting for expiry. */
  async release(): Promise<void> {
    if (!this.#leading) return;
    this.#setLeading(false);
    this.#cancelDeadline();
    this.#leadership.abort(new Error('leadership released'));
    // An aborted renewal ends first, so the release is the last write.
    await this.#renewing;
    const { log, renewDeadlineMs, identity } = this.#options;
    const released: LeaseSpec = {
      ...this.#observed,
      holderIdentity: null,
      acquireTime: null,
      renewTime: null,
      leaseDurationSeconds: 1,
    };
    const signal = AbortSignal.timeout(renewDeadlineMs);
    try {
      // A second try when the aborted renewal's write landed after all (its version is unknown here).
      for (let attempt = 0; attempt < 2; attempt++) {
        if (await this.#lock.update(released, signal)) {
          log.info('released leadership', { lease: this.#lock.description });
          return;
        }
        if ((await this.#lock.get(signal))?.holderIdentity !== identity) return;
      }
      log.warn('could not release the lease; it expires by itself', { lease: this.#lock.description });
    } catch (error) {
      log.warn('could not release the lease; it expires by itself', { lease: this.#lock.description, error });
    }
  }

  async #renewLoop(): Promise<void> {
    const { retryPeriodMs, renewDeadlineMs } = this.#options;
    const stop = this.#leadership.signal;
    while (!stop.aborted) {
      await this.#clock.sleep(retryPeriodMs, stop);
      if (stop.aborted) return;
      const start = this.#clock.now();
      const renewed = await this.#round(this.#lastRenew + renewDeadlineMs, stop);
      if (stop.aborted) return;
      const holder = this.#observed?.holderIdentity;
      if (renewed) this.#renewed(start);
      else if (holder && holder !== this.#options.identity) this.#lose(`the lease is held by ${holder}`);
    }
  }

  /** One attempt to acquire or renew, given up at `until` (our clock). */
  async #round(until: number, parent: AbortSignal): Promise<boolean> {
    const bound = new AbortController();
    const cancel = this.#after(
      until - this.#clock.now(),
      () => bound.abort(new Error('leader election round past its deadline')),
    );
    try {
      return await this.#tryAcquireOrRenew(AbortSignal.any([parent, bound.signal]));
    } finally {
      cancel();
    }
  }

  /** A successful renewal that started at `start`: leadership now lasts until start + renew deadline. */
  #renewed(start: number): void {
    const { renewDeadlineMs } = this.#options;
    this.#lastRenew = start;
    this.#cancelDeadline();
    this.#cancelDeadline = this.#after(
      start + renewDeadlineMs - this.#clock.now(),
      () => this.#lose(`not renewed within the renew deadline (${renewDeadlineMs} ms)`),
    );
  }

  #lose(why: string): void {
    if (this.#leadership.signal.aborted) return;
    this.#cancelDeadline();
    this.#setLeading(false);
    this.#leadership.abort(new LeadershipLost(`lost leadership of lease ${this.#lock.description}: ${why}`));
    this.#options.log.error('lost leadership', { lease: this.#lock.description, reason: why });
  }

  /** One round of client-go's tryAcquireOrRenew; false when someone else holds a live lease or the round failed. */
  async #tryAcquireOrRenew(signal: AbortSignal): Promise<boolean> {
    const { identity, leaseDurationMs, log } = this.#options;
    const now = microTime(performance.timeOrigin + this.#clock.now());
    const leaseDurationSeconds = Math.ceil(leaseDurationMs / 1000);
    try {
      const current = await this.#lock.get(signal);
      if (!current) {
        const created: LeaseSpec = {
          holderIdentity: identity,
          leaseDurationSeconds,
          acquireTime: now,
          renewTime: now,
          leaseTransitions: 0,
        };
        return (await this.#lock.create(created, signal)) && this.#observe(created);
      }
      this.#observe(current);
      const holder = current.holderIdentity ?? '';
      const expired = this.#clock.now() > this.#observedAt + (current.leaseDurationSeconds ?? 0) * 1000;
      if (holder !== '' && holder !== identity && !expired) {
        log.debug('lease held by another candidate', { lease: this.#lock.description, holder });
        return false;
      }
      const transition = holder !== identity;
      const next: LeaseSpec = {
        holderIdentity: identity,
        leaseDurationSeconds,
        acquireTime: transition ? now : (current.acquireTime ?? now),
        renewTime: now,
        leaseTransitions: (current.leaseTransitions ?? 0) + (transition && holder !== '' ? 1 : 0),
      };
      if (await this.#lock.update(next, signal)) return this.#observe(next);
      log.debug('lease changed since it was read; the next round decides', { lease: this.#lock.description });
      return false;
    } catch (error) {
      // The API server is not reachable, or the round ran out of time; the next round decides.
      if (signal.aborted) {
        log.debug('leader election round cut short', { lease: this.#lock.description, reason: String(signal.reason) });
      } else log.warn('leader election round failed', { error });
      return false;
    }
  }

  /** Records the lease as seen now; the expiry clock restarts only when it changed. */
  #observe(spec: LeaseSpec): true {
    if (JSON.stringify(spec) !== JSON.stringify(this.#observed)) this.#observedAt = this.#clock.now();
    this.#observed = spec;
    return true;
  }

  /** Runs `action` after `ms` on the clock; returns the cancel function. */
  #after(ms: number, action: () => void): () => void {
    const cancel = new AbortController();
    void this.#clock.sleep(Math.max(0, ms), cancel.signal).then(() => {
      if (!cancel.signal.aborted) action();
    });
    return () => cancel.abort();
  }

  #setLeading(leading: boolean): void {
    this.#leading = leading;
    this.#options.onLeadingChange?.(leading);
  }
}

function jittered(ms: number): number {
  // client-go's JitterUntil with factor 1.2.
  return ms * (1 + Math.random() * 1.2);
}
