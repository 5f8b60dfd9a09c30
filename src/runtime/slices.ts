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
 * Hands the items of the iterables pushed to `step`, in order: at once while the current slice
 * lasts, the rest after turns of the event loop. An iterable is read as it is stepped, so a live
 * one (a Set of a namespace's objects) may change meanwhile, as iterating it allows. Small batches
 * are thus stepped synchronously, as before.
 */
export class Sliced<T> {
  readonly #pending = new Fifo<Iterator<T>>();
  readonly #step: (item: T) => void;
  #draining = false;
  /** Bumped by `clear`: a drain of an older generation stops. */
  #generation = 0;

  constructor(step: (item: T) => void) {
    this.#step = step;
  }

  /** Whether items wait to be stepped. */
  get busy(): boolean {
    return this.#draining;
  }

  pushAll(items: Iterable<T>): void {
    this.#pending.push(items[Symbol.iterator]());
    if (!this.#draining) void this.#drain();
  }

  /** Drops what is still pending, the iterable being stepped too (the consumer has stopped). */
  clear(): void {
    this.#pending.clear();
    this.#generation++;
    this.#draining = false;
  }

  async #drain(): Promise<void> {
    this.#draining = true;
    const generation = this.#generation;
    const slice = new TimeSlice();
    try {
      for (let items = this.#pending.shift(); items !== undefined; items = this.#pending.shift()) {
        for (let item = items.next(); !item.done; item = items.next()) {
          this.#step(item.value);
          if (slice.spent) {
            await slice.next();
            if (generation !== this.#generation) return;
          }
        }
      }
    } finally {
      if (generation === this.#generation) this.#draining = false;
    }
  }
}
