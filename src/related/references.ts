// Related objects by reference (config/references.ts), in both directions:
//  - forward, a field of the labelled object names one (a pod's spec.nodeName its node): the
//    labelled kind's cache keeps that field (its objects are watched whole and projected to it)
//    and is indexed by the name it holds, so that a change of a related object requeues exactly
//    the objects naming it; the kind named is watched metadata-only, in a cache of its own;
//  - reverse, a field of other objects names the labelled one (the pods whose volumes name a
//    PVC): those objects are watched whole, projected to their metadata and that field, and
//    indexed by the objects they name; a change of one requeues what it names before and after,
//    and the labelled object reads what all of them agree on.
// The kinds are resolved through discovery, again when it changes (a CRD installed later).
import type { DiscoveryCache } from '../kube/discoverycache.ts';
import { ResolveError } from '../apimachinery/resolve.ts';
import { type ApiResource, groupResource } from '../apimachinery/resource.ts';
import {
  type ForwardReference,
  referenceDocument,
  type ReferenceSpec,
  type ReverseReference,
} from '../config/references.ts';
import type { ObjectField, RelatedObject, Relation } from '../config/template.ts';
import type { LabelledObject } from '../labelling/object.ts';
import { StoreIndex } from '../runtime/storeindex.ts';
import { RelatedUnreadable } from './read.ts';
import type { UnreadableKinds } from './unreadable.ts';

/** Where the cache of a reference's related objects is, and what it keeps. */
export interface ReferenceCache {
  readonly id: string;
  readonly resource: ApiResource;
  /** '' for all namespaces. */
  readonly namespace: string;
  /** Kept whole on every shard member: objects of any namespace may read it (a PV's claim). */
  readonly unsplit: boolean;
  /** The fields its objects are projected to (a reverse reference's), watched whole; none: metadata-only. */
  readonly fields: readonly ObjectField[];
  /** A reverse reference's index of its objects by what they name (reverseKeys). */
  readonly index: (() => StoreIndex<LabelledObject>) | undefined;
}

export class References {
  readonly #specs: ReadonlyMap<string, ReferenceSpec>;
  readonly #discovery: DiscoveryCache;
  readonly #unreadable: UnreadableKinds;
  /** The related kind of each reference (forward: named; reverse: naming), once served. */
  #related = new Map<string, ApiResource>();

  constructor(specs: ReadonlyMap<string, ReferenceSpec>, discovery: DiscoveryCache, unreadable: UnreadableKinds) {
    this.#specs = specs;
    this.#discovery = discovery;
    this.#unreadable = unreadable;
  }

