// A label change as JSON Patch operations on metadata.labels (RFC 6902, keys escaped as RFC 6901
// pointers: "/" → "~1"), for logs and dry runs. Labels are one flat map of strings, so a general
// JSON diff (and its deep clones) is not needed.

export type LabelOperation =
  | { readonly op: 'add' | 'replace'; readonly path: string; readonly value: string }
  | { readonly op: 'remove'; readonly path: string };

/** Removals and replacements in reverse key order of `before`, then additions in key order of `after` (fast-json-patch's compare order). */
export function labelPatch(
  before: Readonly<Record<string, string>>,
  after: Readonly<Record<string, string>>,
): LabelOperation[] {
  const ops: LabelOperation[] = [];
  const old = Object.keys(before);
  for (let i = old.length - 1; i >= 0; i--) {
    const key = old[i]!;
    if (!Object.hasOwn(after, key)) ops.push({ op: 'remove', path: pointer(key) });
    else if (after[key] !== before[key]) ops.push({ op: 'replace', path: pointer(key), value: after[key]! });
  }
  for (const key of Object.keys(after)) {
    if (!Object.hasOwn(before, key)) ops.push({ op: 'add', path: pointer(key), value: after[key]! });
  }
  return ops;
}

function pointer(key: string): string {
  return `/metadata/labels/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;
}
