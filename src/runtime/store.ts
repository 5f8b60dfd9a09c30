// The reflector's cache: the watcher's events applied to a map from object key to a compact
// projection of the object. A relist is buffered and swapped in whole, so readers never see a
// half-listed state, and objects missing from it (deleted while we were away) leave the cache.
import type { PartialObjectMetadata } from '../kube/objects.ts';
import type { WatcherEvent } from './watcher.ts';

/** `namespace/name`, or `name` for cluster-scoped objects (client-go's MetaNamespaceKeyFunc). */
export function objectKey(meta: { readonly name: string; readonly namespace?: string | undefined }): string {
  return meta.namespace ? `${meta.namespace}/${meta.name}` : meta.name;
}

/** What the store reports back so the controller can queue work. */
export type StoreChange<T> =
  | { readonly type: 'upsert'; readonly key: string; readonly object: T }
  | { readonly type: 'delete'; readonly key: string }
  /**
   * A list completed: `changed` are the keys that are new or whose resourceVersion moved since
   * we last saw them (all of them after the first list); `removed` are gone.
   */
  | { readonly type: 'resync'; readonly changed: readonly string[]; readonly removed: readonly string[] };

export class Store<T> {
  readonly #project: (object: PartialObjectMetadata) => T;
  #objects = new Map<string, T>();
  /** resourceVersion per key: a relist re-queues only what changed while we were away. */
  #versions = new Map<string, string>();
  #buffer: { objects: Map<string, T>; versions: Map<string, string> } | undefined;
  #synced = false;

  /** `project` keeps only what the controller needs of an object: it is what bounds memory. */
  constructor(project: (object: PartialObjectMetadata) => T) {
    this.#project = project;
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
        this.#buffer = { objects: new Map(), versions: new Map() };
        return undefined;
      case 'initApply': {
        const key = objectKey(event.object.metadata);
        this.#buffer?.objects.set(key, this.#project(event.object));
        this.#buffer?.versions.set(key, event.object.metadata.resourceVersion);
        return undefined;
      }
      case 'initDone': {
        const next = this.#buffer ?? { objects: new Map<string, T>(), versions: new Map<string, string>() };
        const removed = [...this.#objects.keys()].filter((key) => !next.objects.has(key));
        // Unchanged objects need no new reconcile (and one waiting out a retry backoff keeps waiting).
        const changed = [...next.versions].filter(([key, version]) => this.#versions.get(key) !== version).map(([key]) => key);
        this.#objects = next.objects;
        this.#versions = next.versions;
        this.#buffer = undefined;
        this.#synced = true;
        return { type: 'resync', changed, removed };
      }
      case 'apply': {
        const key = objectKey(event.object.metadata);
        const object = this.#project(event.object);
        this.#objects.set(key, object);
        this.#versions.set(key, event.object.metadata.resourceVersion);
        return { type: 'upsert', key, object };
      }
      case 'delete': {
        const key = objectKey(event.object.metadata);
        this.#objects.delete(key);
        this.#versions.delete(key);
        return { type: 'delete', key };
      }
      case 'watching':
      case 'error':
        return undefined;
    }
  }
}
