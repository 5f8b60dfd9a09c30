// One controller: watcher → store → queue → a bounded pool of workers calling `reconcile`.
// Like kube-rs's runner: no reconcile before the first list is complete, an object is reconciled
// by one worker at a time, failures retry with per-object backoff, successes requeue
// periodically (jittered) so drift that no event reports is still corrected.
import { ApiError } from '../kube/errors.ts';
import type { Logger } from '../util/log.ts';
import type { StoreIndex } from './storeindex.ts';
import { Informer } from './informer.ts';
import { type QueueMetrics, WorkQueue, type WorkQueueOptions } from './queue.ts';
import type { Projection, Store } from './store.ts';
import type { ListWatch, WatcherOptions } from './watcher.ts';

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
  readonly indexes?: readonly StoreIndex<T>[] | undefined;
  /**
   * Resolves once every other cache `reconcile` reads has listed once (controller-runtime's
   * WaitForCacheSync over the watched kinds); no reconcile starts before. Rejects when one
   * cannot be listed (`runOnce` then fails).
   */
  readonly dependencies?: (() => Promise<void>) | undefined;
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
  /** The controller's own cache, which controllers reading this resource may share. */
  readonly informer: Informer<T>;
  readonly #options: ControllerOptions<T>;
  readonly #queue: WorkQueue;

  constructor(options: ControllerOptions<T>) {
    this.name = options.name;
    this.#options = options;
    this.informer = new Informer({
      name: options.name,
      api: options.api,
      project: options.project,
      indexes: options.indexes,
      watch: options.watch,
      metrics: options.metrics,
      onWatchError: options.onWatchError,
      log: options.log,
    });
    this.#queue = new WorkQueue({ ...options.queue, ...(options.metrics ? { metrics: options.metrics.queue } : {}) });
  }

  get store(): Store<T> {
    return this.informer.store;
  }

  /** Resolves when the first list is complete. */
  get synced(): Promise<void> {
    return this.informer.synced;
  }

  /** Why the watch is down: its last error, until a list completes or a watch opens again. */
  get watchFailure(): Error | undefined {
    return this.informer.watchFailure;
  }

  /** Queues an object whose related objects changed (a mapper of `Watches`). */
  enqueue(key: string): void {
    this.#queue.add(key);
  }

  /**
   * Watches until `intake` aborts, reconciling once `leading` resolves (at once without leader
   * election; a standby keeps its cache warm meanwhile). On abort it stops watching and handing
   * out work, and resolves once the reconciles already running have finished (the caller
   * bounds that wait with a grace period). When `writes` aborts (leadership lost) it stops
   * handing out work at once and the reconciles running get the aborted signal.
   */
  async run(
    intake: AbortSignal,
    leading: Promise<unknown> = Promise.resolve(),
    writes: AbortSignal = ALWAYS,
  ): Promise<void> {
    this.informer.subscribe((change) => {
      if (change.type === 'upsert') this.#queue.add(change.key);
      else if (change.type === 'delete') this.#queue.remove(change.key);
      else {
        for (const key of change.changed) this.#queue.add(key);
        for (const key of change.removed) this.#queue.remove(key);
      }
    });
    const stopQueue = (): void => this.#queue.shutDown();
    intake.addEventListener('abort', stopQueue, { once: true });
    writes.addEventListener('abort', stopQueue, { once: true });
    // Workers start once the first list is complete and this process leads.
    let workers: Promise<unknown> = Promise.resolve();
    const dependencies = this.#options.dependencies ?? (() => Promise.resolve());
    void this.synced.then(dependencies).then(() => leading).then(() => {
      if (!intake.aborted && !writes.aborted) {
        workers = Promise.all(Array.from({ length: this.#options.concurrency }, () => this.#work(writes)));
      }
    }, () => {});
    try {
      await this.informer.run(intake);
    } finally {
      intake.removeEventListener('abort', stopQueue);
      writes.removeEventListener('abort', stopQueue);
      stopQueue();
      await workers;
    }
  }

  /**
   * Lists once and reconciles every object once, `concurrency` at a time, without watching or
   * retrying (failures are logged). Rejects if the list, or one of its dependencies, fails.
   */
  async runOnce(signal: AbortSignal): Promise<void> {
    await this.informer.listOnce(signal);
    await this.#options.dependencies?.();
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

  async #work(writes: AbortSignal): Promise<void> {
    const { reconcile, requeueAfterMs, log, metrics } = this.#options;
    for (let key = await this.#queue.get(); key !== undefined; key = await this.#queue.get()) {
      const object = this.store.get(key);
      // Gone from the store: deleted while queued. Nothing to do, and nothing may recreate it.
      if (object === undefined) {
        this.#queue.remove(key);
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
