// What labeller keeps of each watched object: identity, labels, the annotations its templates
// read, the label and annotation keys its own field manager owns, digests of the annotations it
// writes, and its controller owner when templates read owners. managedFields, often half of an
// object's metadata, are reduced to those lists of keys before the object is cached.
import { Buffer } from 'node:buffer';
import type { MetadataField } from '../config/model.ts';
import { type ObjectField, readField, readsEach, readValues } from '../config/template.ts';
import type { FieldsV1, ManagedFieldsEntry, PartialObjectMetadata } from '../apimachinery/objects.ts';
import type { Projection } from '../runtime/store.ts';
import { markerKeys, parseMarker } from './admitted.ts';
import { digest } from './digest.ts';
import { Interner } from './interner.ts';
/** An object's controller (the ownerReference with `controller: true`). */
export interface ControllerRef {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly uid: string;
}

const NONE: Readonly<Record<string, string>> = Object.freeze({});
/** No keys (owned, most often): one shared empty list. */
const NO_KEYS: readonly string[] = Object.freeze([]);
const NO_ENTRIES: readonly ManagedFieldsEntry[] = Object.freeze([]);

/** The keys labeller's field manager owns, of labels and of annotations. */
interface Owned {
  readonly labels: readonly string[];
  readonly annotations: readonly string[];
}

/** What labeller's admission policies left on an object (admitted.ts). */
export interface Admitted extends Owned {
  /** The maps whose marker annotation the object carries, whether it vouches for a key still or not. */
  readonly marked: readonly MetadataField[];
  /**
   * The maps whose marker someone wrote since the create (not as the policies leave it): it
   * vouches for nothing, so the keys it may have listed truly are taken over by an apply.
   */
  readonly distrusted?: readonly MetadataField[];
}

/** Nothing: what objects created without labeller's admission policies carry. */
export const NOT_ADMITTED: Admitted = Object.freeze({
  labels: Object.freeze([]),
  annotations: Object.freeze([]),
  marked: Object.freeze([]),
});

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
  readonly ownedLabels: readonly string[];
  /** Annotation keys that labeller's field manager owns. */
  readonly ownedAnnotations: readonly string[];
  /**
   * Keys labeller's admission policies set at create, still at that value and owned by no field
   * manager (admitted.ts): labeller's, as owned ones are, though an apply cannot remove them.
   */
  readonly admitted: Admitted;
  /** It has a deletionTimestamp: on its way out (finalizers, a foreground deletion), labelled no more. */
  readonly deleting: boolean;

  constructor(
    key: string,
    namespace: string,
    metadata: PartialObjectMetadata['metadata'],
    annotations: Readonly<Record<string, string>>,
    owned: Owned,
    admitted: Admitted,
  ) {
    this.key = key;
    this.namespace = namespace;
    this.uid = metadata.uid;
    this.resourceVersion = metadata.resourceVersion;
    this.labels = metadata.labels ?? NONE;
    this.annotations = annotations;
    this.ownedLabels = owned.labels;
    this.ownedAnnotations = owned.annotations;
    this.admitted = admitted;
    this.deleting = metadata.deletionTimestamp !== undefined;
  }

  get name(): string {
    return this.namespace ? this.key.slice(this.namespace.length + 1) : this.key;
  }
}

/** The annotations labeller writes, as an object carries them: digests (not values) and the size of the rest. */
export interface WrittenAnnotations {
  /** digest() of each written key's value, in the order of the keys projected; NaN where the object has none. */
  readonly digests: readonly number[];
  /** The bytes of the object's other annotations, keys and values: what leaves room under the API server's limit. */
  readonly otherBytes: number;
}

export interface LabelledObject extends Cached {
  /** The controller ownerReference; kept only when templates read owners (see projector). */
  readonly owner?: ControllerRef | undefined;
  /**
   * What its templates last looked up in sources, as the lookup index keeps it: bookkeeping the
   * index writes (lookupindex.ts), carried from version to version; kept only when templates look up.
   */
  looked?: string | undefined;
  /** Kept only when labeller writes annotations on its kind. */
  readonly written?: WrittenAnnotations | undefined;
  /** The fields outside its metadata its templates read, by path, where set (see ProjectionOptions.fields). */
  readonly fields?: Readonly<Record<string, string>> | undefined;
}

/** What is kept of an object whose templates read its controller reference or look values up in sources, or whose annotations labeller writes. */
class CachedWithMore extends Cached {
  readonly owner: ControllerRef | undefined;
  looked: string | undefined;
  readonly written: WrittenAnnotations | undefined;
  readonly fields: Readonly<Record<string, string>> | undefined;

