// A label or annotation change as JSON Patch operations on metadata.labels or
// metadata.annotations (RFC 6902, keys escaped as RFC 6901 pointers: "/" → "~1"), for logs and
// dry runs. Each is one flat map of strings, so a general JSON diff (and its deep clones) is not
// needed; and of annotations the cache keeps digests, not values, so the map before is seen
// through what it can answer.
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
 * `after` (fast-json-patch's compare order).
 */
export function metadataPatch(
  field: MetadataField,
  previous: Before,
  after: Readonly<Record<string, string>>,
): MetadataOperation[] {
  const ops: MetadataOperation[] = [];
  const { keys } = previous;
  for (let i = keys.length - 1; i >= 0; i--) {
    const key = keys[i]!;
    if (!Object.hasOwn(after, key)) ops.push({ op: 'remove', path: pointer(field, key) });
    else if (!previous.holds(key, after[key]!)) {
      ops.push({ op: 'replace', path: pointer(field, key), value: after[key]! });
    }
  }
  const had = new Set(keys);
  for (const key of Object.keys(after)) {
    if (!had.has(key)) ops.push({ op: 'add', path: pointer(field, key), value: after[key]! });
  }
  return ops;
}

function pointer(field: MetadataField, key: string): string {
  return `/metadata/${field}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;
}

/** The operations on each map. */
export function byField(ops: readonly MetadataOperation[]): Record<MetadataField, MetadataOperation[]> {
  const split: Record<MetadataField, MetadataOperation[]> = { labels: [], annotations: [] };
  for (const op of ops) split[op.path.startsWith('/metadata/labels/') ? 'labels' : 'annotations'].push(op);
  return split;
}
