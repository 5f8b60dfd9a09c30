// Deadlines of requests in flight, all checked by one coarse timer. A timer of its own per request
// (set, then cleared) and the AbortController it would abort, with its listeners, were 2–3 % of
// labeller's CPU at one write per object; a request's deadline is a minute, checked to a tick.
// A deadline also carries its caller's abort signal: the requests in flight under a signal (most
// share one, a controller's) are found here when it aborts, by one listener per signal, rather
// than by a listener added and removed at every request.
import timers from 'node:timers';

export interface Deadline {
  /** Set once the deadline passed; the request's failure is then a timeout. */
  readonly expired: boolean;
  /**
   * Destroyed when the deadline passes, or with the signal's reason (an Error) when it aborts:
   * the request's latest attempt (after a retry).
   */
  request: { destroy(error?: Error): void } | undefined;
}

interface Entry extends Deadline {
  expired: boolean;
  /** The tick at which it expires. */
  readonly due: number;
  readonly signal: AbortSignal | undefined;
}

export class Deadlines {
  readonly #pending = new Set<Entry>();
  /** The signals with a listener of this one's. */
  readonly #heeded = new WeakSet<AbortSignal>();
  readonly #tickMs: number;
  /** Ticks since the first; a deadline is a count of them, so no clock is read per request. */
  #ticks = 0;
  #timer: ReturnType<typeof timers.setInterval> | undefined;

  /** `tickMs`: how late past its deadline a request may end. */
  constructor(tickMs = 250) {
    this.#tickMs = tickMs;
  }

  /**
   * A deadline `ms` from now (up to a tick later), its request ended too when `signal` aborts;
   * end() it once the request is over.
   */
  start(ms: number, signal?: AbortSignal): Deadline {
    // Ticks to wait: the one running now counts only in part, so one more.
    const due = this.#ticks + Math.ceil(ms / this.#tickMs) + 1;
    const entry: Entry = { expired: false, request: undefined, due, signal };
    this.#pending.add(entry);
    if (signal && !this.#heeded.has(signal)) {
      this.#heeded.add(signal);
      signal.addEventListener('abort', () => this.#abort(signal), { once: true });
    }
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

  /** Ends the requests in flight under `signal`, with its reason when that is an Error. */
  #abort(signal: AbortSignal): void {
    const reason = signal.reason instanceof Error ? signal.reason : undefined;
    for (const entry of this.#pending) {
      if (entry.signal === signal) entry.request?.destroy(reason);
    }
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