  constructor(
    cached: ConstructorParameters<typeof Cached>,
    owner: ControllerRef | undefined,
    looked: string | undefined,
    written: WrittenAnnotations | undefined,
    fields: Readonly<Record<string, string>> | undefined,
  ) {
    super(...cached);
    this.owner = owner;
    this.looked = looked;
    this.written = written;
    this.fields = fields;
  }
}

/** What a kind's cache keeps of its objects besides identity, labels and owned keys. */
export interface ProjectionOptions {
  /** labeller's field manager, whose owned keys are kept. */
  readonly fieldManager: string;
  /** Annotations templates read: kept whole. */
  readonly read?: ReadonlySet<string> | undefined;
  /** Annotations labeller writes: kept as digests (WrittenAnnotations), in this order. */
  readonly written?: readonly string[] | undefined;
  /** Each object's controller reference, for `owner.*` and `root.*`. */
  readonly owners?: boolean | undefined;
  /** What the lookup index notes of each object. */
  readonly lookups?: boolean | undefined;
  /** Fields outside the metadata templates read: the cache is fed whole objects, and keeps just these. */
  readonly fields?: readonly ObjectField[] | undefined;
}

/** The order the cache keeps digests of written annotations in (ProjectionOptions.written), for the reconciler and the projection alike. */
export function writtenOrder(keys: Iterable<string>): string[] {
  return [...new Set(keys)].sort();
}

