// Kubernetes Events, aggregated as client-go's recorder does (k8s.io/client-go/tools/events): one
// series per object, reason and action. The first occurrence creates the Event; later ones are
// only counted (series count and last observation) and written back at most once per flush
// interval. Every write takes a token from one bucket and waits in one bounded queue, so however
// much trouble recurs (a thousand objects conflicting in a loop) the API server sees a bounded
// rate; what does not fit is dropped, logged at debug. record() never blocks and never throws.
import type { EventContent } from '../apimachinery/objects.ts';
import type { Logger } from '../util/log.ts';
import { BucketRateLimiter } from './ratelimit.ts';

/** How often a series' trouble was seen, as events.k8s.io/v1 `series` (plus the first time, the Event's `eventTime`). */
export interface Series {
  readonly count: number;
  readonly firstObservedMs: number;
  readonly lastObservedMs: number;
}

/** Where Events are written: the API (kube/events.ts), or a fake in unit tests. */
export interface EventSink {
  /** Writes the Event of a new series (count 1: seen once so far); answers the handle it is updated by. */
  create(event: EventContent, series: Series, signal: AbortSignal): Promise<string>;
  /** Writes a series' count and last observation to its Event. */
  update(handle: string, series: Series, signal: AbortSignal): Promise<void>;
}

/** Wall-clock time (Event times are wall-clock) and waiting, so tests can drive both. */
export interface WallClock {
  now(): number;
  /** Waits `ms`, or less if `signal` aborts (never rejects). */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
}

export interface RecorderOptions {
  readonly sink: EventSink;
  readonly clock: WallClock;
  readonly log: Logger;
  /** Event writes per second, all series together, after a burst of `burst`. */
  readonly qps?: number;
  readonly burst?: number;
  /** Series counts are written back at most this often. */
  readonly flushIntervalMs?: number;
  /** A series not seen for this long is forgotten; it starts a new Event if seen again (client-go: 6 min). */
  readonly seriesTtlMs?: number;
  /** Series remembered at once; more are dropped (client-go's LRU: 4096). */
  readonly maxSeries?: number;
  /** Writes waiting at once; more are dropped (client-go: 1000). */
  readonly maxQueued?: number;
}

/** The defaults: kubelet's event budget divided by ten, client-go's caps. */
export const RECORDER_DEFAULTS = {
  qps: 5,
  burst: 100,
  flushIntervalMs: 10_000,
  seriesTtlMs: 6 * 60_000,
  maxSeries: 4096,
  maxQueued: 1000,
} as const;

interface Entry {
  readonly key: string;
  readonly event: EventContent;
  readonly firstObservedMs: number;
  count: number;
  lastObservedMs: number;
  /** Set once the Event exists. */
  handle: string | undefined;
  /** Seen again since its count was last written. */
  dirty: boolean;
  queued: boolean;
}

export class EventRecorder {
  readonly #sink: EventSink;
  readonly #clock: WallClock;
  readonly #log: Logger;
  readonly #options: Required<Omit<RecorderOptions, 'sink' | 'clock' | 'log'>>;
  readonly #bucket: BucketRateLimiter;
  readonly #series = new Map<string, Entry>();
  readonly #queue: Entry[] = [];
  #wake: (() => void) | undefined;
  /** When the token reserved for the next write is there. */
  #readyAt: number | undefined;
  /** The last write failed: the next failure is logged at debug only. */
  #failing = false;
  #stopped = false;

