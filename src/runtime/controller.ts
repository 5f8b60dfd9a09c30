// One controller: the informers of its resource (one per watched namespace, or one for all,
// shared through the informer cache) → one queue → a bounded pool of workers calling `reconcile`.
// Like kube-rs's runner: no reconcile before the first lists are complete, an object is
// reconciled by one worker at a time, failures retry with per-object backoff, successes requeue
// periodically (jittered) so drift that no event reports is still corrected. It reads its own
// writes (client-go's expectations): an object it wrote is not reconciled again from a cache that
// does not show the write yet, and the watch event that only echoes the write is no work.
// Like controller-runtime it logs no line per reconcile: its writes are summed up (writesummary.ts).
import { ApiError } from '../apimachinery/errors.ts';
import { aborted } from '../util/aborted.ts';
import type { Logger } from '../util/log.ts';
import type { Informer } from './informer.ts';
import { type QueueMetrics, WorkQueue, type WorkQueueOptions } from './queue.ts';
import { Sliced, TimeSlice } from './slices.ts';
import type { StoreChange } from './store.ts';
import { WriteSummary } from './writesummary.ts';

/** What a reconcile answers, as controller-runtime's Result does. */
export interface Reconciled {
  /** The object's version after a write of it (its resourceVersion), if it wrote it. */
  readonly written?: string | undefined;
  /** Look at the object again after this long (besides the periodic re-check). */
  readonly requeueAfterMs?: number | undefined;
}

/**
 * Reconciles one object; throwing retries it with backoff. `writes` aborts when this process
 * may no longer write (leadership lost): writes still running are to be aborted.
 */
export type Reconcile<T> = (object: T, key: string, writes: AbortSignal) => Promise<Reconciled | void>;

/** A write of an object the cache does not show yet; `dirty`: something else asked for the object meanwhile. */
interface Written {
  readonly version: string;
  readonly at: number;
  dirty: boolean;
}

/** A write the cache has not shown for this long (a watch that lost it) no longer holds its object back. */
const WRITE_SEEN_WITHIN_MS = 60_000;

/** For runs without leader election: writing is never taken away. */
const ALWAYS = new AbortController().signal;

/** What a controller reports (metrics.ts maps it to controller-runtime's metric names). */
export interface ControllerMetrics {
  reconciled(result: 'success' | 'error', seconds: number): void;
  activeWorkers(delta: number): void;
  readonly queue: QueueMetrics;
}

export interface ControllerOptions<T> {
  /** Names the controller in logs and metrics, e.g. "deployments.apps". */
  readonly name: string;
  /** Its resource's caches: one per namespace watched, or one for all. */
  readonly informers: readonly Informer<T>[];
  /**
   * Resolves once the other caches `reconcile` reads have listed, or cannot be (controller-runtime's
   * WaitForCacheSync over the watched kinds); no reconcile starts before.
   */
  readonly dependencies?: (() => Promise<void>) | undefined;
  readonly reconcile: Reconcile<T>;
  /** Workers reconciling at the same time, over all its informers. */
  readonly concurrency: number;
  /** Period of the re-check of every object, jittered by ±10 %; 0 disables it. */
  readonly requeueAfterMs: number;
  /** Told of each key queued by `enqueue` or `requeueAll` (not of the informers' changes, which a subscriber sees). */
  readonly queued?: ((key: string) => void) | undefined;
  /** The work queue's clock and retry delays (client-go's by default). */
  readonly queue?: Omit<WorkQueueOptions, 'metrics'>;
  readonly metrics?: ControllerMetrics | undefined;
  readonly log: Logger;
}

export class Controller<T> {
  readonly name: string;
  readonly informers: readonly Informer<T>[];
  readonly #options: ControllerOptions<T>;
  readonly #queue: WorkQueue;
  /** Adds of many keys at once, made a slice at a time: a list's (the informers' own changes) and others'. */
  readonly #adds = new Sliced<string>((key) => this.#queue.add(key));
  readonly #enqueues = new Sliced<string>((key) => this.enqueue(key));
  /** The workers' time on the event loop: reconciles that write nothing never wait for I/O. */
  readonly #slice = new TimeSlice();
  /** Objects written whose write the cache does not show yet, by key. */
  readonly #written = new Map<string, Written>();
  /** The versions the cache took of each object while it was being reconciled. */
  readonly #reconciling = new Map<string, string[]>();
  readonly #writes: WriteSummary;
  /** Reconciles running. */
  #active = 0;

  constructor(options: ControllerOptions<T>) {
    this.name = options.name;
    this.informers = options.informers;
    this.#options = options;
    this.#queue = new WorkQueue({ ...options.queue, ...(options.metrics ? { metrics: options.metrics.queue } : {}) });
    this.#writes = new WriteSummary(options.log, () => this.#queue.length);
  }

