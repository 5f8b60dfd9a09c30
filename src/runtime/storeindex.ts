// A store index (client-go's Indexer): the keys of a store's objects by one value derived from
// each object, such as its namespace or its owner's uid, so a change to a related object finds
// the objects that depend on it without scanning the store.
import { KeySets } from './keysets.ts';

/** What an object is indexed under: one value, several, or none. */
export type IndexValue = string | readonly string[] | undefined;

export class StoreIndex<T> {
  /** What it indexes by, e.g. 'namespace' or 'owner': how readers find it in a store shared with others. */
  readonly name: string;
  readonly #valueOf: (object: T) => IndexValue;
  #keys = new KeySets();
  /** The index of a list under way, which replaces this one when the list completes. */
  #staged: KeySets | undefined;

  /** `valueOf` answers the value an object is indexed under, several (a list's items), or undefined for none. */
  constructor(name: string, valueOf: (object: T) => IndexValue) {
    this.name = name;
    this.#valueOf = valueOf;
  }

  /** The keys of the objects indexed under `value`. */
  get(value: string): Iterable<string> {
    return this.#keys.get(value);
  }

  /** Moves `key` from where `before` was indexed to where `after` is. */
  update(key: string, before: T | undefined, after: T | undefined): void {
    this.#move(this.#keys, key, before, after);
  }

  /**
   * Indexes an object of a list under way (`before`: what the list brought under `key` already),
   * as it arrives: its completion then swaps the index in, rather than indexing every object at once.
   */
  stage(key: string, before: T | undefined, after: T): void {
    this.#move(this.#staged ??= new KeySets(), key, before, after);
  }

  /** The list under way completed: its index replaces this one. */
  commit(): void {
    this.#keys = this.#staged ?? new KeySets();
    this.#staged = undefined;
  }

  /** The list under way is given up (started over). */
  discard(): void {
    this.#staged = undefined;
  }

  #move(keys: KeySets, key: string, before: T | undefined, after: T | undefined): void {
    const from = before === undefined ? undefined : this.#valueOf(before);
    const to = after === undefined ? undefined : this.#valueOf(after);
    if (from === to) return;
    if (typeof from !== 'object' && typeof to !== 'object') {
      if (from !== undefined) keys.remove(from, key);
      if (to !== undefined) keys.add(to, key);
      return;
    }
    const old = new Set(typeof from === 'string' ? [from] : from);
    const now = new Set(typeof to === 'string' ? [to] : to);
    for (const value of old) if (!now.has(value)) keys.remove(value, key);
    for (const value of now) if (!old.has(value)) keys.add(value, key);
  }
}
