// One shared copy of values that repeat across thousands of cached objects (namespaces, lists of
// owned label keys), counted by use, so that a value no cached object uses any more is dropped:
// namespaces come and go, and a table that only grows would keep every one ever seen.

export class Interner<V> {
  readonly #entries = new Map<string, { readonly value: V; uses: number }>();

  /** The shared value for `key` (`value` if there is none yet), counted as one more use. */
  take(key: string, value: V): V {
    const entry = this.#entries.get(key);
    if (entry !== undefined) {
      entry.uses++;
      return entry.value;
    }
    this.#entries.set(key, { value, uses: 1 });
    return value;
  }

  /** One use of `key` ended; the value is dropped with its last use. */
  release(key: string): void {
    const entry = this.#entries.get(key);
    if (entry !== undefined && --entry.uses === 0) this.#entries.delete(key);
  }

  /** Distinct values in use. */
  get size(): number {
    return this.#entries.size;
  }
}
