// What the labelling logic needs from outside, as small interfaces (ports): the API's
// server-side apply of an object's metadata (MetadataClient; kinds/metadataclient.ts over the
// metadata API), the related objects its templates read (RelatedView; related/), and the sources
// of truth they look values up in (SourceLookups; sources/). None of them knows HTTP here.
import type { MetadataField } from '../config/model.ts';
import type { RelatedObject, Relation } from '../config/template.ts';

export interface ApplyTarget {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly namespace: string;
  /** Guards the apply: it fails instead of recreating an object deleted meanwhile. */
  readonly uid: string;
}

/** Labels and annotations: what an apply sends, what it answers. */
export type Metadata = Readonly<Record<MetadataField, Readonly<Record<string, string>>>>;

/** What an apply answers: the object's labels after it, its annotations of the keys asked about, and its resourceVersion now. */
export interface AppliedMetadata extends Metadata {
  readonly resourceVersion: string;
}

/** The only access the reconciler needs. */
export interface MetadataClient {
  /** Applies labels and annotations (all labeller wants of each, as one apply); answers the object after it, its annotations of `annotationKeys`. */
  apply(
    target: ApplyTarget,
    metadata: Metadata,
    options: {
      readonly force: boolean;
      readonly dryRun: boolean;
      readonly annotationKeys: readonly string[];
      readonly signal?: AbortSignal | undefined;
    },
  ): Promise<AppliedMetadata>;
  /**
   * Removes keys no field manager owns, which labeller's admission policies set at create
   * (admitted.ts): an apply cannot. `markers`: the maps whose marker annotation goes too (every
   * key it vouched for is removed). Guarded by `version`, the resourceVersion the cache holds:
   * throws ObjectChanged when the object changed since (its new version is on its way).
   */
  remove(
    target: ApplyTarget,
    version: string,
    keys: Readonly<Record<MetadataField, readonly string[]>>,
    options: {
      readonly markers: readonly MetadataField[];
      readonly dryRun: boolean;
      readonly annotationKeys: readonly string[];
      readonly signal?: AbortSignal | undefined;
    },
  ): Promise<AppliedMetadata>;
  /** The object's annotations of `keys` (labeller keeps digests of them, not values). */
  annotations(
    target: ApplyTarget,
    keys: readonly string[],
    signal?: AbortSignal,
  ): Promise<Readonly<Record<string, string>>>;
}

/**
 * Whether this process may write now: undefined when it may, else a promise of the moment it may
 * (the field-manager guard's Lease held: guard/guard.ts); rejects when `signal` aborts first.
 */
export type Writable = (signal?: AbortSignal) => Promise<void> | undefined;

/** Another field manager owns a label or annotation with a different value (a 409 from server-side apply). */
export class LabelConflict extends Error {
  override readonly name = 'LabelConflict';
  /** The contested keys and their owners, as far as the API server named them. */
  readonly owners: readonly { readonly field: MetadataField; readonly key: string; readonly manager: string }[];

  constructor(message: string, owners: LabelConflict['owners'] = [], options?: ErrorOptions) {
    super(message, options);
    this.owners = owners;
  }
}

/**
 * A claim the write needs (leadership, the field-manager guard, the shard bucket) lapsed while it
 * waited: it was not sent, and the object is looked at again once the claim holds.
 */
export class NotClaimed extends Error {
  override readonly name = 'NotClaimed';
}

/**
 * Why a write of `target` may not be sent now (a claim it needs has lapsed), checked as it is
 * sent, after any wait; undefined when every claim holds.
 */
export type Claimed = (target: ApplyTarget) => string | undefined;

/** The object changed since the version a write was guarded by: the cache brings the new one. */
export class ObjectChanged extends Error {
  override readonly name = 'ObjectChanged';
}

/** The object no longer exists (or was replaced by one with another uid). */
export class ObjectGone extends Error {
  override readonly name = 'ObjectGone';
}

/**
 * Why a related object cannot be read now: its cache has not listed yet (`pending`: it will), or
 * it cannot be read at all (`unavailable`: a kind not followed, not served, or refused).
 */
export type Unreadable = 'pending' | 'unavailable';

/** The related objects an object's templates read, and the relations that cannot be read now. */
export interface RelatedView {
  readonly objects: Readonly<Partial<Record<Relation, RelatedObject>>>;
  /** Labels reading these relations are held (neither applied nor removed). */
  readonly held: ReadonlyMap<Relation, Unreadable>;
}

/** The sources as a reconciler reads them. */
export interface SourceLookups {
  /** Whether source `name` has content (it loaded at least once); until then, labels that read it are held. */
  loaded(name: string): boolean;
  lookup(name: string, key: string, field: string | undefined): string | undefined;
}