  constructor({ sink, clock, log, ...limits }: RecorderOptions) {
    this.#sink = sink;
    this.#clock = clock;
    this.#log = log;
    this.#options = { ...RECORDER_DEFAULTS, ...limits };
    this.#bucket = new BucketRateLimiter({
      qps: this.#options.qps,
      burst: this.#options.burst,
      now: () => this.#clock.now(),
    });
  }

  /** Series remembered now. */
  get series(): number {
    return this.#series.size;
  }

  /** OutcomeCounts an occurrence; a new series queues its Event. */
  record(event: EventContent): void {
    if (this.#stopped) return;
    const now = this.#clock.now();
    const key = seriesKey(event);
    const known = this.#series.get(key);
    if (known) {
      known.count++;
      known.lastObservedMs = now;
      if (known.handle !== undefined) known.dirty = true;
      return;
    }
    if (this.#series.size >= this.#options.maxSeries) this.#expire(now);
    if (this.#series.size >= this.#options.maxSeries || this.#queue.length >= this.#options.maxQueued) {
      this.#log.debug('event dropped: too many pending', {
        reason: event.reason,
        regarding: describe(event),
        series: this.#series.size,
        queued: this.#queue.length,
      });
      return;
    }
    const entry: Entry = {
      key,
      event,
      firstObservedMs: now,
      count: 1,
      lastObservedMs: now,
      handle: undefined,
      dirty: false,
      queued: false,
    };
    this.#series.set(key, entry);
    this.#enqueue(entry);
  }

  /** Writes Events and series counts until `signal` aborts; then stops taking occurrences. */
  async run(signal: AbortSignal): Promise<void> {
    const flushing = (async () => {
      while (!signal.aborted) {
        await this.#clock.sleep(this.#options.flushIntervalMs, signal);
        if (!signal.aborted) this.#flush();
      }
    })();
    await Promise.all([flushing, this.#write(signal, false)]);
    this.#stopped = true;
  }

  /** After run(): writes what is pending, counts included, for at most `ms` within the rate limit; drops the rest. */
  async drain(ms: number): Promise<void> {
    this.#flush();
    const deadline = new AbortController();
    void this.#clock.sleep(ms, deadline.signal).then(() => deadline.abort());
    await this.#write(deadline.signal, true);
    deadline.abort();
    if (this.#queue.length > 0) this.#log.debug('events dropped at exit', { pending: this.#queue.length });
  }

  #enqueue(entry: Entry): void {
    entry.queued = true;
    this.#queue.push(entry);
    this.#wake?.();
  }

  /** Queues the counts seen since the last write, and forgets series that went quiet. */
  #flush(): void {
    const now = this.#clock.now();
    for (const entry of this.#series.values()) {
      if (entry.queued) continue;
      if (entry.dirty && entry.handle !== undefined) {
        if (this.#queue.length < this.#options.maxQueued) this.#enqueue(entry);
      } else if (now - entry.lastObservedMs >= this.#options.seriesTtlMs) {
        this.#series.delete(entry.key);
      }
    }
  }

  #expire(now: number): void {
    for (const entry of this.#series.values()) {
      if (!entry.queued && now - entry.lastObservedMs >= this.#options.seriesTtlMs) this.#series.delete(entry.key);
    }
  }

  /** Sends queued writes one at a time, each after a token; `untilEmpty` returns once nothing is queued. */
  async #write(signal: AbortSignal, untilEmpty: boolean): Promise<void> {
    while (!signal.aborted) {
      const entry = this.#queue[0];
      if (entry === undefined) {
        if (untilEmpty) return;
        await this.#idle(signal);
        continue;
      }
      // The token is reserved once, and kept if the wait is cut short by the stop.
      this.#readyAt ??= this.#clock.now() + this.#bucket.when();
      const waitMs = this.#readyAt - this.#clock.now();
      if (waitMs > 0) await this.#clock.sleep(waitMs, signal);
      if (signal.aborted) return;
      this.#readyAt = undefined;
      this.#queue.shift();
      await this.#send(entry, signal);
    }
  }

  async #send(entry: Entry, signal: AbortSignal): Promise<void> {
    entry.queued = false;
    entry.dirty = false;
    const series: Series = {
      count: entry.count,
      firstObservedMs: entry.firstObservedMs,
      lastObservedMs: entry.lastObservedMs,
    };
    try {
      if (entry.handle === undefined) {
        entry.handle = await this.#sink.create(entry.event, series, signal);
        // Seen again while it was being created.
        entry.dirty = entry.count > series.count;
      } else {
        await this.#sink.update(entry.handle, series, signal);
      }
      this.#failing = false;
    } catch (error) {
      // Forgotten, so the next occurrence starts over (an Event may have expired on the server).
      this.#series.delete(entry.key);
      const fields = { reason: entry.event.reason, regarding: describe(entry.event), error };
      if (this.#failing) this.#log.debug('event not written', fields);
      else this.#log.warn('event not written; labelling goes on (further failures logged at debug)', fields);
      this.#failing = true;
    }
  }

  #idle(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        this.#wake = undefined;
        signal.removeEventListener('abort', done);
        resolve();
      };
      this.#wake = done;
      signal.addEventListener('abort', done, { once: true });
    });
  }
}

function seriesKey({ regarding: r, reason, action }: EventContent): string {
  return [r.apiVersion, r.kind, r.namespace, r.name, r.uid ?? '', reason, action].join('\0');
}

function describe({ regarding: r }: EventContent): string {
  return `${r.kind} ${r.namespace ? `${r.namespace}/` : ''}${r.name}`;
}
