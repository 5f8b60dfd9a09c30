// One controller: watcher → store → queue → a bounded pool of workers calling `reconcile`.
// Like kube-rs's runner: no reconcile before the first list is complete, an object is reconciled
// by one worker at a time, failures retry with per-object backoff, successes requeue
// periodically (jittered) so drift that no event reports is still corrected.
import { ApiError } from '../kube/errors.ts';
import type { Logger } from '../log.ts';
import { WorkQueue, type QueueMetrics, type WorkQueueOptions } from './queue.ts';
import { Store, type Projection } from './store.ts';
import { watcher, type ListWatch, type WatcherEvent, type WatcherOptions } from './watcher.ts';

/**
 * Reconciles one object; throwing retries it with backoff. `writes` aborts when this process
 * may no longer write (leadership lost): writes still running are to be aborted.
 */
export type Reconcile<T> = (object: T, key: string, writes: AbortSignal) => Promise<void>;

/** For runs without leader election: writing is never taken away. */
const ALWAYS = new AbortController().signal;

/** What a controller reports (metrics.ts maps it to controller-runtime's metric names). */
export interface ControllerMetrics {
  reconciled(result: 'success' | 'error', seconds: number): void;
  activeWorkers(delta: number): void;
  cached(size: number): void;
  watchRestarted(): void;
  relisted(): void;
  readonly queue: QueueMetrics;
}

export interface ControllerOptions<T> {
  /** Names the controller in logs and metrics, e.g. "deployments.apps". */
  readonly name: string;
  readonly api: ListWatch;
  /** Keeps only what `reconcile` needs of an object (see Store). */
  readonly project: Projection<T>;
  readonly reconcile: Reconcile<T>;
  /** Workers reconciling at the same time. */
  readonly concurrency: number;
  /** Period of the re-check of every object, jittered by ±10 %; 0 disables it. */
  readonly requeueAfterMs: number;
  readonly watch?: Omit<WatcherOptions, 'signal'>;
  /** The work queue's clock and retry delays (client-go's by default). */
  readonly queue?: Omit<WorkQueueOptions, 'metrics'>;
  readonly metrics?: ControllerMetrics | undefined;
  /** Told of every failed list or watch (it is logged and retried anyway). */
  readonly onWatchError?: ((error: Error) => void) | undefined;
  readonly log: Logger;
}

export class Controller<T> {
  readonly name: string;
  readonly store: Store<T>;
  readonly #options: ControllerOptions<T>;
  readonly #queue: WorkQueue;
  #lists = 0;
  #watchFailure: Error | undefined;
  #markSynced!: () => void;
  /** Resolves when the first list is complete. */
  readonly synced = new Promise<void>((resolve) => {
    this.#markSynced = resolve;
  });

  constructor(options: ControllerOptions<T>) {
    this.name = options.name;
    this.#options = options;
    this.store = new Store(options.project);
    this.#queue = new WorkQueue({ ...options.queue, ...(options.metrics ? { metrics: options.metrics.queue } : {}) });
  }

  /** Why the watch is down: its last error, until a list completes or a watch opens again. */
  get watchFailure(): Error | undefined {
    return this.#watchFailure;
  }

