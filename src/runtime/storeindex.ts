// A store index (client-go's Indexer): the keys of a store's objects by one value derived from
// each object, such as its namespace or its owner's uid, so a change to a related object finds
// the objects that depend on it without scanning the store.
import { KeySets } from './keysets.ts';

export class StoreIndex<T> {
  /** What it indexes by, e.g. 'namespace' or 'owner': how readers find it in a store shared with others. */
  readonly name: string;
  readonly #valueOf: (object: T) => string | undefined;
  readonly #keys = new KeySets();

  /** `valueOf` answers the value an object is indexed under, or undefined for none. */
  constructor(name: string, valueOf: (object: T) => string | undefined) {
    this.name = name;
    this.#valueOf = valueOf;
  }

  /** The keys of the objects indexed under `value`. */
  get(value: string): Iterable<string> {
    return this.#keys.get(value);
  }

  /** Moves `key` from where `before` was indexed to where `after` is. */
  update(key: string, before: T | undefined, after: T | undefined): void {
    const from = before === undefined ? undefined : this.#valueOf(before);
    const to = after === undefined ? undefined : this.#valueOf(after);
    if (from === to) return;
    if (from !== undefined) this.#keys.remove(from, key);
    if (to !== undefined) this.#keys.add(to, key);
  }

  /** Indexes a whole new set of objects (a relist swapped in). */
  rebuild(objects: ReadonlyMap<string, T>): void {
    this.#keys.clear();
    for (const [key, object] of objects) {
      const value = this.#valueOf(object);
      if (value !== undefined) this.#keys.add(value, key);
    }
  }
}
