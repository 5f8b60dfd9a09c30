// What a new config changes for one kind, so a live reload does only what it must: re-check the
// cached objects of a kind whose labels, annotations or conflict policy changed (no relist), and
// restart only a kind whose list itself changes (namespaces, selector), whose cache must keep
// other annotations (read by new templates, or written under other keys), or whose templates read other fields of related objects (what
// is looked up for them, and which related changes requeue them, is fixed when they are wired).
import { type KindConfig, templatesOf } from './model.ts';

/** `same`: nothing to do; `relabel`: same list, other labels or policy; `restart`: the list, the cache or the related reads change. */
export type KindChange = 'same' | 'relabel' | 'restart';

export function kindChange(before: KindConfig, after: KindConfig): KindChange {
  if (listed(before) !== listed(after) || read(before) !== read(after)) return 'restart';
  return labelled(before) !== labelled(after) ? 'relabel' : 'same';
}

/** What the kind's list asks the API server for. */
const listed = (kind: KindConfig): string =>
  JSON.stringify([[...kind.namespaces].sort(), kind.selector?.toString() ?? null]);
/** What its templates read: the annotations and fields its cache keeps, and the fields of related objects. */
const read = (kind: KindConfig): string => {
  const templates = templatesOf(kind);
  return JSON.stringify(
    [
      ...new Set([
        ...templates.flatMap((t) => t.annotations.map((key) => `annotations.${key}`)),
        ...templates.flatMap((t) =>
          t.related.map(({ relation, field, key }) => [relation, field, key ?? ''].join('.'))
        ),
        ...templates.flatMap((t) => t.lookups.map(({ source, field }) => `lookup ${source} ${field ?? ''}`)),
        // The fields outside its metadata its cache keeps (and whether it is watched whole).
        ...templates.flatMap((t) => t.fields.map(({ path }) => `field ${path}`)),
        // Of the annotations it writes, the cache keeps digests.
        ...[...kind.annotations.keys()].map((key) => `writes annotation ${key}`),
      ]),
    ].sort(),
  );
};
const labelled = (kind: KindConfig): string =>
  JSON.stringify([
    kind.conflicts,
    [...kind.labels].map(([key, t]) => [key, t.source]).sort(),
    [...kind.annotations].map(([key, t]) => [key, t.source]).sort(),
  ]);
