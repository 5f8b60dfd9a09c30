// What labeller keeps of each watched object: identity, labels, the annotations its templates
// read, the label keys its own field manager owns, and its controller owner when templates read
// owners. managedFields, often half of an object's
// metadata, are reduced to that list of keys before the object is cached.
import type { FieldsV1, PartialObjectMetadata } from '../kube/objects.ts';
import { Interner } from './interner.ts';

export interface LabelledObject {
  readonly name: string;
  /** Empty for cluster-scoped objects. */
  readonly namespace: string;
  readonly uid: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  /** Label keys that labeller's field manager owns (server-side apply). */
  readonly owned: readonly string[];
  /** The controller ownerReference; kept only when templates read owners (see projector). */
  readonly owner?: ControllerRef | undefined;
}

/** An object's controller (the ownerReference with `controller: true`). */
export interface ControllerRef {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly uid: string;
}

const NONE: Readonly<Record<string, string>> = Object.freeze({});

/**
 * Returns the projection for a kind, given labeller's field manager and the annotations templates
 * read; `owners` keeps each object's controller reference, for `owner.*` and `root.*`. The store
 * releases each projection when it leaves the cache.
 */
export function projector(fieldManager: string, annotationKeys: ReadonlySet<string>, owners = false): {
  (object: PartialObjectMetadata): LabelledObject;
  readonly release: (object: LabelledObject) => void;
} {
  // Namespaces and owned-key lists repeat across thousands of objects: keep one copy of each.
  const namespaces = new Interner<string>();
  const ownedLists = new Interner<readonly string[]>();
  // So do the apiVersion and kind of owners.
  const ownerTypes = new Interner<string>();
  const project = ({ metadata }: PartialObjectMetadata): LabelledObject => {
    let annotations = NONE;
    if (annotationKeys.size > 0 && metadata.annotations) {
      const kept: Record<string, string> = {};
      for (const key of annotationKeys) {
        const value = metadata.annotations[key];
        if (value !== undefined) kept[key] = value;
      }
      annotations = kept;
    }
    const namespace = metadata.namespace ?? '';
    const owned = ownedLabels(metadata.managedFields, fieldManager);
    const name = metadata.name;
    const uid = metadata.uid;
    const labels = metadata.labels ?? NONE;
    const ownedKeys = ownedLists.take(owned.join('\n'), Object.freeze(owned));
    const ns = namespaces.take(namespace, namespace);
    if (!owners) return { name, namespace: ns, uid, labels, annotations, owned: ownedKeys };
    // One literal with every field: an object spread into a new one costs hundreds of bytes more.
    const ref = metadata.ownerReferences?.find((candidate) => candidate.controller === true);
    const owner = ref &&
      {
        apiVersion: ownerTypes.take(ref.apiVersion, ref.apiVersion),
        kind: ownerTypes.take(ref.kind, ref.kind),
        name: ref.name,
        uid: ref.uid,
      };
    return { name, namespace: ns, uid, labels, annotations, owned: ownedKeys, owner };
  };
  const release = (object: LabelledObject): void => {
    namespaces.release(object.namespace);
    ownedLists.release(object.owned.join('\n'));
    if (object.owner) {
      ownerTypes.release(object.owner.apiVersion);
      ownerTypes.release(object.owner.kind);
    }
  };
  return Object.assign(project, { release });
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
