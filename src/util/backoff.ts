/** A delay that grows geometrically: initialMs × factor^attempt, capped at maxMs. */
export interface Exponential {
  readonly initialMs: number;
  readonly factor: number;
  readonly maxMs: number;
}

/** The delay before retry number attempt (0-based) on the given curve. */
export function exponentialDelay(curve: Exponential, attempt: number): number {
  // factor ** attempt overflows to Infinity long before attempt does; the cap absorbs it.
  return Math.min(curve.initialMs * curve.factor ** attempt, curve.maxMs);
}

/**
 * Options for {@link Backoff}. The defaults are those of client-go's reflector and
 * kube-rs's watcher for retrying a failing list or watch.
 */
export interface BackoffOptions {
  /** First delay. Default 800 ms. */
  readonly initialMs?: number;
  /** Largest delay before jitter. Default 30 000 ms. */
  readonly maxMs?: number;
  /** Growth per failure. Default 2. */
  readonly factor?: number;
  /** Extra random share of the delay: a wait lies in [d, d × (1 + jitter)). Default 1. */
  readonly jitter?: number;
  /** A failure this long after the previous one starts over from initialMs. Default 120 000 ms. */
  readonly resetAfterMs?: number;
  /** Monotonic clock in ms. Default performance.now. */
  readonly now?: () => number;
  /** Uniform in [0, 1). Default Math.random. */
  readonly random?: () => number;
}

/**
 * Jittered exponential backoff for one retried operation, as client-go's
 * exponentialBackoffManager: call next() after each failure and wait that long.
 * Jitter is only ever added, as client-go's wait.Jitter does, so a retry never comes
 * sooner than the un-jittered delay while many clients spread out after a shared outage.
 */
export class Backoff {
  readonly #curve: Exponential;
  readonly #jitter: number;
  readonly #resetAfterMs: number;
  readonly #now: () => number;
  readonly #random: () => number;
  #attempt = 0;
  #lastFailureAt: number | undefined;

  constructor(options: BackoffOptions = {}) {
    const {
      initialMs = 800,
      maxMs = 30_000,
      factor = 2,
      jitter = 1,
      resetAfterMs = 120_000,
      now = () => performance.now(),
      random = Math.random,
    } = options;
    this.#curve = { initialMs, factor, maxMs };
    this.#jitter = jitter;
    this.#resetAfterMs = resetAfterMs;
    this.#now = now;
    this.#random = random;
  }

  /** Records a failure and returns how many ms to wait before retrying. */
  next(): number {
    const now = this.#now();
    // Without a failure for resetAfterMs the operation was healthy: start over.
    if (this.#lastFailureAt !== undefined && now - this.#lastFailureAt >= this.#resetAfterMs) this.#attempt = 0;
    this.#lastFailureAt = now;
    const delay = exponentialDelay(this.#curve, this.#attempt++);
    return delay * (1 + this.#jitter * this.#random());
  }

  /** Starts over from initialMs, e.g. once the operation is known to work again. */
  reset(): void {
    this.#attempt = 0;
    this.#lastFailureAt = undefined;
  }
}
