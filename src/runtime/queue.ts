import timers from 'node:timers';
import { Fifo } from './fifo.ts';
import { MinHeap } from './heap.ts';
import type { RateLimiter } from './ratelimit.ts';
import { defaultControllerRateLimiter } from './ratelimit.ts';
import { TimingWheel } from './wheel.ts';

/** Observes a {@link WorkQueue}; each method feeds the client-go workqueue metric named. */
export interface QueueMetrics {
  /** A key became pending (workqueue_adds_total). */
  adds(): void;
  /** Keys now pending, including those held back until their worker is done (workqueue_depth). */
  depth(n: number): void;
  /** A delayed add was asked for (workqueue_retries_total; client-go counts every AddAfter). */
  retries(): void;
  /** Seconds a key was pending before a worker got it (workqueue_queue_duration_seconds). */
  queueLatency(seconds: number): void;
  /** Seconds a worker held a key (workqueue_work_duration_seconds). */
  workDuration(seconds: number): void;
}

export interface WorkQueueOptions {
  readonly metrics?: QueueMetrics;
  /** Monotonic clock in ms. Default performance.now. */
  readonly now?: () => number;
  /** Delays for addRateLimited. Default: client-go's, per key 5 ms doubling to 1000 s, overall 10 qps with bursts of 100. */
  readonly rateLimiter?: RateLimiter;
}

/** A key waiting for a worker, and since when (for queue latency). */
interface Pending {
  readonly key: string;
  readonly addedAt: number;
}

/** A key to add once its deadline passes. */
interface Delayed {
  readonly key: string;
  readonly readyAt: number;
}

const noMetrics: QueueMetrics = {
  adds() {},
  depth() {},
  retries() {},
  queueLatency() {},
  workDuration() {},
};

/** setTimeout fires at once for longer delays; waking early just re-arms the timer. */
const maxTimerMs = 2 ** 31 - 1;

/**
 * Delays this long or longer (the periodic re-check of every object) wait in a timing wheel of
 * one-second slots, which holds a key in about half the memory of the heap; a deadline rounded up
 * to its second is then at most 1/60 late. Shorter ones (retries, from 5 ms) keep their exact time.
 */
const wheelSlotMs = 1000;
const wheelFromMs = 60 * wheelSlotMs;

/**
 * A work queue of object keys with client-go's guarantees: a key is pending at most once,
 * no two workers hold the same key, and a key added while a worker holds it is handed
 * out again once that worker calls done(). Workers loop on get() … done(key).
 */
export class WorkQueue {
  readonly #metrics: QueueMetrics;
  readonly #now: () => number;
  readonly #rateLimiter: RateLimiter;
  /** Pending keys no worker holds, oldest first. */
  readonly #queue = new Fifo<Pending>();
  /** Every pending key: those in #queue and those added again while a worker holds them. */
  readonly #dirty = new Map<string, Pending>();
  /** Keys workers hold, and since when. */
  readonly #processing = new Map<string, number>();
  /** Workers blocked in get(), oldest first. */
  readonly #getters: ((key: string | undefined) => void)[] = [];
  /** Short delayed adds by deadline. An entry superseded or cancelled stays until popped and is then skipped. */
  readonly #delayed = new MinHeap<Delayed>((a, b) => a.readyAt < b.readyAt);
  /** Each key's live short delayed add. */
  readonly #waiting = new Map<string, Delayed>();
  /** Long delayed adds, by the second. A key waits in the heap or here, not both. */
  readonly #wheel = new TimingWheel(wheelSlotMs);
  /** The queue's one timer, due at the earliest deadline. */
  #timer: { readonly handle: ReturnType<typeof timers.setTimeout>; readonly at: number } | undefined;
  #shuttingDown = false;

  constructor(options: WorkQueueOptions = {}) {
    this.#metrics = options.metrics ?? noMetrics;
    this.#now = options.now ?? (() => performance.now());
    this.#rateLimiter = options.rateLimiter ?? defaultControllerRateLimiter();
  }

