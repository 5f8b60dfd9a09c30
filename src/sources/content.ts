// What a source of truth holds: a map from a key to a value, or to a map of fields, read from a
// YAML or JSON document; a lookup in it; and which keys changed between two contents. What a
// source is, and where it comes from, is the config's (config/sources.ts).
//
//   teams:                      # the key a template looks up, e.g. a namespace's `team` label
//     costCenter: "cc-1234"     # a field: {{teams[namespace.labels.team].costCenter}}
//     oncall: payments-primary
//   legacy: cc-0001             # a value: {{teams[labels.app]}}

/** An entry of a source: a value, or fields. */
export type SourceEntry = string | Readonly<Record<string, string>>;

/** A source's content: its entries by key. */
export type SourceContent = ReadonlyMap<string, SourceEntry>;

/** Content that is not a map of values or of maps of values. */
export class SourceContentError extends Error {
  override readonly name = 'SourceContentError';
}

/**
 * The content of a parsed document: a mapping whose values are strings (numbers and booleans read
 * as their text, as YAML users expect) or mappings of strings. Anything else is refused whole, so
 * a malformed body never half-replaces good content: an empty document (a 200 with nothing, or
 * `null`) too, and one whose aliases expand to more than `maxEntries` keys and fields (a YAML
 * alias bomb: a few KB that would take hundreds of MB once every alias is copied out).
 */
export function sourceContent(document: unknown, maxEntries = Infinity): SourceContent {
  if (document === null || document === undefined) throw new SourceContentError('the document is empty');
  if (typeof document !== 'object' || Array.isArray(document)) {
    throw new SourceContentError('expected a mapping of keys to values or to mappings of fields');
  }
  const content = new Map<string, SourceEntry>();
  let entries = 0;
  const count = (n: number): void => {
    entries += n;
    if (entries > maxEntries) {
      throw new SourceContentError(
        `its aliases expand to more than ${maxEntries} keys and fields (a YAML alias bomb?): write the entries out`,
      );
    }
  };
  for (const [key, value] of Object.entries(document)) {
    count(1);
    const scalar = text(value);
    if (scalar !== undefined) {
      content.set(key, scalar);
      continue;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw new SourceContentError(`key ${JSON.stringify(key)}: expected a value or a mapping of fields`);
    }
    const fields: Record<string, string> = {};
    count(Object.keys(value).length);
    for (const [field, fieldValue] of Object.entries(value)) {
      const fieldText = text(fieldValue);
      if (fieldText === undefined) {
        throw new SourceContentError(`key ${JSON.stringify(key)}, field ${JSON.stringify(field)}: expected a value`);
      }
      fields[field] = fieldText;
    }
    content.set(key, Object.freeze(fields));
  }
  return content;
}

function text(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return undefined;
}

/** The value a lookup finds: the entry itself, or one of its fields; undefined when there is none. */
export function lookUp(content: SourceContent, key: string, field: string | undefined): string | undefined {
  const entry = content.get(key);
  if (entry === undefined) return undefined;
  if (field === undefined) return typeof entry === 'string' ? entry : undefined;
  return typeof entry === 'string' || !Object.hasOwn(entry, field) ? undefined : entry[field];
}

/**
 * Why `after` looks like an outage rather than an edit of `before`: it is empty, or it drops more
 * than half of the keys, two or more, at once (a CMDB in maintenance answering `{}`, a proxy's
 * error page served as JSON). Undefined when it looks like an edit.
 */
export function massRemoval(before: SourceContent | undefined, after: SourceContent): string | undefined {
  if (after.size === 0) return 'it has no entries';
  if (before === undefined) return undefined;
  let removed = 0;
  for (const key of before.keys()) if (!after.has(key)) removed++;
  return dropsMost(removed, before.size) ? `it drops ${removed} of its ${before.size} keys at once` : undefined;
}

/** Whether dropping `removed` of `size` keys at once looks like an outage: more than half of them, two or more. */
export function dropsMost(removed: number, size: number): boolean {
  return removed >= 2 && removed * 2 > size;
}

/** The keys whose entries differ between two contents (added, removed or changed). */
export function changedKeys(before: SourceContent | undefined, after: SourceContent): string[] {
  if (before === undefined) return [...after.keys()];
  const changed = [...after].filter(([key, entry]) => !sameEntry(before.get(key), entry)).map(([key]) => key);
  return [...changed, ...[...before.keys()].filter((key) => !after.has(key))];
}

function sameEntry(a: SourceEntry | undefined, b: SourceEntry | undefined): boolean {
  if (typeof a === 'string' || typeof b === 'string' || a === undefined || b === undefined) return a === b;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => a[key] === b[key]);
}
