// The objects of one kind by what their templates last looked up in sources (`teams` key
// `payments`), recorded as they are rendered, so a source whose entries change requeues exactly
// the objects that read them. Keyed by what was looked up, not by the object: a key may come from
// the object's namespace or owner, which the object alone does not tell.
import { KeySets } from '../runtime/keysets.ts';
import type { LabelledObject } from './object.ts';

/** One lookup as the index keys it: the source's name and the key, apart. */
export const lookupKey = (source: string, key: string): string => `${source}\n${key}`;

export class LookupIndex {
  readonly #objects = new KeySets();
  /** One copy of each joined string, however many objects looked the same up (most do). */
  readonly #joined = new Map<string, string>();

  /**
   * Records that `object` looked up `looked` (lookupKey()s), replacing what it looked up before.
   * What it looked up is kept on the object (carried to its next versions by the projection), not
   * in a map of objects here: that would cost more than the index itself.
   */
  record(object: LabelledObject, looked: readonly string[]): void {
    const text = looked.join('\0');
    if ((object.looked ?? '') === text) return;
    this.forget(object);
    if (text === '') return;
    let joined = this.#joined.get(text);
    if (joined === undefined) this.#joined.set(text, joined = text);
    object.looked = joined;
    for (const key of looked) this.#objects.add(key, object.key);
  }

  /** The object left the cache, or looks nothing up any more. */
  forget(object: LabelledObject): void {
    if (object.looked === undefined) return;
    for (const key of object.looked.split('\0')) this.#objects.remove(key, object.key);
    object.looked = undefined;
  }

  /** The objects that looked up `key` in `source`. */
  objects(source: string, key: string): Iterable<string> {
    return this.#objects.get(lookupKey(source, key));
  }
}
