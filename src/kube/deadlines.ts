// Deadlines of requests in flight, all checked by one coarse timer. A timer of its own per request
// (set, then cleared) and the AbortController it would abort, with its listeners, were 2–3 % of
// labeller's CPU at one write per object; a request's deadline is a minute, checked to a tick.
import timers from 'node:timers';

export interface Deadline {
  /** Set once the deadline passed; the request's failure is then a timeout. */
  readonly expired: boolean;
  /** Destroyed when the deadline passes: the request's latest attempt (after a retry). */
  request: { destroy(): void } | undefined;
}

interface Entry extends Deadline {
  expired: boolean;
  /** The tick at which it expires. */
  readonly due: number;
}

export class Deadlines {
  readonly #pending = new Set<Entry>();
  readonly #tickMs: number;
  /** Ticks since the first; a deadline is a count of them, so no clock is read per request. */
  #ticks = 0;
  #timer: ReturnType<typeof timers.setInterval> | undefined;

  /** `tickMs`: how late past its deadline a request may end. */
  constructor(tickMs = 250) {
    this.#tickMs = tickMs;
  }

  /** A deadline `ms` from now (up to a tick later); end() it once the request is over. */
  start(ms: number): Deadline {
    // Ticks to wait: the one running now counts only in part, so one more.
    const entry: Entry = { expired: false, request: undefined, due: this.#ticks + Math.ceil(ms / this.#tickMs) + 1 };
    this.#pending.add(entry);
    if (this.#timer === undefined) {
      this.#timer = timers.setInterval(() => this.#tick(), this.#tickMs);
      // Requests keep the process alive by their sockets; their deadlines must not.
      this.#timer.unref();
    }
    return entry;
  }

  end(deadline: Deadline): void {
    this.#pending.delete(deadline as Entry);
  }

  #tick(): void {
    const now = ++this.#ticks;
    // Stopped on the first tick with nothing pending, not at every end(): between two requests of
    // a steady stream there is often none, and the timer would be made and cleared each time.
    if (this.#pending.size === 0) {
      timers.clearInterval(this.#timer);
      this.#timer = undefined;
      return;
    }
    for (const entry of this.#pending) {
      if (entry.due > now) continue;
      this.#pending.delete(entry);
      entry.expired = true;
      entry.request?.destroy();
    }
  }
}
