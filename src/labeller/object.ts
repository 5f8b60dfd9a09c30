// What labeller keeps of each watched object: identity, labels, the annotations its templates
// read, and the label keys its own field manager owns. managedFields, often half of an object's
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
}

const NONE: Readonly<Record<string, string>> = Object.freeze({});

/**
 * Returns the projection for a kind, given labeller's field manager and the annotations templates
 * read. The store releases each projection when it leaves the cache.
 */
export function projector(fieldManager: string, annotationKeys: ReadonlySet<string>): {
  (object: PartialObjectMetadata): LabelledObject;
  readonly release: (object: LabelledObject) => void;
} {
  // Namespaces and owned-key lists repeat across thousands of objects: keep one copy of each.
  const namespaces = new Interner<string>();
  const ownedLists = new Interner<readonly string[]>();
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
    return {
      name: metadata.name,
      namespace: namespaces.take(namespace, namespace),
      uid: metadata.uid,
      labels: metadata.labels ?? NONE,
      annotations,
      owned: ownedLists.take(owned.join('\n'), Object.freeze(owned)),
    };
  };
  const release = (object: LabelledObject): void => {
    namespaces.release(object.namespace);
    ownedLists.release(object.owned.join('\n'));
  };
  return Object.assign(project, { release });
}

/** The label keys `manager` owns through apply, read from managedFields (`f:metadata` → `f:labels` → `f:<key>`). */
export function ownedLabels(managedFields: PartialObjectMetadata['metadata']['managedFields'], manager: string): readonly string[] {
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
