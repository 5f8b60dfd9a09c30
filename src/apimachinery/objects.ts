// The shapes of the metadata-only API (meta.k8s.io/v1 PartialObjectMetadata) labeller reads
// and the apply configurations it writes.
import type { Status } from './errors.ts';

export interface ManagedFieldsEntry {
  readonly manager?: string;
  readonly operation?: string;
  readonly apiVersion?: string;
  readonly time?: string;
  readonly fieldsType?: string;
  readonly fieldsV1?: FieldsV1;
  readonly subresource?: string;
}

/** The structured-merge-diff field set: `{"f:metadata": {"f:labels": {"f:app": {}}}}`. */
export interface FieldsV1 {
  readonly [field: string]: FieldsV1;
}

export interface OwnerReference {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly uid: string;
  readonly controller?: boolean;
  readonly blockOwnerDeletion?: boolean;
}

export interface ObjectMeta {
  readonly name: string;
  readonly namespace?: string;
  readonly uid: string;
  readonly resourceVersion: string;
  readonly generation?: number;
  readonly creationTimestamp?: string;
  readonly deletionTimestamp?: string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
  readonly managedFields?: readonly ManagedFieldsEntry[];
  readonly ownerReferences?: readonly OwnerReference[];
}

export interface PartialObjectMetadata {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: ObjectMeta;
}

export interface PartialObjectMetadataList {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: {
    readonly resourceVersion: string;
    readonly continue?: string;
    readonly remainingItemCount?: number;
  };
  readonly items: readonly PartialObjectMetadata[];
}

export type WatchEvent =
  | { readonly type: 'ADDED' | 'MODIFIED' | 'DELETED'; readonly object: PartialObjectMetadata }
  | {
    readonly type: 'BOOKMARK';
    readonly object: {
      readonly metadata: { readonly resourceVersion: string; readonly annotations?: Readonly<Record<string, string>> };
    };
  }
  | { readonly type: 'ERROR'; readonly object: Status };

/** A server-side apply body: an object's type and name, and the fields its field manager sets. */
export interface ApplyConfiguration {
  readonly apiVersion: string;
  readonly kind: string;
  /** `resourceVersion`: the apply is made only over that version (409 Conflict otherwise). */
  readonly metadata: { readonly name: string; readonly namespace?: string; readonly resourceVersion?: string };
}

/** A server-side apply body that sets only labels and annotations; `uid` makes the apply fail rather than recreate a deleted object. */
export interface MetadataApplyConfiguration {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: {
    readonly name: string;
    readonly namespace?: string;
    readonly uid?: string;
    readonly labels?: Readonly<Record<string, string>>;
    readonly annotations?: Readonly<Record<string, string>>;
  };
}

/** An object an Event is about (events.k8s.io/v1 `regarding`); `uid` lets `kubectl describe` find it. */
export interface ObjectReference {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  /** Empty for cluster-scoped objects. */
  readonly namespace: string;
  readonly uid?: string | undefined;
}

/** What an events.k8s.io/v1 Event says, without its bookkeeping (name, times, series, reporter). */
export interface EventContent {
  readonly regarding: ObjectReference;
  readonly type: 'Normal' | 'Warning';
  /** CamelCase, machine-readable: LabelConflict, InvalidLabelValue… */
  readonly reason: string;
  /** What the reporter was doing: Labelling, Watching… */
  readonly action: string;
  /** For people; at most 1 KiB. */
  readonly note: string;
}