  /** Makes key pending, unless it already is or the queue is shut down. */
  add(key: string): void {
    if (this.#shuttingDown || this.#dirty.has(key)) return;
    const pending = { key, addedAt: this.#now() };
    this.#dirty.set(key, pending);
    this.#metrics.adds();
    this.#metrics.depth(this.#dirty.size);
    // A held key waits for done(), so that no two workers process it at once.
    if (!this.#processing.has(key)) this.#ready(pending);
  }

  /** Adds key after delayMs. If key is already waiting, the earlier deadline wins. */
  addAfter(key: string, delayMs: number): void {
    if (this.#shuttingDown) return;
    this.#metrics.retries();
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    const readyAt = this.#now() + delayMs;
    const current = this.#waiting.get(key)?.readyAt ?? this.#wheel.deadline(key);
    if (current !== undefined && current <= readyAt) return;
    this.#cancel(key);
    if (delayMs >= wheelFromMs) {
      this.#wheel.set(key, readyAt);
    } else {
      const delayed = { key, readyAt };
      this.#waiting.set(key, delayed);
      this.#delayed.push(delayed);
    }
    this.#schedule();
  }

  /**
   * Adds key after its rate limiter's delay, and no sooner than `atLeastMs` (a server's
   * Retry-After): call when processing key failed.
   */
  addRateLimited(key: string, atLeastMs = 0): void {
    this.addAfter(key, Math.max(atLeastMs, this.#rateLimiter.when(key)));
  }

  /** Resets key's backoff: call when processing key succeeded. */
  forget(key: string): void {
    this.#rateLimiter.forget(key);
  }

  /** Drops key's delayed add and resets its backoff: call when its object is gone. */
  remove(key: string): void {
    this.#cancel(key);
    this.#rateLimiter.forget(key);
  }

  /** The next pending key, which the caller holds until done(key); undefined once shut down. */
  get(): Promise<string | undefined> {
    const key = this.take();
    if (key !== undefined || this.#shuttingDown) return Promise.resolve(key);
    return new Promise((resolve) => this.#getters.push(resolve));
  }

  /** As get(), for a key pending now (no promise made); undefined when none is, or once shut down. */
  take(): string | undefined {
    if (this.#shuttingDown) return undefined;
    const pending = this.#queue.shift();
    return pending === undefined ? undefined : this.#start(pending);
  }

  /** Releases a key got from get(), handing it out again if it was added meanwhile. Other keys are ignored, as in client-go. */
  done(key: string): void {
    const startedAt = this.#processing.get(key);
    if (startedAt === undefined) return;
    this.#processing.delete(key);
    this.#metrics.workDuration((this.#now() - startedAt) / 1000);
    const pending = this.#dirty.get(key);
    if (pending !== undefined) this.#ready(pending);
  }

  /**
   * Stops handing out keys: pending and delayed keys are dropped, later adds ignored, and
   * blocked get()s resolve undefined. Workers still holding keys finish and call done().
   */
  shutDown(): void {
    this.#shuttingDown = true;
    if (this.#timer !== undefined) timers.clearTimeout(this.#timer.handle);
    this.#timer = undefined;
    this.#delayed.clear();
    this.#waiting.clear();
    this.#wheel.clear();
    this.#queue.clear();
    this.#dirty.clear();
    this.#metrics.depth(0);
    for (const getter of this.#getters.splice(0)) getter(undefined);
  }

  /** Keys ready for a worker now. */
  get length(): number {
    return this.#queue.length;
  }

  /** Gives a pending key no worker holds to a blocked worker, or queues it. */
  #ready(pending: Pending): void {
    const getter = this.#getters.shift();
    if (getter === undefined) this.#queue.push(pending);
    else getter(this.#start(pending));
  }

  /** Moves a key from pending to held. */
  #start({ key, addedAt }: Pending): string {
    const now = this.#now();
    this.#dirty.delete(key);
    this.#processing.set(key, now);
    this.#metrics.depth(this.#dirty.size);
    this.#metrics.queueLatency((now - addedAt) / 1000);
    return key;
  }

  /** Drops key's delayed add, wherever it waits; a heap entry is skipped when popped. */
  #cancel(key: string): void {
    this.#waiting.delete(key);
    this.#wheel.delete(key);
  }

  /** Points the timer at the earliest deadline if it is not already due by then. */
  #schedule(): void {
    const soon = this.#delayed.peek()?.readyAt;
    const later = this.#wheel.next();
    const next = soon === undefined || (later !== undefined && later < soon) ? later : soon;
    if (next === undefined || (this.#timer !== undefined && this.#timer.at <= next)) return;
    if (this.#timer !== undefined) timers.clearTimeout(this.#timer.handle);
    const handle = timers.setTimeout(() => this.#fire(), Math.max(0, Math.min(next - this.#now(), maxTimerMs)));
    // Pending delays alone must not keep the process alive.
    handle.unref();
    this.#timer = { handle, at: next };
  }

  /** Adds every key whose deadline has passed, then re-arms the timer. */
  #fire(): void {
    this.#timer = undefined;
    const now = this.#now();
    for (let next = this.#delayed.peek(); next !== undefined && next.readyAt <= now; next = this.#delayed.peek()) {
      this.#delayed.pop();
      if (this.#waiting.get(next.key) !== next) continue; // superseded or cancelled
      this.#waiting.delete(next.key);
      this.add(next.key);
    }
    for (const key of this.#wheel.due(now)) this.add(key);
    this.#schedule();
  }
}
