// Sets of object keys by a value (a namespace, an owner's uid, a key looked up in a source), kept
// small as most are: one key is held as itself, up to SMALL keys in an array of exactly that
// length, and only larger groups (a namespace's objects) in a Set.

const NONE: ReadonlySet<string> = new Set();
const SMALL = 8;
type Keys = string | readonly string[] | Set<string>;

export class KeySets {
  readonly #keys = new Map<string, Keys>();

  /** The keys under `value`. */
  get(value: string): Iterable<string> {
    const keys = this.#keys.get(value);
    if (keys === undefined) return NONE;
    return typeof keys === 'string' ? [keys] : keys;
  }

  add(value: string, key: string): void {
    const keys = this.#keys.get(value);
    if (keys === undefined) this.#keys.set(value, key);
    else if (keys instanceof Set) keys.add(key);
    else if (typeof keys === 'string') {
      if (keys !== key) this.#keys.set(value, [keys, key]);
    } else if (!keys.includes(key)) {
      this.#keys.set(value, keys.length < SMALL ? keys.concat(key) : new Set(keys).add(key));
    }
  }

  remove(value: string, key: string): void {
    const keys = this.#keys.get(value);
    if (keys === key) this.#keys.delete(value);
    else if (keys instanceof Set) {
      if (keys.delete(key) && keys.size === 0) this.#keys.delete(value);
    } else if (Array.isArray(keys) && keys.includes(key)) {
      const rest = keys.filter((other) => other !== key);
      this.#keys.set(value, rest.length === 1 ? rest[0]! : rest);
    }
  }

  clear(): void {
    this.#keys.clear();
  }
}
