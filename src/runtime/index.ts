// A store index (client-go's Indexer): the keys of a store's objects by one value derived from
// each object, such as its namespace or its owner's uid, so a change to a related object finds
// the objects that depend on it without scanning the store. A value with one key holds the key
// itself, not a Set: most owners (a Job's pod, a one-replica ReplicaSet) have a single child.

const NONE: ReadonlySet<string> = new Set();

export class StoreIndex<T> {
  readonly #valueOf: (object: T) => string | undefined;
  readonly #keys = new Map<string, string | Set<string>>();

  /** `valueOf` answers the value an object is indexed under, or undefined for none. */
  constructor(valueOf: (object: T) => string | undefined) {
    this.#valueOf = valueOf;
  }

  /** The keys of the objects indexed under `value`. */
  get(value: string): ReadonlySet<string> | readonly [string] {
    const keys = this.#keys.get(value);
    if (keys === undefined) return NONE;
    return typeof keys === 'string' ? [keys] : keys;
  }

  /** Moves `key` from where `before` was indexed to where `after` is. */
  update(key: string, before: T | undefined, after: T | undefined): void {
    const from = before === undefined ? undefined : this.#valueOf(before);
    const to = after === undefined ? undefined : this.#valueOf(after);
    if (from === to) return;
    if (from !== undefined) this.#remove(from, key);
    if (to !== undefined) this.#add(to, key);
  }

  /** Indexes a whole new set of objects (a relist swapped in). */
  rebuild(objects: ReadonlyMap<string, T>): void {
    this.#keys.clear();
    for (const [key, object] of objects) {
      const value = this.#valueOf(object);
      if (value !== undefined) this.#add(value, key);
    }
  }

  #add(value: string, key: string): void {
    const keys = this.#keys.get(value);
    if (keys === undefined) this.#keys.set(value, key);
    else if (typeof keys !== 'string') keys.add(key);
    else if (keys !== key) this.#keys.set(value, new Set([keys, key]));
  }

  #remove(value: string, key: string): void {
    const keys = this.#keys.get(value);
    if (keys === key) this.#keys.delete(value);
    else if (typeof keys !== 'string' && keys?.delete(key) && keys.size === 0) this.#keys.delete(value);
  }
}
