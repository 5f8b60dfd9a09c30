// The reflector's cache: the watcher's events applied to a map from object key to a compact
// projection of the object. A relist is buffered and swapped in whole, so readers never see a
// half-listed state, and objects missing from it (deleted while we were away) leave the cache.
import type { PartialObjectMetadata } from '../kube/objects.ts';
import type { StoreIndex } from './index.ts';
import type { WatcherEvent } from './watcher.ts';

/** `namespace/name`, or `name` for cluster-scoped objects (client-go's MetaNamespaceKeyFunc). */
export function objectKey(meta: { readonly name: string; readonly namespace?: string | undefined }): string {
  return meta.namespace ? `${meta.namespace}/${meta.name}` : meta.name;
}

/** Keeps only what the controller needs of an object: it is what bounds memory. */
export interface Projection<T> {
  (object: PartialObjectMetadata): T;
  /**
   * Told when a projection leaves the cache (replaced, deleted, missing from a relist, or part of a
   * relist that failed half-way), so that parts it shares with others can be freed.
   */
  readonly release?: (projected: T) => void;
}

/** What the store reports back so the controller can queue work. */
export type StoreChange<T> =
  /** `previous`: what the store held under the key before, for listeners that compare. */
  | { readonly type: 'upsert'; readonly key: string; readonly object: T; readonly previous: T | undefined }
  | { readonly type: 'delete'; readonly key: string; readonly previous: T | undefined }
  /**
   * A list completed: `changed` are the keys that are new or whose resourceVersion moved since
   * we last saw them (all of them after the first list); `removed` are gone; `previous` is what
   * the store held before, for listeners that compare.
   */
  | {
    readonly type: 'resync';
    readonly changed: readonly string[];
    readonly removed: readonly string[];
    readonly previous: ReadonlyMap<string, T>;
  };

export class Store<T> {
  readonly #project: Projection<T>;
  #objects = new Map<string, T>();
  /** resourceVersion per key: a relist re-queues only what changed while we were away. */
  #versions = new Map<string, string>();
  #buffer: { objects: Map<string, T>; versions: Map<string, string> } | undefined;
  #synced = false;
  readonly #indexes: readonly StoreIndex<T>[];

  constructor(project: Projection<T>, indexes: readonly StoreIndex<T>[] = []) {
    this.#project = project;
    this.#indexes = indexes;
  }

  /** True once the first complete list has been applied. */
  get synced(): boolean {
    return this.#synced;
  }

  get size(): number {
    return this.#objects.size;
  }

  get(key: string): T | undefined {
    return this.#objects.get(key);
  }

  keys(): IterableIterator<string> {
    return this.#objects.keys();
  }

  values(): IterableIterator<T> {
    return this.#objects.values();
  }

  /** Applies one watcher event; returns the change for the controller, if any. */
  apply(event: WatcherEvent): StoreChange<T> | undefined {
    switch (event.type) {
      case 'init':
        // A relist that failed half-way is started over.
        this.#releaseAll(this.#buffer?.objects);
        this.#buffer = { objects: new Map(), versions: new Map() };
        return undefined;
      case 'initApply': {
        const key = objectKey(event.object.metadata);
        if (this.#buffer === undefined) return undefined;
        this.#release(this.#buffer.objects.get(key));
        this.#buffer.objects.set(key, this.#project(event.object));
        this.#buffer.versions.set(key, event.object.metadata.resourceVersion);
        return undefined;
      }
      case 'initDone': {
        const next = this.#buffer ?? { objects: new Map<string, T>(), versions: new Map<string, string>() };
        const removed = [...this.#objects.keys()].filter((key) => !next.objects.has(key));
        // Unchanged objects need no new reconcile (and one waiting out a retry backoff keeps waiting).
        const changed = [...next.versions].filter(([key, version]) => this.#versions.get(key) !== version).map((
          [key],
        ) => key);
        const previous = this.#objects;
        for (const index of this.#indexes) index.rebuild(next.objects);
        // Every object is projected anew by the relist: the old projections all leave.
        this.#releaseAll(this.#objects);
        this.#objects = next.objects;
        this.#versions = next.versions;
        this.#buffer = undefined;
        this.#synced = true;
        return { type: 'resync', changed, removed, previous };
      }
      case 'apply': {
        const key = objectKey(event.object.metadata);
        const object = this.#project(event.object);
        const previous = this.#objects.get(key);
        for (const index of this.#indexes) index.update(key, previous, object);
        this.#release(previous);
        this.#objects.set(key, object);
        this.#versions.set(key, event.object.metadata.resourceVersion);
        return { type: 'upsert', key, object, previous };
      }
      case 'delete': {
        const key = objectKey(event.object.metadata);
        const previous = this.#objects.get(key);
        for (const index of this.#indexes) index.update(key, previous, undefined);
        this.#release(previous);
        this.#objects.delete(key);
        this.#versions.delete(key);
        return { type: 'delete', key, previous };
      }
      case 'watching':
      case 'error':
        return undefined;
    }
  }

  #release(object: T | undefined): void {
    if (object !== undefined) this.#project.release?.(object);
  }

  #releaseAll(objects: ReadonlyMap<string, T> | undefined): void {
    if (this.#project.release === undefined || objects === undefined) return;
    for (const object of objects.values()) this.#project.release(object);
  }
}