  /** Whether `specs` (a reloaded config's) declare the same references. */
  same(specs: ReadonlyMap<string, ReferenceSpec>): boolean {
    const describe = (all: ReadonlyMap<string, ReferenceSpec>) =>
      JSON.stringify([...all.values()].map(referenceDocument).map((d) => JSON.stringify(d)).sort());
    return describe(specs) === describe(this.#specs);
  }

  /** Resolves the related kinds against what discovery serves now, forgetting what it no longer does. */
  resolve(): void {
    const related = new Map<string, ApiResource>();
    for (const [name, spec] of this.#specs) {
      try {
        related.set(name, this.#discovery.resolve(relatedKind(spec), ['list', 'watch']));
        this.#unreadable.readable(unreadableId(spec));
      } catch (error) {
        if (!(error instanceof ResolveError)) throw error;
      }
    }
    this.#related = related;
  }

  spec(relation: Relation): ReferenceSpec | undefined {
    return relation.startsWith('ref:') ? this.#specs.get(relation.slice(4)) : undefined;
  }

  /** The related kind of `relation` (forward: the kind named; reverse: the kind naming), when served. */
  resource(relation: Relation): ApiResource | undefined {
    const spec = this.spec(relation);
    return spec && this.#related.get(spec.name);
  }

  /** The fields a labelled object's cache keeps for the forward references of `relations`. */
  fields(relations: Iterable<Relation>): ObjectField[] {
    return [...relations].flatMap((relation) => {
      const spec = this.spec(relation);
      return spec?.direction === 'forward' ? [spec.field, ...(spec.namespaceField ? [spec.namespaceField] : [])] : [];
    });
  }

  /**
   * A store index per forward reference of `relations`: an object under the name of what it
   * names (the namespace is checked on use: whether the kind named is namespaced may not be known yet).
   */
  indexes(relations: Iterable<Relation>): StoreIndex<LabelledObject>[] {
    return [...relations].flatMap((relation) => {
      const spec = this.spec(relation);
      return spec?.direction === 'forward'
        ? [new StoreIndex<LabelledObject>(relation, (object) => object.fields?.[spec.field.path] || undefined)]
        : [];
    });
  }

  /**
   * The cache of `relation`'s related objects, for an object of `labelled` watched in `namespace`
   * ('' for all), given whether related objects are watched in the kinds' namespaces only;
   * throws RelatedUnreadable when their kind is not served.
   */
  cache(relation: Relation, labelled: ApiResource, namespace: string, namespaced: boolean): ReferenceCache {
    const spec = this.spec(relation);
    if (!spec) throw new Error(`no reference ${relation}`);
    const resource = this.#related.get(spec.name);
    if (!resource) {
      this.#unreadable.report(
        unreadableId(spec),
        'not-served',
        'a kind a reference reads is not served with list and watch',
        {
          reference: spec.name,
          resource: relatedKind(spec),
        },
      );
      throw new RelatedUnreadable(
        'unavailable',
        `${relatedKind(spec)}, which reference ${spec.name} reads, is not served`,
      );
    }
    if (spec.direction === 'reverse') {
      // They name objects of their own namespace: read where the labelled kind is watched.
      const scope = namespaced ? namespace : '';
      return {
        id: `${groupResource(resource)}${scope ? `/${scope}` : ''} naming by ${spec.name}`,
        resource,
        namespace: scope,
        unsplit: false,
        fields: [spec.field, ...(spec.kindField ? [spec.kindField] : [])],
        index: () => new StoreIndex<LabelledObject>(relation, (object) => reverseKeys(spec, object)),
      };
    }
    // A reference within the object's namespace is read where it is watched; one that may name
    // another namespace (a PV's claim), in all, and on every shard member, whatever its share.
    const sameNamespace = resource.namespaced && labelled.namespaced && !spec.namespaceField;
    const scope = sameNamespace && namespaced ? namespace : '';
    const unsplit = resource.namespaced && !sameNamespace;
    return {
      id: `${groupResource(resource)}${scope ? `/${scope}` : ''} by reference${unsplit ? ' from any namespace' : ''}`,
      resource,
      namespace: scope,
      unsplit,
      fields: [],
      index: undefined,
    };
  }
}

/** The kind a reference reads related objects of: the one a forward reference names, or the one naming in a reverse one. */
const relatedKind = (spec: ReferenceSpec): string => spec.direction === 'forward' ? spec.to : spec.from;

/** What `object` names by `spec` (`to`: the kind it names, when served): undefined when the field is not set. */
export function namedBy(
  spec: ForwardReference,
  object: LabelledObject,
  to: ApiResource | undefined,
): { name: string; namespace: string } | undefined {
  const name = object.fields?.[spec.field.path];
  if (!name) return undefined;
  if (to && !to.namespaced) return { name, namespace: '' };
  const namespace = spec.namespaceField ? object.fields?.[spec.namespaceField.path] : object.namespace;
  return namespace ? { name, namespace } : undefined;
}

/**
 * The objects `referrer` names by `spec`, as the keys reverseKey gives them: `ns/name` in its
 * namespace, prefixed with the kind its kindField says item for item (`Deployment:ns/web`).
 */
export function reverseKeys(spec: ReverseReference, referrer: LabelledObject): string[] {
  const names = referrer.fields?.[spec.field.path]?.split('\n') ?? [];
  if (!spec.kindField) return names.map((name) => `${referrer.namespace}/${name}`);
  const kinds = referrer.fields?.[spec.kindField.path]?.split('\n') ?? [];
  // One kind for every name (a scalar beside a list), or one each.
  if (kinds.length !== 1 && kinds.length !== names.length) return [];
  return names.map((name, i) => `${kinds[kinds.length === 1 ? 0 : i]}:${referrer.namespace}/${name}`);
}

/** The key under which objects naming `object` (of kind `kind`) by `spec` are indexed. */
export function reverseKey(spec: ReverseReference, kind: string, object: LabelledObject): string {
  const key = `${object.namespace}/${object.name}`;
  return spec.kindField ? `${kind}:${key}` : key;
}

/**
 * The related objects of a reverse reference as one: the labels and annotations all of them
 * carry with one value, and the name if there is one; `path`: the field naming the object.
 */
export function agreed(kind: string, referrers: readonly LabelledObject[], path: string): RelatedObject {
  const [first, ...rest] = referrers;
  const agree = (map: 'labels' | 'annotations'): Record<string, string> =>
    Object.fromEntries(
      Object.entries(first?.[map] ?? {}).filter(([key, value]) => rest.every((other) => other[map][key] === value)),
    );
  const names = [...new Set(referrers.map((referrer) => referrer.name))];
  return {
    kind,
    name: names.length === 1 ? names[0] : undefined,
    labels: agree('labels'),
    annotations: agree('annotations'),
    via: { path, value: names.sort().join(', '), reverse: true },
  };
}

/** How an unreadable reference is listed (labeller_related_unreadable, /readyz). */
const unreadableId = (spec: ReferenceSpec): string => `${relatedKind(spec)} (reference ${spec.name})`;