  /** The cached object under `key`, from whichever informer holds it. */
  get(key: string): T | undefined {
    for (const informer of this.informers) {
      const object = informer.store.get(key);
      if (object !== undefined) return object;
    }
    return undefined;
  }

  *keys(): Generator<string> {
    for (const informer of this.informers) yield* informer.store.keys();
  }

  *values(): Generator<T> {
    for (const informer of this.informers) yield* informer.store.values();
  }

  get size(): number {
    return this.informers.reduce((n, informer) => n + informer.store.size, 0);
  }

  /** Resolves when every informer has its first list. */
  get synced(): Promise<void> {
    return Promise.all(this.informers.map((informer) => informer.synced)).then(() => {});
  }

  /** Resolves once every informer has listed and the dependencies are there: when reconciling may begin. */
  async ready(): Promise<void> {
    await this.synced;
    await this.#options.dependencies?.();
  }

  /** Why this controller does not serve current objects, one line per informer: no first list yet, or a watch that is down. */
  problems(): string[] {
    return this.informers.flatMap((informer) => {
      const problem = informer.problem;
      return problem === undefined ? [] : [`${informer.name}: ${problem}`];
    });
  }

  /** Queues an object whose related objects changed (what a mapper of `watches` finds). */
  enqueue(key: string): void {
    this.#queue.add(key);
    this.#options.queued?.(key);
  }

  /** Queues many objects (a source entry's readers, every one), a slice at a time: see {@link Sliced}. */
  enqueueAll(keys: Iterable<string>): void {
    this.#enqueues.pushAll(keys);
  }

  /** Queues every cached object again, without a relist: what they should look like has changed. */
  requeueAll(): void {
    this.enqueueAll(this.keys());
  }