  /**
   * Watches until `intake` aborts, reconciling once `leading` resolves (at once without leader
   * election; a standby keeps its cache warm meanwhile). On abort it stops watching and handing
   * out work, and resolves once the reconciles already running have finished (the caller
   * bounds that wait with a grace period). When `writes` aborts (leadership lost) it stops
   * handing out work at once and the reconciles running get the aborted signal.
   */
  async run(intake: AbortSignal, leading: Promise<unknown> = Promise.resolve(), writes: AbortSignal = ALWAYS): Promise<void> {
    const stopQueue = (): void => this.#queue.shutDown();
    intake.addEventListener('abort', stopQueue, { once: true });
    writes.addEventListener('abort', stopQueue, { once: true });
    // Workers start once the first list is complete and this process leads.
    let workers: Promise<unknown> = Promise.resolve();
    void this.synced.then(() => leading).then(() => {
      if (!intake.aborted && !writes.aborted) workers = Promise.all(Array.from({ length: this.#options.concurrency }, () => this.#work(writes)));
    });
    // The gauge is set when the size moves, not on each of a list's many events.
    let cached = -1;
    try {
      for await (const event of this.#events(intake)) {
        const change = this.store.apply(event);
        if (this.store.size !== cached) this.#options.metrics?.cached((cached = this.store.size));
        if (!change) continue;
        if (change.type === 'upsert') this.#queue.add(change.key);
        else if (change.type === 'delete') this.#queue.forget(change.key);
        else {
          for (const key of change.changed) this.#queue.add(key);
          for (const key of change.removed) this.#queue.forget(key);
          // Counted when a list completes, so failed attempts are not relists.
          if (this.#lists++ > 0) this.#options.metrics?.relisted();
          this.#options.log.info(this.#lists === 1 ? 'initial list complete' : 'relist complete', {
            objects: this.store.size,
            ...(this.#lists > 1 ? { changed: change.changed.length, removed: change.removed.length } : {}),
          });
          this.#markSynced();
        }
      }
    } finally {
      intake.removeEventListener('abort', stopQueue);
      writes.removeEventListener('abort', stopQueue);
      stopQueue();
      await workers;
    }
  }

  /**
   * Lists once and reconciles every object once, `concurrency` at a time, without watching or
   * retrying (failures are logged). Rejects if the list fails.
   */
  async runOnce(signal: AbortSignal): Promise<void> {
    for await (const event of watcher(this.#options.api, { ...this.#options.watch, signal })) {
      if (event.type === 'error') {
        this.#options.onWatchError?.(event.error);
        throw event.error;
      }
      this.store.apply(event);
      if (event.type === 'initDone') break;
    }
    this.#markSynced();
    const keys = [...this.store.keys()];
    const worker = async (): Promise<void> => {
      for (let key = keys.pop(); key !== undefined && !signal.aborted; key = keys.pop()) {
        const object = this.store.get(key);
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

  /** Queues every cached object again, without a relist: what they should look like has changed. */
  requeueAll(): void {
    for (const key of this.store.keys()) this.#queue.add(key);
  }

  /** The watcher's events, with failures logged, counted and kept until the watch is back. */
  async *#events(intake: AbortSignal): AsyncGenerator<WatcherEvent> {
    for await (const event of watcher(this.#options.api, { ...this.#options.watch, signal: intake })) {
      if (event.type === 'error') {
        this.#options.log.warn('watch failed; retrying', { error: event.error, retryInMs: Math.round(event.retryInMs) });
        this.#options.metrics?.watchRestarted();
        this.#options.onWatchError?.(event.error);
        this.#watchFailure = event.error;
        continue;
      }
      if ((event.type === 'watching' || event.type === 'initDone') && this.#watchFailure) {
        this.#options.log.info('watch re-established');
        this.#watchFailure = undefined;
      }
      yield event;
    }
  }

  async #work(writes: AbortSignal): Promise<void> {
    const { reconcile, requeueAfterMs, log, metrics } = this.#options;
    for (let key = await this.#queue.get(); key !== undefined; key = await this.#queue.get()) {
      const object = this.store.get(key);
      // Gone from the store: deleted while queued. Nothing to do, and nothing may recreate it.
      if (object === undefined) {
        this.#queue.forget(key);
        this.#queue.done(key);
        continue;
      }
      const started = performance.now();
      metrics?.activeWorkers(1);
      try {
        await reconcile(object, key, writes);
        metrics?.reconciled('success', (performance.now() - started) / 1000);
        this.#queue.forget(key);
        if (requeueAfterMs > 0) this.#queue.addAfter(key, requeueAfterMs * (0.9 + Math.random() * 0.2));
      } catch (error) {
        metrics?.reconciled('error', (performance.now() - started) / 1000);
        const retryAfterMs = error instanceof ApiError && error.retryAfterSeconds ? error.retryAfterSeconds * 1000 : 0;
        if (writes.aborted) log.warn('reconcile aborted: this process may no longer write', { key });
        else log.error('reconcile failed; retrying with backoff', { key, error });
        // A throttled request comes back no sooner than the server asked, and still backs off.
        this.#queue.addRateLimited(key, retryAfterMs);
      } finally {
        metrics?.activeWorkers(-1);
        this.#queue.done(key);
      }
    }
  }
}
