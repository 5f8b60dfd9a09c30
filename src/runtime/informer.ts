// One resource's cache kept current: watcher → store, with listeners told of every change (the
// controller's queue, and the mappers of controllers that read this resource as a related one).
// client-go's shared informer: several controllers read one cache, so a resource is listed and
// watched once however many read it.
import type { Logger } from '../util/log.ts';
import type { StoreIndex } from './storeindex.ts';
import { type Projection, Store, type StoreChange } from './store.ts';
import { type ListWatch, watcher, type WatcherEvent, type WatcherOptions } from './watcher.ts';

/** What an informer reports (a subset of ControllerMetrics). */
export interface InformerMetrics {
  cached(size: number): void;
  watchRestarted(): void;
  relisted(): void;
  /** It stopped for good: its samples go. */
  stopped(): void;
}

export interface InformerOptions<T> {
  /** Names it in logs and metrics, e.g. "deployments.apps". */
  readonly name: string;
  readonly api: ListWatch;
  /** Keeps only what readers need of an object (see Store). */
  readonly project: Projection<T>;
  readonly indexes?: readonly StoreIndex<T>[] | undefined;
  readonly watch?: Omit<WatcherOptions, 'signal'> | undefined;
  readonly metrics?: InformerMetrics | undefined;
  /** Told of every failed list or watch (it is logged and retried anyway). */
  readonly onWatchError?: ((error: Error) => void) | undefined;
  readonly log: Logger;
}

export type InformerListener<T> = (change: StoreChange<T>) => void;

export class Informer<T> {
  readonly name: string;
  readonly store: Store<T>;
  readonly #options: InformerOptions<T>;
  readonly #listeners: InformerListener<T>[] = [];
  #lists = 0;
  #cached = -1;
  #watchFailure: Error | undefined;
  #listed!: () => void;
  #listFailed!: (error: Error) => void;
  #settle!: () => void;
  /** Resolves when the first list is complete; rejects only when a `listOnce` fails. */
  readonly synced = new Promise<void>((resolve, reject) => {
    this.#listed = resolve;
    this.#listFailed = reject;
  });
  /**
   * Resolves at the first complete list or the first failure before it, whichever comes first:
   * when readers that must not wait on a cache that cannot be read (403, a server away) stop waiting.
   */
  readonly settled = new Promise<void>((resolve) => {
    this.#settle = resolve;
  });

  constructor(options: InformerOptions<T>) {
    this.name = options.name;
    this.#options = options;
    this.store = new Store(options.project, options.indexes);
    // A failed listOnce is the caller's to handle; readers of `synced` may come later or never.
    this.synced.catch(() => {});
  }

  /** Why the watch is down: its last error, until a list completes or a watch opens again. */
  get watchFailure(): Error | undefined {
    return this.#watchFailure;
  }

  /** Why this cache is not serving current objects, in words: no first list yet, or a watch that is down; undefined when it is. */
  get problem(): string | undefined {
    const failure = this.#watchFailure ? `: ${this.#watchFailure.message}` : '';
    if (!this.store.synced) return `waiting for the first list${failure}`;
    return failure ? `watch down${failure}` : undefined;
  }

  /** Every change from now on, in order, after the store has applied it; returns the unsubscribe function. */
  subscribe(listener: InformerListener<T>): () => void {
    this.#listeners.push(listener);
    return () => {
      const index = this.#listeners.indexOf(listener);
      if (index >= 0) this.#listeners.splice(index, 1);
    };
  }

  /** Lists, then watches until `signal` aborts; failures are logged, counted and retried. */
  async run(signal: AbortSignal): Promise<void> {
    try {
      await this.#watch(signal);
    } finally {
      this.#options.metrics?.stopped();
    }
  }

  async #watch(signal: AbortSignal): Promise<void> {
    for await (const event of watcher(this.#options.api, { ...this.#options.watch, signal })) {
      if (event.type === 'error') {
        this.#options.log.warn('watch failed; retrying', {
          error: event.error,
          retryInMs: Math.round(event.retryInMs),
        });
        this.#options.metrics?.watchRestarted();
        this.#options.onWatchError?.(event.error);
        this.#watchFailure = event.error;
        this.#settle();
        continue;
      }
      if ((event.type === 'watching' || event.type === 'initDone') && this.#watchFailure) {
        this.#options.log.info('watch re-established');
        this.#watchFailure = undefined;
      }
      this.#apply(event);
    }
  }

  /**
   * Lists once, without watching; rejects (and so does `synced`) if the list fails. Paginated: a
   * one-off read (status, prune, --once) needs the right to list only, a streaming list that to watch.
   */
  async listOnce(signal: AbortSignal): Promise<void> {
    try {
      for await (const event of watcher(this.#options.api, { ...this.#options.watch, streamingLists: false, signal })) {
        if (event.type === 'error') {
          this.#options.onWatchError?.(event.error);
          this.#watchFailure = event.error;
          throw event.error;
        }
        this.#apply(event);
        if (event.type === 'initDone') return;
      }
    } catch (error) {
      this.#listFailed(error instanceof Error ? error : new Error(String(error)));
      this.#settle();
      throw error;
    }
  }

  #apply(event: WatcherEvent): void {
    const change = this.store.apply(event);
    // The gauge is set when the size moves, not on each of a list's many events.
    if (this.store.size !== this.#cached) this.#options.metrics?.cached(this.#cached = this.store.size);
    if (!change) return;
    for (const listener of this.#listeners) listener(change);
    if (change.type !== 'resync') return;
    // Counted when a list completes, so failed attempts are not relists.
    if (this.#lists++ > 0) this.#options.metrics?.relisted();
    this.#options.log.info(this.#lists === 1 ? 'initial list complete' : 'relist complete', {
      objects: this.store.size,
      ...(this.#lists > 1 ? { changed: change.changed.length, removed: change.removed.length } : {}),
    });
    this.#watchFailure = undefined;
    this.#listed();
    this.#settle();
  }
}
