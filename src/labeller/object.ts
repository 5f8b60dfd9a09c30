// What labeller keeps of each watched object: identity, labels, the annotations its templates
// read, the label keys its own field manager owns, and its controller owner when templates read
// owners. managedFields, often half of an object's
// metadata, are reduced to that list of keys before the object is cached.
import type { FieldsV1, PartialObjectMetadata } from '../kube/objects.ts';
import type { Projection } from '../runtime/store.ts';
import { Interner } from './interner.ts';

/** An object's controller (the ownerReference with `controller: true`). */
export interface ControllerRef {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly uid: string;
}

const NONE: Readonly<Record<string, string>> = Object.freeze({});

/**
 * What is kept of an object. The name is read from the key rather than kept: the key is the
 * store's own string (see Projection.key), so the name costs no memory of its own.
 */
class Cached {
  /** The object's key in the cache, `namespace/name` (objectKey). */
  readonly key: string;
  /** Empty for cluster-scoped objects. */
  readonly namespace: string;
  readonly uid: string;
  readonly resourceVersion: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  /** Label keys that labeller's field manager owns (server-side apply). */
  readonly owned: readonly string[];
  /** It has a deletionTimestamp: on its way out (finalizers, a foreground deletion), labelled no more. */
  readonly deleting: boolean;

  constructor(
    key: string,
    namespace: string,
    metadata: PartialObjectMetadata['metadata'],
    annotations: Readonly<Record<string, string>>,
    owned: readonly string[],
  ) {
    this.key = key;
    this.namespace = namespace;
    this.uid = metadata.uid;
    this.resourceVersion = metadata.resourceVersion;
    this.labels = metadata.labels ?? NONE;
    this.annotations = annotations;
    this.owned = owned;
    this.deleting = metadata.deletionTimestamp !== undefined;
  }

  get name(): string {
    return this.namespace ? this.key.slice(this.namespace.length + 1) : this.key;
  }
}

export interface LabelledObject extends Cached {
  /** The controller ownerReference; kept only when templates read owners (see projector). */
  readonly owner?: ControllerRef | undefined;
  /**
   * What its templates last looked up in sources, as the lookup index keeps it: bookkeeping the
   * index writes (lookupindex.ts), carried from version to version; kept only when templates look up.
   */
  looked?: string | undefined;
}

/** What is kept of an object whose templates read its controller reference or look values up in sources. */
class CachedWithRelations extends Cached {
  readonly owner: ControllerRef | undefined;
  looked: string | undefined;

  constructor(
    cached: ConstructorParameters<typeof Cached>,
    owner: ControllerRef | undefined,
    looked: string | undefined,
  ) {
    super(...cached);
    this.owner = owner;
    this.looked = looked;
  }
}

/**
 * Returns the projection for a kind, given labeller's field manager and the annotations templates
 * read; `owners` keeps each object's controller reference, for `owner.*` and `root.*`; `lookups`,
 * what the lookup index notes of it. The store releases each projection when it leaves the cache.
 */
export function projector(
  fieldManager: string,
  annotationKeys: ReadonlySet<string>,
  owners = false,
  lookups = false,
): Projection<LabelledObject> & { readonly release: (object: LabelledObject) => void } {
  // Namespaces and owned-key lists repeat across thousands of objects: keep one copy of each.
  const namespaces = new Interner<string>();
  const ownedLists = new Interner<readonly string[]>();
  // So do the apiVersion and kind of owners.
  const ownerTypes = new Interner<string>();
  const project = ({ metadata }: PartialObjectMetadata, key: string, previous?: LabelledObject): LabelledObject => {
    let annotations = NONE;
    if (annotationKeys.size > 0 && metadata.annotations) {
      const kept: Record<string, string> = {};
      for (const annotation of annotationKeys) {
        const value = metadata.annotations[annotation];
        if (value !== undefined) kept[annotation] = value;
      }
      annotations = kept;
    }
    const namespace = metadata.namespace ?? '';
    const owned = ownedLabels(metadata.managedFields, fieldManager);
    const cached: ConstructorParameters<typeof Cached> = [
      key,
      namespaces.take(namespace, namespace),
      metadata,
      annotations,
      ownedLists.take(owned.join('\n'), Object.freeze(owned)),
    ];
    if (!owners && !lookups) return new Cached(...cached);
    const ref = owners ? metadata.ownerReferences?.find((candidate) => candidate.controller === true) : undefined;
    const owner = ref &&
      {
        apiVersion: ownerTypes.take(ref.apiVersion, ref.apiVersion),
        kind: ownerTypes.take(ref.kind, ref.kind),
        name: ref.name,
        uid: ref.uid,
      };
    return new CachedWithRelations(cached, owner, previous?.looked);
  };
  const release = (object: LabelledObject): void => {
    namespaces.release(object.namespace);
    ownedLists.release(object.owned.join('\n'));
    if (object.owner) {
      ownerTypes.release(object.owner.apiVersion);
      ownerTypes.release(object.owner.kind);
    }
  };
  return Object.assign(project, {
    version: (object: LabelledObject) => object.resourceVersion,
    key: (object: LabelledObject) => object.key,
    release,
  });
}

/** The label keys `manager` owns through apply, read from managedFields (`f:metadata` → `f:labels` → `f:<key>`). */
export function ownedLabels(
  managedFields: PartialObjectMetadata['metadata']['managedFields'],
  manager: string,
): readonly string[] {
  const keys: string[] = [];
  for (const entry of managedFields ?? []) {
    if (entry.manager !== manager || entry.operation !== 'Apply' || entry.subresource) continue;
    const labels: FieldsV1 | undefined = entry.fieldsV1?.['f:metadata']?.['f:labels'];
    for (const field of Object.keys(labels ?? {})) {
      if (field.startsWith('f:')) keys.push(field.slice(2));
    }
  }
  return keys;
}
