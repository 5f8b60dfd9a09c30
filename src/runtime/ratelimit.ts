import type { Exponential } from './backoff.ts';
import { exponentialDelay } from './backoff.ts';

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
