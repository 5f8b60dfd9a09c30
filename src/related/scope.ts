// What the caches of related objects share across kinds, decided from every kind at once: a
// template reading owners or roots, or a related annotation, changes what every labelled kind's
// cache keeps (an object of one kind may be another's owner or root), and whether every kind is
// limited to namespaces decides where related objects are watched. Caches made for one scope
// serve a config whose scope it covers; a live reload that needs more makes them again.
import { type KindConfig, templatesOf } from '../config/model.ts';
import { relatedReads } from './read.ts';

export interface RelatedScope {
  /** Some template reads a related object. */
  readonly reads: boolean;
  /** Some template reads owner.* or root.*: changes of labelled objects, as possible owners, are mapped too. */
  readonly owners: boolean;
  /** Some template reads root.*: every cache keeps controller references (a chain may run through it). */
  readonly roots: boolean;
  /** Annotation keys templates read of related objects, kept by the caches related objects live in. */
  readonly annotations: ReadonlySet<string>;
  /** Every kind is limited to namespaces: related objects are watched in those only (RBAC may allow no more). */
  readonly namespaced: boolean;
}

export function relatedScope(kinds: readonly KindConfig[]): RelatedScope {
  const reads = relatedReads(kinds.flatMap(templatesOf));
  return {
    reads: reads.size > 0,
    owners: reads.has('owner') || reads.has('root'),
    roots: reads.has('root'),
    annotations: new Set(
      [...reads.values()].flat().flatMap((read) =>
        read.field === 'annotations' && read.key !== undefined ? [read.key] : []
      ),
    ),
    namespaced: kinds.every((kind) => kind.namespaces.length > 0),
  };
}

/**
 * What caches made for `scope` lack to serve templates that need `needed`, in words; empty when
 * they serve them. Caches that keep more than needed (reads dropped) still serve.
 */
export function scopeLacks(scope: RelatedScope, needed: RelatedScope): string[] {
  const missing = [...needed.annotations].filter((key) => !scope.annotations.has(key));
  return [
    // root.* needs all that owner.* does, and more.
    ...(needed.roots && !scope.roots ? ['root.* read'] : needed.owners && !scope.owners ? ['owner.* read'] : []),
    ...(missing.length > 0 ? [`annotations of related objects read: ${missing.join(', ')}`] : []),
    ...(needed.reads && needed.namespaced !== scope.namespaced
      ? [needed.namespaced ? 'every kind limited to namespaces' : 'a kind in all namespaces']
      : []),
  ];
}
