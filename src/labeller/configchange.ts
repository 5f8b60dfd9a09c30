// What a new config changes, kind by kind (kinds are matched by their `resource` as written), so
// a live reload does only what it must: start added kinds, stop removed ones, re-check the
// cached objects of kinds whose labels or conflict policy changed (no relist), and restart only
// kinds whose list itself changes (namespaces, selector), whose cache must keep other
// annotations for new templates, or whose templates read other fields of related objects (what
// is looked up for them, and which related changes requeue them, is fixed when they are wired).
import type { KindConfig } from './config.ts';

export interface ConfigChange {
  readonly added: readonly KindConfig[];
  readonly removed: readonly KindConfig[];
  /** Same list, other labels or policy: the new configs, to re-check their cached objects. */
  readonly relabelled: readonly KindConfig[];
  /** The list, the cache or the related reads change: the new configs, to list again. */
  readonly restarted: readonly KindConfig[];
}

export function configChange(before: readonly KindConfig[], after: readonly KindConfig[]): ConfigChange {
  const old = new Map(before.map((kind) => [kind.resource, kind]));
  const next = new Set(after.map((kind) => kind.resource));
  const change = {
    added: [] as KindConfig[],
    removed: before.filter((kind) => !next.has(kind.resource)),
    relabelled: [] as KindConfig[],
    restarted: [] as KindConfig[],
  };
  for (const kind of after) {
    const was = old.get(kind.resource);
    if (!was) change.added.push(kind);
    else if (listed(was) !== listed(kind) || read(was) !== read(kind)) change.restarted.push(kind);
    else if (labelled(was) !== labelled(kind)) change.relabelled.push(kind);
  }
  return change;
}

/** What the kind's list asks the API server for. */
const listed = (kind: KindConfig): string =>
  JSON.stringify([[...kind.namespaces].sort(), kind.selector?.toString() ?? null]);
/** What its templates read: the annotations its cache keeps, and the fields of related objects. */
const read = (kind: KindConfig): string => {
  const templates = [...kind.labels.values()];
  return JSON.stringify(
    [
      ...new Set([
        ...templates.flatMap((t) => t.annotations.map((key) => `annotations.${key}`)),
        ...templates.flatMap((t) =>
          t.related.map(({ relation, field, key }) => [relation, field, key ?? ''].join('.'))
        ),
      ]),
    ].sort(),
  );
};
const labelled = (kind: KindConfig): string =>
  JSON.stringify([kind.conflicts, [...kind.labels].map(([key, t]) => [key, t.source]).sort()]);
