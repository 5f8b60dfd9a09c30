// A label or annotation change as JSON Patch operations on metadata.labels or
// metadata.annotations (RFC 6902, keys escaped as RFC 6901 pointers), for logs and dry runs:
// fast-json-patch's compare of the map before and the map after. Of annotations the cache keeps
// digests, not values, so the map before is seen through what it can answer.
import jsonpatch from 'fast-json-patch';
import type { MetadataField } from '../config/model.ts';

export type MetadataOperation =
  | { readonly op: 'add' | 'replace'; readonly path: string; readonly value: string }
  | { readonly op: 'remove'; readonly path: string };

/** A map before a change, as far as its patch needs it: its keys in order, and whether a key held a value. */
export interface Before {
  readonly keys: readonly string[];
  holds(key: string, value: string): boolean;
}

/** A whole map as Before. */
export function before(map: Readonly<Record<string, string>>): Before {
  return { keys: Object.keys(map), holds: (key, value) => map[key] === value };
}

/**
 * Removals and replacements in reverse key order of `previous`, then additions in key order of
 * `after`: compare's order.
 */
export function metadataPatch(
  field: MetadataField,
  previous: Before,
  after: Readonly<Record<string, string>>,
): MetadataOperation[] {
  // Nothing before and nothing after: most objects' annotations.
  if (previous.keys.length === 0 && Object.keys(after).length === 0) return [];
  // Each key before at its value after where it holds that, else at null, which no value equals.
  const seen: Record<string, string | null> = {};
  for (const key of previous.keys) {
    seen[key] = Object.hasOwn(after, key) && previous.holds(key, after[key]!) ? after[key]! : null;
  }
  // Two maps of strings: compare yields only additions, replacements and removals of strings.
  return jsonpatch.compare({ metadata: { [field]: seen } }, { metadata: { [field]: after } }) as MetadataOperation[];
}
