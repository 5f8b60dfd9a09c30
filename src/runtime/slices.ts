// Work that grows with the object count (a list of 100 000 objects applied, a namespace's objects
// queued again) is done a slice of time at a time with the event loop let in between, so that
// probes, scrapes, lease renewals and the other kinds' watches never wait longer than a slice.
import { setImmediate } from 'node:timers/promises';
import { Fifo } from './fifo.ts';

/** How long synchronous work runs before the event loop is let in. */
export const SLICE_MS = 5;

/**
 * A budget of synchronous time: `spent` once it has run out, renewed by `next` after a turn of the
 * event loop. Shared by several loops (a controller's workers, whose reconciles that write nothing
 * chain as microtasks), they wait for the same turn and then share one new slice.
 */
export class TimeSlice {
  #until = performance.now() + SLICE_MS;
  #turn: Promise<void> | undefined;

  get spent(): boolean {
    return performance.now() >= this.#until;
  }

  /** Lets the event loop in, then starts a new slice. */
  next(): Promise<void> {
    this.#turn ??= setImmediate().then(() => {
      this.#turn = undefined;
      this.#until = performance.now() + SLICE_MS;
    });
    return this.#turn;
  }
}

/**
 * Hands items to `step` in the order pushed: at once while the current slice lasts, the rest
 * after turns of the event loop. Small batches are thus handled synchronously, as before.
 */
export class Sliced<T> {
  readonly #pending = new Fifo<T>();
  readonly #step: (item: T) => void;
  #draining = false;

  constructor(step: (item: T) => void) {
    this.#step = step;
  }

  /** Items pushed and not yet stepped. */
  get length(): number {
    return this.#pending.length;
  }

  pushAll(items: Iterable<T>): void {
    for (const item of items) this.#pending.push(item);
    if (!this.#draining) void this.#drain();
  }

  /** Drops what is still pending (the consumer has stopped). */
  clear(): void {
    this.#pending.clear();
  }

  async #drain(): Promise<void> {
    this.#draining = true;
    try {
      const slice = new TimeSlice();
      for (let item = this.#pending.shift(); item !== undefined; item = this.#pending.shift()) {
        this.#step(item);
        if (slice.spent && this.#pending.length > 0) await slice.next();
      }
    } finally {
      this.#draining = false;
    }
  }
}