  /**
   * Queues its informers' changes until `intake` aborts, reconciling once they have listed, the
   * dependencies are there and `leading` resolves (at once without leader election; a standby
   * keeps its cache warm meanwhile). On abort it stops handing out work and resolves once the
   * reconciles already running have finished (the caller bounds that wait with a grace period).
   * When `writes` aborts (leadership lost) it stops handing out work at once and the reconciles
   * running get the aborted signal. The informers run elsewhere (the informer cache).
   */
  async run(
    intake: AbortSignal,
    leading: Promise<unknown> = Promise.resolve(),
    writes: AbortSignal = ALWAYS,
  ): Promise<void> {
    const unsubscribe = this.informers.map((informer) => informer.subscribe((change) => this.#queueChange(change)));
    // A shared cache may have listed before this controller started: its objects are all work.
    for (const informer of this.informers) {
      if (informer.store.synced) this.#adds.pushAll(informer.store.keys());
    }
    const stopQueue = (): void => {
      this.#adds.clear();
      this.#enqueues.clear();
      this.#queue.shutDown();
    };
    intake.addEventListener('abort', stopQueue, { once: true });
    writes.addEventListener('abort', stopQueue, { once: true });
    let workers: Promise<unknown> = Promise.resolve();
    const ready = this.ready().then(() => leading);
    try {
      await Promise.race([ready, aborted(AbortSignal.any([intake, writes]))]);
      if (!intake.aborted && !writes.aborted) {
        workers = Promise.all(Array.from({ length: this.#options.concurrency }, () => this.#work(writes)));
      }
      await aborted(intake);
    } finally {
      intake.removeEventListener('abort', stopQueue);
      writes.removeEventListener('abort', stopQueue);
      stopQueue();
      for (const stop of unsubscribe) stop();
      await workers;
      this.#writes.flush();
    }
  }

  /**
   * Once its informers have listed (the informer cache lists them once) and the dependencies are
   * there, reconciles every object once, `concurrency` at a time, without retrying (failures are
   * logged). Rejects if a list fails.
   */
  async runOnce(signal: AbortSignal): Promise<void> {
    await this.ready();
    const keys = [...this.keys()];
    const worker = async (): Promise<void> => {
      for (let key = keys.pop(); key !== undefined && !signal.aborted; key = keys.pop()) {
        const object = this.get(key);
        if (object === undefined) continue;
        try {
          await this.#options.reconcile(object, key, ALWAYS);
        } catch (error) {
          this.#options.log.error('reconcile failed', { key, error });
        }
      }
    };
    await Promise.all(Array.from({ length: this.#options.concurrency }, worker));
  }

  #queueChange(change: StoreChange<T>): void {
    if (change.type === 'upsert') {
      // Taken while the object is reconciled: looked at once that reconcile ends, unless it is
      // only the echo of the write it makes (which often comes before the write's own answer).
      const seen = this.#reconciling.get(change.key);
      if (seen !== undefined) {
        seen.push(this.#version(change.key) ?? '');
        return;
      }
      const written = this.#written.get(change.key);
      if (written === undefined) this.#queue.add(change.key);
      else if (written.version === this.#version(change.key)) {
        // The echo of its own write: work only if something else asked for the object meanwhile.
        this.#written.delete(change.key);
        if (written.dirty) this.#queue.add(change.key);
      } // An event from before the write: the write's own event follows.
      else written.dirty = true;
    } else if (change.type === 'delete') {
      this.#written.delete(change.key);
      this.#queue.remove(change.key);
    } else {
      // A list shows every write made before it.
      for (const key of change.changed) this.#written.delete(key);
      this.#adds.pushAll(change.changed);
      for (const key of change.removed) {
        this.#written.delete(key);
        this.#queue.remove(key);
      }
    }
  }

  /** The version of the cached object under `key`. */
  #version(key: string): string | undefined {
    for (const informer of this.informers) {
      const version = informer.store.version(key);
      if (version !== undefined) return version;
    }
    return undefined;
  }

  /** Whether `key` waits for the cache to show a write of it (then it is looked at again once it does). */
  #awaitsWrite(key: string): boolean {
    const written = this.#written.get(key);
    if (written === undefined) return false;
    if (performance.now() - written.at > WRITE_SEEN_WITHIN_MS) {
      this.#written.delete(key);
      return false;
    }
    written.dirty = true;
    return true;
  }

  /**
   * Records a write of `key` that produced `version`, unless the cache showed it while the write
   * was under way (`seen`: the versions it took meanwhile), or it changed nothing (`version` is
   * the one reconciled, `from`: the API server does not bump an unchanged object, so no echo
   * comes, and waiting for one would swallow the next change). Watch events come in order, so a
   * cache that has not shown the write is older than it; versions it took meanwhile are changes
   * the write's reconcile did not see, looked at once the write shows. Answers whether it was a
   * write.
   */
  #wrote(key: string, from: string | undefined, seen: readonly string[], version: string | undefined): boolean {
    if (!version || version === from) return false;
    if (!seen.includes(version)) this.#written.set(key, { version, at: performance.now(), dirty: seen.length > 0 });
    return true;
  }

  async #work(writes: AbortSignal): Promise<void> {
    const { reconcile, requeueAfterMs, log, metrics } = this.#options;
    for (;;) {
      // The event loop has a turn once the workers' slice is spent; a key pending now is taken
      // with no promise made for it.
      if (this.#slice.spent) await this.#slice.next();
      const key = this.#queue.take() ?? await this.#queue.get();
      if (key === undefined) return;
      const object = this.get(key);
      // Gone from the cache: deleted while queued. Nothing to do, and nothing may recreate it.
      // Or written a moment ago, and the cache is older than the write: its echo brings it back.
      if (object === undefined || this.#awaitsWrite(key)) {
        if (object === undefined) this.#queue.remove(key);
        this.#queue.done(key);
        continue;
      }
      const started = performance.now();
      const from = this.#version(key);
      const seen: string[] = [];
      this.#reconciling.set(key, seen);
      this.#active++;
      metrics?.activeWorkers(1);
      try {
        const reconciled = await reconcile(object, key, writes);
        const wrote = this.#wrote(key, from, seen, reconciled?.written);
        if (wrote) this.#writes.count();
        // What the cache took meanwhile besides the write's echo; a write not shown yet is looked
        // at with its echo (#wrote), as what came before it.
        if (
          wrote ? seen.includes(reconciled!.written!) && seen.some((v) => v !== reconciled!.written) : seen.length > 0
        ) {
          this.#queue.add(key);
        }
        metrics?.reconciled('success', (performance.now() - started) / 1000);
        this.#queue.forget(key);
        if (reconciled?.requeueAfterMs !== undefined) this.#queue.addAfter(key, reconciled.requeueAfterMs);
        if (requeueAfterMs > 0) this.#queue.addAfter(key, requeueAfterMs * (0.9 + Math.random() * 0.2));
      } catch (error) {
        metrics?.reconciled('error', (performance.now() - started) / 1000);
        const retryAfterMs = error instanceof ApiError && error.retryAfterSeconds ? error.retryAfterSeconds * 1000 : 0;
        if (writes.aborted) log.warn('reconcile aborted: this process may no longer write', { key });
        else log.error('reconcile failed; retrying with backoff', { key, error });
        // A throttled request comes back no sooner than the server asked, and still backs off;
        // a change the cache took meanwhile is looked at now, as any change is.
        if (seen.length > 0) this.#queue.add(key);
        this.#queue.addRateLimited(key, retryAfterMs);
      } finally {
        this.#reconciling.delete(key);
        metrics?.activeWorkers(-1);
        this.#queue.done(key);
        this.#active--;
      }
      // The burst is over: its summary now, not up to 10 s later.
      if (this.#active === 0 && this.#queue.length === 0) this.#writes.flush();
    }
  }
}
