// One resource's cache kept current: watcher → store, with listeners told of every change (the
// controller's queue, and the mappers of controllers that read this resource as a related one).
// client-go's shared informer: several controllers read one cache, so a resource is listed and
// watched once however many read it.
import { ApiError } from '../apimachinery/errors.ts';
import type { Logger } from '../util/log.ts';
import { sleep } from '../util/sleep.ts';
import type { Partition } from './partition.ts';
import type { StoreIndex } from './storeindex.ts';
import { type Projection, Store, type StoreChange } from './store.ts';
import { TimeSlice } from './slices.ts';
import { type ListWatch, watcher, type WatcherEvent, type WatcherOptions } from './watcher.ts';
import { Widening } from './widening.ts';

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
  readonly watch?: Omit<WatcherOptions, 'signal' | 'shardSelector' | 'widening'> | undefined;
  /** Set when replicas share the work: the cache keeps only this slice of the resource. */
  readonly partition?: Partition | undefined;
  readonly metrics?: InformerMetrics | undefined;
  /** Told of every failed list or watch (it is logged and retried anyway). */
  readonly onWatchError?: ((error: Error) => void) | undefined;
  /** Told when a watch that failed is established again, once its first event is in the store. */
  readonly onWatchRecovered?: (() => void) | undefined;
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
  /** How the partition is applied: by the server (its shardSelector), or here on the whole stream. */
  #filtering: 'server' | 'client' | undefined;
  /** The partition grew and the list that fetches what it now keeps has not completed. */
  #partitionPending = false;
  /** Set with a partition: asks the watcher to list what the partition adds when it grows. */
  readonly #widening: Widening | undefined;
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
    this.#widening = options.partition ? new Widening() : undefined;
    // A failed listOnce is the caller's to handle; readers of `synced` may come later or never.
    this.synced.catch(() => {});
  }

  /** Why the watch is down: its last error, until a list completes or a watch opens again. */
  get watchFailure(): Error | undefined {
    return this.#watchFailure;
  }

  /** How its partition is applied, once it watches: `server` (shardSelector honoured) or `client`; undefined without one. */
  get filtering(): 'server' | 'client' | undefined {
    return this.#filtering;
  }

  /**
   * Whether it holds what it should, as far as it can: listed, or failed to with an error that
   * `lasting` says will not pass (a cache that cannot be read is not waited for, while one whose
   * connection dropped is), and not listing again for a partition that grew.
   */
  current(lasting: (failure: Error) => boolean): boolean {
    if (this.#partitionPending) return false;
    return this.store.synced || (this.#watchFailure !== undefined && lasting(this.#watchFailure));
  }

  /** Why this cache is not serving current objects, in words: no first list yet, or a watch that is down; undefined when it is. */
  get problem(): string | undefined {
    const failure = this.#watchFailure ? `: ${this.#watchFailure.message}` : '';
    if (!this.store.synced) return `waiting for the first list${failure}`;
    if (this.#partitionPending) return `listing the objects of its new shard ranges${failure}`;
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

  /**
   * Watches; with a partition, lists what it adds whenever it grows (what it now keeps was never
   * sent) and watches on with the wider selector, and drops what it no longer keeps when it shrinks.
   */
  async #watch(signal: AbortSignal): Promise<void> {
    const { partition } = this.#options;
    const widening = this.#widening;
    if (!partition || !widening) return this.#watchOnce(signal, undefined, undefined);
    const unsubscribe = partition.subscribe(({ added }) => {
      if (added) {
        this.#partitionPending = true;
        // Without server filtering the stream is whole: all of it is listed, and what it adds kept.
        widening.request(this.#filtering === 'server' ? added : { ...added, selector: undefined });
        return;
      }
      const change = this.store.retain((key) => partition.keeps(metaOf(key)));
      this.#countCached();
      if (change) this.#emit(change);
    });
    try {
      const selector = partition.selector();
      this.#filtering = selector && (await this.#options.api.honoursShardSelector?.(selector, signal))
        ? 'server'
        : 'client';
      await this.#watchOnce(
        signal,
        this.#filtering === 'server' ? () => partition.selector() : undefined,
        widening,
      );
    } finally {
      unsubscribe();
    }
  }

  async #watchOnce(
    signal: AbortSignal,
    shardSelector: (() => string | undefined) | undefined,
    widening: Widening | undefined,
  ): Promise<void> {
    const events = watcher(this.#options.api, { ...this.#options.watch, shardSelector, widening, signal });
    // Events a chunk brings come as microtasks: a list of many objects would hold the loop throughout.
    const slice = new TimeSlice();
    for await (const event of events) {
      if (slice.spent) await slice.next();
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
      const recovered = (event.type === 'watching' || event.type === 'initDone') && this.#watchFailure !== undefined;
      if (recovered) {
        this.#options.log.info('watch re-established');
        this.#watchFailure = undefined;
      }
      this.#apply(event);
      if (recovered) this.#options.onWatchRecovered?.();
    }
  }

  /**
   * Lists once, without watching; rejects (and so does `synced`) if the list fails. Paginated: a
   * one-off read (status, prune, --once) needs the right to list only, a streaming list that to watch.
   * An answer that asks to come back later (429 or 5xx with Retry-After: a CRD whose storage is
   * still initializing, a server shedding load) is tried again after the time it names, as
   * client-go's REST client does, up to {@link LIST_ATTEMPTS} times.
   */
  async listOnce(signal: AbortSignal): Promise<void> {
    for (let attempt = 1;; attempt++) {
      try {
        await this.#listOnce(signal);
        return;
      } catch (error) {
        const wait = retryAfterMs(error);
        if (wait === undefined || attempt >= LIST_ATTEMPTS || signal.aborted) {
          if (error instanceof Error) this.#options.onWatchError?.(error);
          this.#watchFailure = error instanceof Error ? error : new Error(String(error));
          this.#listFailed(this.#watchFailure);
          this.#settle();
          throw error;
        }
        this.#options.log.info('list answered "come back later"; trying again', {
          controller: this.name,
          attempt,
          waitMs: wait,
          error,
        });
        await sleep(wait, signal);
      }
    }
  }

  async #listOnce(signal: AbortSignal): Promise<void> {
    for await (const event of watcher(this.#options.api, { ...this.#options.watch, streamingLists: false, signal })) {
      if (event.type === 'error') throw event.error;
      this.#apply(event);
      if (event.type === 'initDone') return;
    }
  }

  /** Sets the gauge when the size moved, not on each of a list's many events. */
  #countCached(): void {
    if (this.store.size !== this.#cached) this.#options.metrics?.cached(this.#cached = this.store.size);
  }

  #emit(change: StoreChange<T>): void {
    for (const listener of this.#listeners) listener(change);
  }

  #apply(event: WatcherEvent): void {
    const { partition } = this.#options;
    // The whole stream of a server that does not filter, or events of ranges just given up.
    if (
      (event.type === 'initApply' || event.type === 'apply') && partition && !partition.keeps(event.object.metadata)
    ) {
      return;
    }
    // Listed what the partition keeps, unless it grew again meanwhile (a list of that follows).
    if (event.type === 'initDone' && !this.#widening?.pending) this.#partitionPending = false;
    const change = this.store.apply(event);
    this.#countCached();
    if (!change) return;
    this.#emit(change);
    if (change.type !== 'resync') return;
    if (change.merged) {
      this.#options.log.info('listed what the widened selector adds', {
        objects: this.store.size,
        added: change.changed.length,
      });
    } else {
      // Counted when a list completes, so failed attempts are not relists.
      if (this.#lists++ > 0) this.#options.metrics?.relisted();
      this.#options.log.info(this.#lists === 1 ? 'initial list complete' : 'relist complete', {
        objects: this.store.size,
        ...(this.#lists > 1 ? { changed: change.changed.length, removed: change.removed.length } : {}),
      });
    }
    this.#watchFailure = undefined;
    this.#listed();
    this.#settle();
  }
}

/** The name and namespace a store key stands for (store.ts's objectKey, read back). */
function metaOf(key: string): { readonly name: string; readonly namespace?: string } {
  const slash = key.indexOf('/');
  return slash < 0 ? { name: key } : { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}

/** How many times a one-off list is tried in all when the server asks it to come back later (client-go's default). */
const LIST_ATTEMPTS = 10;

/** How long the server asked to wait before the request is tried again (at least 1 s, at most 30 s); undefined: not to. */
function retryAfterMs(error: unknown): number | undefined {
  if (!(error instanceof ApiError) || error.retryAfterSeconds === undefined) return undefined;
  if (error.status !== 429 && error.status < 500) return undefined;
  return Math.min(Math.max(error.retryAfterSeconds, 1), 30) * 1000;
}
