// What a new config changes, kind by kind (kinds are matched by their `resource` as written), so
// a live reload does only what it must: start added kinds, stop removed ones, re-check the
// cached objects of kinds whose labels or conflict policy changed (no relist), and restart only
// kinds whose list itself changes (namespaces, selector) or whose cache must keep other
// annotations for new templates.
import type { KindConfig } from './config.ts';

export interface ConfigChange {
  readonly added: readonly KindConfig[];
  readonly removed: readonly KindConfig[];
  /** Same list, other labels or policy: the new configs, to re-check their cached objects. */
  readonly relabelled: readonly KindConfig[];
  /** The list or the cache changes: the new configs, to list again. */
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
    else if (listed(was) !== listed(kind) || cached(was) !== cached(kind)) change.restarted.push(kind);
    else if (labelled(was) !== labelled(kind)) change.relabelled.push(kind);
  }
  return change;
}

/** What the kind's list asks the API server for. */
const listed = (kind: KindConfig): string =>
  JSON.stringify([[...kind.namespaces].sort(), kind.selector?.toString() ?? null]);
/** The annotations its cache keeps (what templates read). */
const cached = (kind: KindConfig): string =>
  JSON.stringify([...new Set([...kind.labels.values()].flatMap((t) => t.annotations))].sort());
const labelled = (kind: KindConfig): string =>
  JSON.stringify([kind.conflicts, [...kind.labels].map(([key, t]) => [key, t.source]).sort()]);
