import type { Exponential } from '../util/backoff.ts';
import { exponentialDelay } from '../util/backoff.ts';

/** Decides how long a work queue key waits before its next retry. */
export interface RateLimiter {
  /** Records a failure of key and returns how many ms to wait before retrying it. */
  when(key: string): number;
  /** Clears key's failures, after it succeeded or was dropped. */
  forget(key: string): void;
  /** Failures recorded for key since it was last forgotten. */
  retries(key: string): number;
}

/**
 * Per-key exponential backoff, client-go's ItemExponentialFailureRateLimiter: by default
 * 5 ms doubling per failure up to 1000 s, without jitter. Keys are independent, so one
 * broken object backs off without slowing the others.
 */
export class ItemExponentialRateLimiter implements RateLimiter {
  readonly #curve: Exponential;
  readonly #failures = new Map<string, number>();

  constructor({ initialMs = 5, factor = 2, maxMs = 1_000_000 }: Partial<Exponential> = {}) {
    this.#curve = { initialMs, factor, maxMs };
  }

  when(key: string): number {
    const failures = this.retries(key);
    this.#failures.set(key, failures + 1);
    return exponentialDelay(this.#curve, failures);
  }

  forget(key: string): void {
    this.#failures.delete(key);
  }

  retries(key: string): number {
    return this.#failures.get(key) ?? 0;
  }
}

/**
 * An overall token bucket across all keys, client-go's BucketRateLimiter: `qps` retries a
 * second with bursts of `burst`, so an outage cannot turn thousands of failing keys into a
 * retry storm. It reserves a slot per call and returns how long until that slot.
 */
export class BucketRateLimiter implements RateLimiter {
  readonly #qps: number;
  readonly #burst: number;
  readonly #now: () => number;
  #tokens: number;
  #last: number;

  constructor({ qps = 10, burst = 100, now = Date.now }: { qps?: number; burst?: number; now?: () => number } = {}) {
    this.#qps = qps;
    this.#burst = burst;
    this.#now = now;
    this.#tokens = burst;
    this.#last = now();
  }

  when(): number {
    const now = this.#now();
    this.#tokens = Math.min(this.#burst, this.#tokens + ((now - this.#last) / 1000) * this.#qps);
    this.#last = now;
    this.#tokens -= 1;
    return this.#tokens >= 0 ? 0 : (-this.#tokens / this.#qps) * 1000;
  }

  forget(): void {}

  retries(): number {
    return 0;
  }
}

/** The longest delay of several limiters (client-go's MaxOfRateLimiter). */
export class MaxOfRateLimiter implements RateLimiter {
  readonly #limiters: readonly RateLimiter[];

  constructor(...limiters: RateLimiter[]) {
    this.#limiters = limiters;
  }

  when(key: string): number {
    return Math.max(...this.#limiters.map((l) => l.when(key)));
  }

  forget(key: string): void {
    for (const l of this.#limiters) l.forget(key);
  }

  retries(key: string): number {
    return Math.max(...this.#limiters.map((l) => l.retries(key)));
  }
}

/** client-go's DefaultControllerRateLimiter: per key 5 ms → 1000 s, overall 10 qps with bursts of 100. */
export function defaultControllerRateLimiter(): RateLimiter {
  return new MaxOfRateLimiter(new ItemExponentialRateLimiter(), new BucketRateLimiter());
}
