// The objects of one kind by what their templates last looked up in sources (`teams` key
// `payments`), recorded as they are rendered, so a source whose entries change requeues exactly
// the objects that read them. Keyed by what was looked up, not by the object: a key may come from
// the object's namespace or owner, which the object alone does not tell.
import { KeySets } from '../runtime/keysets.ts';

/** One lookup as the index keys it: the source's name and the key, apart. */
export const lookupKey = (source: string, key: string): string => `${source}\n${key}`;

export class LookupIndex {
  readonly #objects = new KeySets();
  /** What each object looked up last, joined (one lookup is one string: no array per object). */
  readonly #looked = new Map<string, string>();

  /** Records that the object under `objectKey` looked up `looked` (lookupKey()s), replacing what it looked up before. */
  record(objectKey: string, looked: readonly string[]): void {
    const joined = looked.join('\0');
    const before = this.#looked.get(objectKey);
    if (before === joined) return;
    if (before !== undefined) { for (const key of before.split('\0')) this.#objects.remove(key, objectKey); }
    if (joined === '') this.#looked.delete(objectKey);
    else {
      this.#looked.set(objectKey, joined);
      for (const key of looked) this.#objects.add(key, objectKey);
    }
  }

  /** The object left the cache. */
  forget(objectKey: string): void {
    this.record(objectKey, []);
  }

  /** The objects that looked up `key` in `source`. */
  objects(source: string, key: string): Iterable<string> {
    return this.#objects.get(lookupKey(source, key));
  }
}
