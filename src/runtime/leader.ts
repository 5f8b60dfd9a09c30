// Leader election on a Lease, as client-go's leaderelection does it, as a policy on the Lease
// holder (lease/holder.ts), with a deadline that makes "one writer at a time" hold:
//  - A candidate takes the Lease when it is free, its own, or expired. Expiry is judged by its
//    own monotonic clock from when it last saw the Lease change (lease/observer.ts), so clock
//    skew between nodes does not matter.
//  - The leader renews every retry period. It stays leader until the send time of its last
//    successful renewal plus the renew deadline (the holder's claim); each renewal round is
//    bounded by that instant. When it passes, `leadership` aborts: no new work, and writes still
//    in flight are aborted. A standby takes over no earlier than that renewal plus the lease
//    duration, so the difference is the margin for aborted requests still on the wire.
//  - Renewal goes on until release() (after a shutdown has drained), which clears the holder.
import { setMaxListeners } from 'node:events';
import { type MonotonicClock, monotonicClock } from '../lease/clock.ts';
import { LeaseHolder, type LeaseStore } from '../lease/holder.ts';
import { LeaseObserver } from '../lease/observer.ts';
import type { Logger } from '../util/log.ts';

export interface LeaderElectionOptions {
  /** Where the Lease is. */
  readonly namespace: string;
  readonly name: string;
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
  readonly #holder: LeaseHolder;
  readonly #options: LeaderElectionOptions;
  readonly #clock: MonotonicClock;
  readonly #leadership = new AbortController();
  readonly #stopRenewing = new AbortController();
  #leading = false;
  #renewing: Promise<void> = Promise.resolve();

  constructor(api: LeaseStore, options: LeaderElectionOptions, clock: MonotonicClock = monotonicClock) {
    this.#options = options;
    this.#clock = clock;
    const observer = new LeaseObserver(clock);
    this.#holder = new LeaseHolder(api, {
      namespace: options.namespace,
      name: options.name,
      identity: options.identity,
      leaseDurationMs: options.leaseDurationMs,
      validForMs: options.renewDeadlineMs,
      renewEveryMs: options.retryPeriodMs,
      // Another holder's Lease is taken once it has not changed for its duration, by our clock.
      mayTake: (current, sent) => observer.observe([current], sent).expired.length > 0,
      clock,
      log: options.log,
    });
    // Every controller listens for the end of leadership: not a leak, however many kinds.
    setMaxListeners(0, this.#leadership.signal);
  }

  get leading(): boolean {
    return this.#leading;
  }

  /** Whether this process leads now: the check a write makes as it is sent. */
  valid(): boolean {
    return this.#leading && this.#holder.valid();
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
    const { retryPeriodMs, log, identity } = this.#options;
    const lease = this.#holder.description;
    log.info('waiting for leadership', { lease, identity });
    for (;;) {
      if (signal.aborted) return false;
      const round = await this.#holder.round(signal);
      if (round === 'renewed') break;
      if (round === 'held') {
        log.debug('lease held by another candidate', { lease, holder: this.#holder.seen?.spec.holderIdentity });
      }
      await this.#clock.sleep(jittered(retryPeriodMs), signal);
    }
    this.#setLeading(true);
    log.info('became leader', { lease, identity });
    this.#renewing = this.#holder.run(this.#stopRenewing.signal, {
      lapsed: () => this.#lose(`not renewed within the renew deadline (${this.#options.renewDeadlineMs} ms)`),
      held: (holder) => this.#lose(`the lease is held by ${holder}`),
    }, true);
    return true;
  }

  /**
   * Stops renewing and gives the lease up, so a standby takes over without waiting for expiry;
   * `expire`: a write was aborted on the wire and may still land, so the lease is left to expire
   * (the standby waits its duration) rather than cleared.
   */
  async release(expire = false): Promise<void> {
    if (!this.#leading) return;
    this.#setLeading(false);
    this.#leadership.abort(new Error('leadership released'));
    this.#stopRenewing.abort();
    // An aborted renewal ends first, so the release is the last write.
    await this.#renewing;
    if (expire) {
      await this.#holder.release('keep', this.#options.renewDeadlineMs);
      this.#options.log.info('leaving the lease to expire: a write aborted as leadership ended may still land', {
        lease: this.#holder.description,
      });
    } else if (await this.#holder.release('clear', this.#options.renewDeadlineMs)) {
      this.#options.log.info('released leadership', { lease: this.#holder.description });
    }
  }

  #lose(why: string): void {
    if (this.#leadership.signal.aborted) return;
    this.#stopRenewing.abort();
    this.#setLeading(false);
    this.#leadership.abort(new LeadershipLost(`lost leadership of lease ${this.#holder.description}: ${why}`));
    this.#options.log.error('lost leadership', { lease: this.#holder.description, reason: why });
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
