// Writes summed up in a log line, as controller-runtime logs no line per reconcile: one line every
// 10 s while a burst lasts, and one when it is over (a line per write cost a burst of writes about
// a tenth of its CPU: a JSON record and a write to stderr each).
import timers from 'node:timers';
import type { Logger } from '../util/log.ts';

/** A burst's writes are summed up in a line at least this often. */
const SUMMARY_EVERY_MS = 10_000;

export class WriteSummary {
  readonly #log: Logger;
  /** How many objects wait in the queue, for the line. */
  readonly #queued: () => number;
  /** Writes not yet summed up, since `#since`; the timer due to sum them up. */
  #writes = 0;
  #since = 0;
  #timer: ReturnType<typeof timers.setTimeout> | undefined;

  constructor(log: Logger, queued: () => number) {
    this.#log = log;
    this.#queued = queued;
  }

  /** OutcomeCounts a write towards the next line, which is due 10 s after the first. */
  count(): void {
    if (this.#writes++ > 0) return;
    this.#since = performance.now();
    this.#timer = timers.setTimeout(() => this.flush(), SUMMARY_EVERY_MS);
    // A line to come must not keep the process alive.
    this.#timer.unref();
  }

  /** Logs the writes since the last line, if any, and how many objects wait in the queue. */
  flush(): void {
    if (this.#writes === 0) return;
    timers.clearTimeout(this.#timer);
    this.#log.info('objects written', {
      written: this.#writes,
      queued: this.#queued(),
      overMs: performance.now() - this.#since,
    });
    this.#writes = 0;
  }
}
