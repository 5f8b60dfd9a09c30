// The reflector's cache: the watcher's events applied to a map from object key to a compact
// projection of the object. A relist is buffered and swapped in whole, so readers never see a
// half-listed state, and objects missing from it (deleted while we were away) leave the cache.
import type { PartialObjectMetadata } from '../apimachinery/objects.ts';
import type { StoreIndex } from './storeindex.ts';
import type { WatcherEvent } from './watcher.ts';

/** `namespace/name`, or `name` for cluster-scoped objects (client-go's MetaNamespaceKeyFunc). */
export function objectKey(meta: { readonly name: string; readonly namespace?: string | undefined }): string {
  // join builds one flat string; a template literal builds a rope of a fresh `namespace/` and the
  // name, which costs more per cached key and keeps the name's own string alive.
  return meta.namespace ? [meta.namespace, meta.name].join('/') : meta.name;
}

/** Keeps only what the controller needs of an object: it is what bounds memory. */
export interface Projection<T> {
  /**
   * `key` is the object's key in the store: a projection may keep it rather than a copy of the
   * name; `previous`, what the store holds under it now, for what a projection carries over.
   */
  (object: PartialObjectMetadata, key: string, previous: T | undefined): T;
  /** The resourceVersion the projection kept: a relist re-queues only what changed while we were away. */
  readonly version: (projected: T) => string;
  /**
   * The key the projection kept, if it keeps one: the store hands it to the object's next
   * projections and reports it in its changes, so each cached object holds one copy of its key.
   */
  readonly key?: (projected: T) => string;
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
   * the store held before, for listeners that compare (after a list of a widened selector, which
   * adds only: what it held under the changed keys).
   */
  | {
    readonly type: 'resync';
    readonly changed: readonly string[];
    readonly removed: readonly string[];
    readonly previous: ReadonlyMap<string, T>;
    /** The list was of what a widened selector adds (merged in, nothing removed), not a relist. */
    readonly merged?: true;
  };

export class Store<T> {
  readonly #project: Projection<T>;
  #objects = new Map<string, T>();
  #buffer: Map<string, T> | undefined;
  /** The list under way adds to the cache (a widened selector's), rather than replacing it. */
  #merging = false;
  #synced = false;
  readonly #indexes: readonly StoreIndex<T>[];

  constructor(project: Projection<T>, indexes: readonly StoreIndex<T>[] = []) {
    this.#project = project;
    this.#indexes = indexes;
  }

  /** Its index named `name` (see StoreIndex.name), if it keeps one. */
  index(name: string): StoreIndex<T> | undefined {
    return this.#indexes.find((index) => index.name === name);
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

  /** The resourceVersion of the object cached under `key`. */
  version(key: string): string | undefined {
    const object = this.#objects.get(key);
    return object === undefined ? undefined : this.#project.version(object);
  }

  keys(): IterableIterator<string> {
    return this.#objects.keys();
  }

  values(): IterableIterator<T> {
    return this.#objects.values();
  }

  /**
   * Drops the objects `keeps` rejects (a partition that shrank): reported as a relist that removed
   * them, so listeners let them go as they do objects deleted while a watch was away.
   */
  retain(keeps: (key: string) => boolean): StoreChange<T> | undefined {
    const removed = [...this.#objects.keys()].filter((key) => !keeps(key));
    if (removed.length === 0) return undefined;
    const previous = new Map(this.#objects);
    for (const key of removed) {
      const object = this.#objects.get(key);
      for (const index of this.#indexes) index.update(key, object, undefined);
      this.#release(object);
      this.#objects.delete(key);
    }
    return { type: 'resync', changed: [], removed, previous };
  }

  /** Applies one watcher event; returns the change for the controller, if any. */
  apply(event: WatcherEvent): StoreChange<T> | undefined {
    switch (event.type) {
      case 'init':
        // A relist that failed half-way is started over.
        this.#releaseAll(this.#buffer);
        this.#buffer = new Map();
        this.#merging = event.merge === true;
        for (const index of this.#indexes) index.discard();
        return undefined;
      case 'initApply': {
        if (this.#buffer === undefined) return undefined;
        const fresh = objectKey(event.object.metadata);
        const key = this.#keyOf(fresh, this.#objects.get(fresh));
        const listed = this.#buffer.get(key);
        const object = this.#project(event.object, key, this.#objects.get(key));
        // A widened selector's list is merged in object by object; a relist's index is swapped in whole.
        if (!this.#merging) { for (const index of this.#indexes) index.stage(key, listed, object); }
        this.#release(listed);
        this.#buffer.set(key, object);
        return undefined;
      }
      case 'initDone': {
        if (this.#merging) return this.#merge();
        const next = this.#buffer ?? new Map<string, T>();
        const removed = [...this.#objects.keys()].filter((key) => !next.has(key));
        // Unchanged objects need no new reconcile (and one waiting out a retry backoff keeps waiting).
        const { version } = this.#project;
        const changed: string[] = [];
        for (const [key, object] of next) {
          const before = this.#objects.get(key);
          if (before === undefined || version(before) !== version(object)) changed.push(key);
        }
        const previous = this.#objects;
        for (const index of this.#indexes) index.commit();
        // Every object is projected anew by the relist: the old projections all leave.
        this.#releaseAll(this.#objects);
        this.#objects = next;
        this.#buffer = undefined;
        this.#synced = true;
        return { type: 'resync', changed, removed, previous };
      }
      case 'apply': {
        const fresh = objectKey(event.object.metadata);
        const previous = this.#objects.get(fresh);
        const key = this.#keyOf(fresh, previous);
        const object = this.#project(event.object, key, previous);
        for (const index of this.#indexes) index.update(key, previous, object);
        this.#release(previous);
        this.#objects.set(key, object);
        return { type: 'upsert', key, object, previous };
      }
      case 'delete': {
        const key = objectKey(event.object.metadata);
        const previous = this.#objects.get(key);
        for (const index of this.#indexes) index.update(key, previous, undefined);
        this.#release(previous);
        this.#objects.delete(key);
        return { type: 'delete', key, previous };
      }
      case 'watching':
      case 'error':
        return undefined;
    }
  }

  /**
   * Adds what a list of a widened selector brought: nothing leaves the cache, and an object it
   * holds already at the same version is no change. `previous` answers for the changed keys.
   */
  #merge(): StoreChange<T> {
    const buffer = this.#buffer ?? new Map<string, T>();
    const { version } = this.#project;
    const changed: string[] = [];
    const previous = new Map<string, T>();
    for (const [key, object] of buffer) {
      const before = this.#objects.get(key);
      if (before !== undefined && version(before) === version(object)) {
        this.#release(object);
        continue;
      }
      if (before !== undefined) previous.set(key, before);
      for (const index of this.#indexes) index.update(key, before, object);
      this.#release(before);
      this.#objects.set(key, object);
      changed.push(key);
    }
    this.#buffer = undefined;
    this.#merging = false;
    return { type: 'resync', changed, removed: [], previous, merged: true };
  }

  /** The key to use for an object cached as `current`: the copy it holds, when the projection keeps keys. */
  #keyOf(fresh: string, current: T | undefined): string {
    return current === undefined || this.#project.key === undefined ? fresh : this.#project.key(current);
  }

  #release(object: T | undefined): void {
    if (object !== undefined) this.#project.release?.(object);
  }

  #releaseAll(objects: ReadonlyMap<string, T> | undefined): void {
    if (this.#project.release === undefined || objects === undefined) return;
    for (const object of objects.values()) this.#project.release(object);
  }
}
