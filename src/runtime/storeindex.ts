// A store index (client-go's Indexer): the keys of a store's objects by one value derived from
// each object, such as its namespace or its owner's uid, so a change to a related object finds
// the objects that depend on it without scanning the store. Small groups are kept small, as most
// owners have a few children: one key is held as itself, up to SMALL keys in an array of exactly
// that length, and only larger groups (a namespace's objects) in a Set.

const NONE: ReadonlySet<string> = new Set();
const SMALL = 8;
type Keys = string | readonly string[] | Set<string>;

export class StoreIndex<T> {
  /** What it indexes by, e.g. 'namespace' or 'owner': how readers find it in a store shared with others. */
  readonly name: string;
  readonly #valueOf: (object: T) => string | undefined;
  readonly #keys = new Map<string, Keys>();

  /** `valueOf` answers the value an object is indexed under, or undefined for none. */
  constructor(name: string, valueOf: (object: T) => string | undefined) {
    this.name = name;
    this.#valueOf = valueOf;
  }

  /** The keys of the objects indexed under `value`. */
  get(value: string): Iterable<string> {
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
    else if (keys instanceof Set) keys.add(key);
    else if (typeof keys === 'string') {
      if (keys !== key) this.#keys.set(value, [keys, key]);
    } else if (!keys.includes(key)) {
      this.#keys.set(value, keys.length < SMALL ? keys.concat(key) : new Set(keys).add(key));
    }
  }

  #remove(value: string, key: string): void {
    const keys = this.#keys.get(value);
    if (keys === key) this.#keys.delete(value);
    else if (keys instanceof Set) {
      if (keys.delete(key) && keys.size === 0) this.#keys.delete(value);
    } else if (Array.isArray(keys) && keys.includes(key)) {
      const rest = keys.filter((other) => other !== key);
      this.#keys.set(value, rest.length === 1 ? rest[0]! : rest);
    }
  }
}
