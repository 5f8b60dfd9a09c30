// What labeller keeps of each watched object: identity, labels, the annotations its templates
// read, and the label keys its own field manager owns. managedFields, often half of an object's
// metadata, are reduced to that list of keys before the object is cached.
import type { FieldsV1, PartialObjectMetadata } from '../kube/objects.ts';

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

/** Returns the projection for a kind, given labeller's field manager and the annotations templates read. */
export function projector(fieldManager: string, annotationKeys: ReadonlySet<string>): (object: PartialObjectMetadata) => LabelledObject {
  return ({ metadata }) => {
    let annotations = NONE;
    if (annotationKeys.size > 0 && metadata.annotations) {
      const kept: Record<string, string> = {};
      for (const key of annotationKeys) {
        const value = metadata.annotations[key];
        if (value !== undefined) kept[key] = value;
      }
      annotations = kept;
    }
    return {
      name: metadata.name,
      namespace: metadata.namespace ?? '',
      uid: metadata.uid,
      labels: metadata.labels ?? NONE,
      annotations,
      owned: ownedLabels(metadata.managedFields, fieldManager),
    };
  };
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