/** Returns the projection for a kind. The store releases each projection when it leaves the cache. */
export function projector(
  { fieldManager, read = new Set(), written = [], owners = false, lookups = false, fields = [] }: ProjectionOptions,
): Projection<LabelledObject> & { readonly release: (object: LabelledObject) => void } {
  // Namespaces and owned-key lists repeat across thousands of objects: keep one copy of each.
  const namespaces = new Interner<string>();
  const ownedLists = new Interner<readonly string[]>();
  const admittedSets = new Interner<Admitted>();
  const markers = markerKeys(fieldManager);
  // So do the apiVersion and kind of owners.
  const ownerTypes = new Interner<string>();
  const writes = new Set(written);
  // Before labeller's first apply, most objects carry none of the annotations it writes.
  const noneWritten: WrittenAnnotations = Object.freeze({
    digests: Object.freeze(written.map(() => NaN)),
    otherBytes: 0,
  });
  // Objects of a kind mostly carry a few values of a field (a storage class, a node): one copy of each set.
  const fieldSets = new Interner<Readonly<Record<string, string>>>();
  const project = (object: PartialObjectMetadata, key: string, previous?: LabelledObject): LabelledObject => {
    const { metadata } = object;
    let annotations = NONE;
    if (read.size > 0 && metadata.annotations) {
      const kept: Record<string, string> = {};
      for (const annotation of read) {
        const value = metadata.annotations[annotation];
        if (value !== undefined) kept[annotation] = value;
      }
      annotations = kept;
    }
    const namespace = metadata.namespace ?? '';
    // No key owned (every object before labeller's first apply) is the one shared empty list, not interned.
    const intern = (keys: readonly string[]) =>
      keys === NO_KEYS ? NO_KEYS : ownedLists.take(keys.join('\n'), Object.freeze(keys));
    const cached: ConstructorParameters<typeof Cached> = [
      key,
      namespaces.take(namespace, namespace),
      metadata,
      annotations,
      {
        labels: intern(ownedKeys(metadata.managedFields, fieldManager, 'labels')),
        annotations: intern(ownedKeys(metadata.managedFields, fieldManager, 'annotations')),
      },
      admittedOf(metadata, fieldManager, markers, admittedSets),
    ];
    if (!owners && !lookups && writes.size === 0 && fields.length === 0) return new Cached(...cached);
    const ref = owners ? metadata.ownerReferences?.find((candidate) => candidate.controller === true) : undefined;
    const owner = ref &&
      {
        apiVersion: ownerTypes.take(ref.apiVersion, ref.apiVersion),
        kind: ownerTypes.take(ref.kind, ref.kind),
        name: ref.name,
        uid: ref.uid,
      };
    const kept = writes.size === 0 ? undefined : writtenAnnotations(metadata.annotations, written, writes, noneWritten);
    return new CachedWithMore(
      cached,
      owner,
      previous?.looked,
      kept,
      fields.length === 0 ? undefined : fieldsOf(object),
    );
  };
  const fieldsOf = (object: PartialObjectMetadata): Readonly<Record<string, string>> => {
    const values: Record<string, string> = {};
    for (const field of fields) {
      // A reference's `[*]` reads a list's items: kept one per line (names have no newlines).
      const value = readsEach(field) ? readValues(object, field).join('\n') || undefined : readField(object, field);
      if (value !== undefined) values[field.path] = value;
    }
    return fieldSets.take(JSON.stringify(values), Object.freeze(values));
  };
  const release = (object: LabelledObject): void => {
    namespaces.release(object.namespace);
    if (object.ownedLabels !== NO_KEYS) ownedLists.release(object.ownedLabels.join('\n'));
    if (object.ownedAnnotations !== NO_KEYS) ownedLists.release(object.ownedAnnotations.join('\n'));
    if (object.admitted !== NOT_ADMITTED) admittedSets.release(admittedId(object.admitted));
    if (object.fields) fieldSets.release(JSON.stringify(object.fields));
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

/**
 * The manager the API server gives every field of an object applied for the first time while its
 * managedFields are empty (an object created with nothing but a name has none): a placeholder, not
 * a writer; the keys an admission policy set at that create fall to it.
 */
export const BEFORE_FIRST_APPLY = 'before-first-apply';

/**
 * The managedFields entry the object's create wrote, when it can be told: its time is taken a
 * moment before the creationTimestamp (both in whole seconds), so within the second before it;
 * and it must be the only entry that is, else a write in the same second (the create's manager
 * writing again merges into its entry) might be taken for it. labeller's own entries are never
 * it (labeller creates nothing), though its first apply often comes within that second.
 */
function createEntry(
  metadata: PartialObjectMetadata['metadata'],
  fieldManager: string,
): ManagedFieldsEntry | undefined {
  const created = Date.parse(metadata.creationTimestamp ?? '');
  const candidates = (metadata.managedFields ?? []).filter((entry) => {
    const at = Date.parse(entry.time ?? '');
    return !entry.subresource && entry.manager !== fieldManager && at <= created && created - at <= 1_000;
  });
  return candidates.length === 1 ? candidates[0] : undefined;
}

/**
 * The keys labeller's admission policies set on the object at its create and that are labeller's
 * still. managedFields are computed before admission, so what a policy wrote has an owner only
 * where the request carried it too, and then it is the creator (createEntry).
 * The controller believes the marker (admitted.ts) only as the policies leave it:
 * - the marker annotation itself is owned by no manager but the placeholder (a policy added it),
 *   or only by the create's entry (the request carried one, which the policies replaced); one that
 *   anyone wrote since, by hand or a forged create followed by an update, vouches for nothing;
 * - an entry vouches for its key while the object carries the value it lists, and the key is owned
 *   by no manager but the placeholder (the policy added it) or, for a forced entry (`!`), also by
 *   the create's entry (the policy overwrote the request's value), labeller aside. Whoever else
 *   wrote the key since owns it. A key labeller's apply owns too stays admitted: its apply alone
 *   cannot remove it (the placeholder or the creator would keep it), and a new value of it takes
 *   back only what the policies set.
 * An object whose managedFields are empty (created with nothing but a name, or emptied by a
 * client) records no writer: the API server tracks nobody's updates until a first apply. Its
 * marker cannot be told from a forgery; protection (a ValidatingAdmissionPolicy that lets only
 * labeller change it) can.
 * One copy of each set.
 */
function admittedOf(
  metadata: PartialObjectMetadata['metadata'],
  fieldManager: string,
  markers: Readonly<Record<MetadataField, string>>,
  interner: Interner<Admitted>,
): Admitted {
  const annotations = metadata.annotations ?? {};
  const placeholder = metadata.managedFields?.some((entry) => entry.manager === BEFORE_FIRST_APPLY) ?? false;
  if (!placeholder && annotations[markers.labels] === undefined && annotations[markers.annotations] === undefined) {
    return NOT_ADMITTED;
  }
  const created = createEntry(metadata, fieldManager);
  // labeller's apply, where it counts (keys, not the marker: it never applies one), owns nothing the policies did not set.
  const asLeft = (entries: readonly ManagedFieldsEntry[] | undefined, creatorToo: boolean, labellerToo: boolean) =>
    (entries ?? []).every((entry) =>
      entry.manager === BEFORE_FIRST_APPLY || (creatorToo && entry === created) ||
      (labellerToo && entry.manager === fieldManager && entry.operation === 'Apply')
    );
  const annotationEntries = entriesByKey(metadata.managedFields, 'annotations');
  const marked = FIELDS.filter((field) => annotations[markers[field]] !== undefined);
  const distrusted = marked.filter((field) => !asLeft(annotationEntries.get(markers[field]), true, false));
  const keys = (field: MetadataField): string[] => {
    const marker = annotations[markers[field]];
    const owners = field === 'annotations' ? annotationEntries : entriesByKey(metadata.managedFields, field);
    const keys = new Set<string>();
    if (marker && !distrusted.includes(field)) {
      const values = metadata[field] ?? {};
      for (const [key, { value, forced }] of parseMarker(field, marker)) {
        if (values[key] === value && asLeft(owners.get(key), forced, true)) keys.add(key);
      }
    }
    // Whatever the marker says: a key labeller's apply shares with the placeholder alone is
    // labeller's, and only a removal takes it away (the apply would leave it to the placeholder).
    if (placeholder) {
      for (const [key, entries] of owners) {
        const labellers = entries.some((entry) => entry.manager === fieldManager && entry.operation === 'Apply');
        if (
          labellers && entries.some((entry) => entry.manager === BEFORE_FIRST_APPLY) && asLeft(entries, false, true)
        ) {
          keys.add(key);
        }
      }
    }
    return [...keys].sort();
  };
  const admitted = {
    labels: keys('labels'),
    annotations: keys('annotations'),
    marked,
    ...(distrusted.length > 0 ? { distrusted } : {}),
  };
  return interner.take(admittedId(admitted), Object.freeze(admitted));
}

const FIELDS: readonly MetadataField[] = ['labels', 'annotations'];

/** What identifies an admitted set in an interner. */
function admittedId(admitted: Admitted): string {
  return `${admitted.labels.join('\n')}\0${admitted.annotations.join('\n')}\0${admitted.marked.join()}\0${
    admitted.distrusted?.join() ?? ''
  }`;
}

function writtenAnnotations(
  annotations: Readonly<Record<string, string>> | undefined,
  written: readonly string[],
  writes: ReadonlySet<string>,
  none: WrittenAnnotations,
): WrittenAnnotations {
  if (!annotations) return none;
  let otherBytes = 0;
  for (const key in annotations) {
    if (!writes.has(key)) otherBytes += Buffer.byteLength(key) + Buffer.byteLength(annotations[key]!);
  }
  if (!written.some((key) => Object.hasOwn(annotations, key))) {
    return otherBytes === 0 ? none : { digests: none.digests, otherBytes };
  }
  const digests = written.map((key) => (Object.hasOwn(annotations, key) ? digest(annotations[key]!) : NaN));
  return { digests, otherBytes };
}

/**
 * The keys of `field` that `manager` owns through apply, read from managedFields
 * (`f:metadata` → `f:labels` → `f:<key>`).
 */
export function ownedKeys(
  managedFields: PartialObjectMetadata['metadata']['managedFields'],
  manager: string,
  field: 'labels' | 'annotations',
): readonly string[] {
  let keys: string[] | undefined;
  for (const entry of managedFields ?? NO_ENTRIES) {
    if (entry.manager !== manager || entry.operation !== 'Apply' || entry.subresource) continue;
    const owned = fieldKeys(entry, field);
    if (owned.length > 0) (keys ??= []).push(...owned);
  }
  return keys ?? NO_KEYS;
}

/**
 * A field manager that owns a key, and how it wrote it (`Apply`: server-side apply; `Update`: a
 * PUT or PATCH; `Admission`, in `labeller explain` only: labeller's admission policy set it, and
 * managedFields name no owner).
 */
export interface KeyOwner {
  readonly manager: string;
  readonly operation: string;
}

/** Every owner of each key of `field`, from managedFields. */
export function keyOwners(
  managedFields: PartialObjectMetadata['metadata']['managedFields'],
  field: 'labels' | 'annotations',
): ReadonlyMap<string, readonly KeyOwner[]> {
  const owners = new Map<string, KeyOwner[]>();
  for (const [key, entries] of entriesByKey(managedFields, field)) {
    owners.set(key, entries.map((entry) => ({ manager: entry.manager ?? '', operation: entry.operation ?? '' })));
  }
  return owners;
}

/** The managedFields entries (but subresources') that own each key of `field`. */
function entriesByKey(
  managedFields: PartialObjectMetadata['metadata']['managedFields'],
  field: 'labels' | 'annotations',
): Map<string, ManagedFieldsEntry[]> {
  const entries = new Map<string, ManagedFieldsEntry[]>();
  for (const entry of managedFields ?? []) {
    if (entry.subresource) continue;
    for (const key of fieldKeys(entry, field)) (entries.get(key) ?? entries.set(key, []).get(key)!).push(entry);
  }
  return entries;
}

function fieldKeys(
  entry: NonNullable<PartialObjectMetadata['metadata']['managedFields']>[number],
  field: 'labels' | 'annotations',
): string[] {
  const fields: FieldsV1 | undefined = entry.fieldsV1?.['f:metadata']?.[`f:${field}`];
  return Object.keys(fields ?? {}).filter((name) => name.startsWith('f:')).map((name) => name.slice(2));
}
