// Labels drawn from related objects: the namespace, the controller owner and the root of the
// controller chain. Reconcile reads them from caches (RelatedCaches), never from the API. A
// related object that cannot be read (its cache still listing, its kind not followed or refused,
// an owner not in its cache) holds the labels that read it: never applied, never removed, for a
// missing cache says nothing about what the label should be. A change to a related object
// requeues only the objects whose rendered labels it can change: those whose templates read a
// field of it that changed.
import { ReasonedError } from '../util/reasonederror.ts';
import type { Enqueue } from '../runtime/watches.ts';
import type { StoreIndex } from '../runtime/storeindex.ts';
import { objectKey, type Store, type StoreChange } from '../runtime/store.ts';
import type { ControllerRef, LabelledObject } from '../labelling/object.ts';
import {
  referenceName,
  type ReferenceRelation,
  type RelatedObject,
  type RelatedRead,
  type Relation,
  type Template,
} from '../config/template.ts';
import type { RelatedView, Unreadable } from '../labelling/ports.ts';

/** How far up an owner chain `root` looks (Pod → ReplicaSet → Deployment is 2); a longer or cyclic chain has no root. */
export const MAX_CHAIN = 8;

/** Thrown by a lookup whose related object cannot be read now. */
export class RelatedUnreadable extends ReasonedError<Unreadable> {
  override readonly name = 'RelatedUnreadable';
}

/** The caches of related objects; each lookup throws RelatedUnreadable when its cache cannot answer. */
export interface RelatedCaches {
  /** The namespace named `name`, or undefined when there is none. */
  namespace(name: string): LabelledObject | undefined;
  /**
   * The object `ref` points at from an object in `namespace`, or undefined when its cache holds
   * no such object (not seen yet, or being deleted; another object under its name is not it).
   */
  owner(ref: ControllerRef, namespace: string): LabelledObject | undefined;
  /**
   * What `object` names by the reference `relation` (with the field that named it), or undefined
   * when the field is not set or its cache holds no such object.
   */
  referenced(relation: ReferenceRelation, object: LabelledObject): RelatedObject | undefined;
}

/** What a kind's templates read of each relation. */
export type RelatedReads = ReadonlyMap<Relation, readonly RelatedRead[]>;

export function relatedReads(templates: Iterable<Template>): RelatedReads {
  const reads = new Map<Relation, RelatedRead[]>();
  for (const template of templates) {
    for (const read of template.related) {
      const list = reads.get(read.relation) ?? [];
      if (!list.some((known) => known.field === read.field && known.key === read.key)) list.push(read);
      reads.set(read.relation, list);
    }
  }
  return reads;
}

const NOTHING_HELD: ReadonlyMap<Relation, Unreadable> = new Map();

/** The related objects of `object` (of kind `kind`) that `reads` needs, from the caches. */
export function resolveRelated(
  object: LabelledObject,
  kind: string,
  reads: RelatedReads,
  caches: RelatedCaches,
): RelatedView {
  const objects: Partial<Record<Relation, RelatedObject>> = {};
  let held: Map<Relation, Unreadable> | undefined;
  const read = (relation: Relation, lookup: () => RelatedObject | undefined): void => {
    try {
      const found = lookup();
      if (found) objects[relation] = found;
    } catch (error) {
      if (!(error instanceof RelatedUnreadable)) throw error;
      (held ??= new Map()).set(relation, error.reason);
    }
  };
  if (reads.has('namespace') && object.namespace !== '') {
    read('namespace', () => {
      const namespace = caches.namespace(object.namespace);
      return namespace && view('Namespace', namespace);
    });
  }
  const owner = object.owner;
  if (reads.has('owner') && owner) read('owner', () => view(owner.kind, ownerOf(owner, object.namespace, caches)));
  if (reads.has('root')) read('root', () => rootOf(object, kind, caches));
  for (const relation of reads.keys()) {
    if (isReference(relation)) read(relation, () => caches.referenced(relation, object));
  }
  return { objects, held: held ?? NOTHING_HELD };
}

/** Whether `relation` is a reference's. */
export const isReference = (relation: Relation): relation is ReferenceRelation => referenceName(relation) !== undefined;

/** The owner `ref` points at; not in its cache, it is pending: not seen yet, or on its way out. */
function ownerOf(ref: ControllerRef, namespace: string, caches: RelatedCaches): LabelledObject {
  const owner = caches.owner(ref, namespace);
  if (!owner) throw new RelatedUnreadable('pending', `owner ${ref.kind} ${ref.name} is not in its cache`);
  return owner;
}

/**
 * The top of the controller chain: the object itself when it has no controller. Undefined when
 * the chain is longer than MAX_CHAIN or loops; unreadable when a link cannot be read.
 */
function rootOf(object: LabelledObject, kind: string, caches: RelatedCaches): RelatedObject | undefined {
  let current = object;
  let currentKind = kind;
  const seen = new Set([object.uid]);
  for (let depth = 0; current.owner; depth++) {
    const ref: ControllerRef = current.owner;
    if (depth === MAX_CHAIN || seen.has(ref.uid)) return undefined;
    current = ownerOf(ref, current.namespace, caches);
    seen.add(ref.uid);
    currentKind = ref.kind;
  }
  return view(currentKind, current);
}

const view = (kind: string, object: LabelledObject): RelatedObject => ({
  kind,
  name: object.name,
  labels: object.labels,
  annotations: object.annotations,
});

/** Whether a change from `before` to `after` (undefined: absent) changes a field `reads` reads. */
export function readsChanged(
  reads: readonly RelatedRead[] | undefined,
  before: LabelledObject | undefined,
  after: LabelledObject | undefined,
): boolean {
  if (!reads || reads.length === 0) return false;
  if (!before || !after) return before !== after;
  if (before.uid !== after.uid) return true;
  return reads.some(({ field, key }) =>
    (field === 'labels' || field === 'annotations') && key !== undefined && before[field][key] !== after[field][key]
  );
}

/** A labelled kind's controller as a reader of related objects. */
export interface Consumer {
  /** The kind of its objects (`Deployment`): what a reverse reference's kindField names. */
  readonly kind: string;
  readonly reads: RelatedReads;
  /** Its caches: one per namespace it watches, or one for all. */
  readonly stores: readonly Store<LabelledObject>[];
  readonly target: Enqueue;
  /** The keys of its objects in a namespace, when it reads `namespace.*`. */
  readonly inNamespace?: ((name: string) => Iterable<string>) | undefined;
  /** Its objects by their controller's uid (an index per cache), when it reads `owner.*` or `root.*`. */
  readonly byOwner?: readonly StoreIndex<LabelledObject>[] | undefined;
  /** Its objects by the name each reference it reads names (an index per cache). */
  readonly byReference?: ReadonlyMap<ReferenceRelation, readonly IndexedStore[]> | undefined;
}

/** A store with one of its indexes. */
export interface IndexedStore {
  readonly store: Store<LabelledObject>;
  readonly index: StoreIndex<LabelledObject>;
}

/** A store an owner chain runs through: a consumer's own, or a related owner kind's. */
export interface ChainLink {
  readonly store: Store<LabelledObject>;
  readonly byOwner: StoreIndex<LabelledObject>;
}

type Requeue = readonly [Enqueue, string];

/** Each changed object of a store change, as (key, before, after). */
function* changes(
  change: StoreChange<LabelledObject>,
  store: Store<LabelledObject>,
): Generator<[string, LabelledObject | undefined, LabelledObject | undefined]> {
  if (change.type === 'upsert') yield [change.key, change.previous, change.object];
  else if (change.type === 'delete') yield [change.key, change.previous, undefined];
  // A first list too: its readers may have reconciled before it (it could not be read then).
  else {
    for (const key of change.changed) yield [key, change.previous.get(key), store.get(key)];
    for (const key of change.removed) yield [key, change.previous.get(key), undefined];
  }
}

/** Maps changes of namespaces to the consumers' objects in them. */
export function* namespaceRequeues(
  change: StoreChange<LabelledObject>,
  namespaces: Store<LabelledObject>,
  consumers: readonly Consumer[],
): Generator<Requeue> {
  for (const [name, old, now] of changes(change, namespaces)) {
    for (const consumer of consumers) {
      if (!consumer.inNamespace || !readsChanged(consumer.reads.get('namespace'), old, now)) continue;
      for (const key of consumer.inNamespace(name)) yield [consumer.target, key];
    }
  }
}

/**
 * Maps changes of possible owners to the consumers' objects below them: direct children for
 * `owner.*`, every descendant (up to MAX_CHAIN levels, through `chain`) for `root.*`.
 */
export function* ownerRequeues(
  change: StoreChange<LabelledObject>,
  store: Store<LabelledObject>,
  consumers: readonly Consumer[],
  chain: readonly ChainLink[],
): Generator<Requeue> {
  for (const [, old, now] of changes(change, store)) {
    const uid = (now ?? old)?.uid;
    if (uid === undefined) continue;
    for (const consumer of consumers) {
      if (consumer.byOwner && readsChanged(consumer.reads.get('owner'), old, now)) {
        for (const index of consumer.byOwner) for (const key of index.get(uid)) yield [consumer.target, key];
      }
    }
    // An object whose own controller changed (orphaned, adopted) may stop or start being a root.
    const reparented = old?.owner?.uid !== now?.owner?.uid;
    const rootReaders = new Map(
      consumers.filter((c) => reparented || readsChanged(c.reads.get('root'), old, now)).flatMap((c) =>
        c.stores.map((s) => [s, c] as const)
      ),
    );
    if (rootReaders.size > 0) yield* descendants(uid, chain, rootReaders);
  }
}

/**
 * Maps changes of objects a reference names to the consumers' objects naming them, of the
 * references in `relations` that name objects of this store; `names` says whether an object
 * names `target` (its namespace: the index holds names only).
 */
export function* referenceRequeues(
  change: StoreChange<LabelledObject>,
  store: Store<LabelledObject>,
  relations: ReadonlySet<ReferenceRelation>,
  consumers: readonly Consumer[],
  names: (relation: ReferenceRelation, object: LabelledObject, target: { name: string; namespace: string }) => boolean,
): Generator<Requeue> {
  for (const [, old, now] of changes(change, store)) {
    const target = now ?? old;
    if (!target) continue;
    for (const consumer of consumers) {
      for (const relation of relations) {
        const indexes = consumer.byReference?.get(relation);
        if (!indexes || !readsChanged(consumer.reads.get(relation), old, now)) continue;
        for (const { store, index } of indexes) {
          for (const key of index.get(target.name)) {
            const object = store.get(key);
            if (object && names(relation, object, target)) yield [consumer.target, key];
          }
        }
      }
    }
  }
}

/**
 * Maps changes of objects naming others by the reverse reference `relation` (`keys`: what one
 * names, reverseKeys) to the consumers' objects they name before and after: all of them when a
 * field read changed, else those named or no longer named.
 */
export function* reverseRequeues(
  change: StoreChange<LabelledObject>,
  store: Store<LabelledObject>,
  relation: ReferenceRelation,
  consumers: readonly Consumer[],
  keys: (object: LabelledObject) => readonly string[],
): Generator<Requeue> {
  for (const [, old, now] of changes(change, store)) {
    const before = new Set(old ? keys(old) : []);
    const after = new Set(now ? keys(now) : []);
    for (const consumer of consumers) {
      const reads = consumer.reads.get(relation);
      if (!reads) continue;
      const all = readsChanged(reads, old, now);
      for (const key of new Set([...before, ...after])) {
        if (!all && before.has(key) === after.has(key)) continue;
        // `Kind:ns/name` where the related objects say which kind they name.
        const colon = key.indexOf(':');
        if (colon !== -1 && key.slice(0, colon) !== consumer.kind) continue;
        const [namespace = '', name = ''] = key.slice(colon + 1).split('/');
        yield [consumer.target, objectKey({ namespace, name })];
      }
    }
  }
}

function* descendants(
  uid: string,
  chain: readonly ChainLink[],
  readers: ReadonlyMap<Store<LabelledObject>, Consumer>,
): Generator<Requeue> {
  const seen = new Set([uid]);
  let level = [uid];
  for (let depth = 0; depth < MAX_CHAIN && level.length > 0; depth++) {
    const next: string[] = [];
    for (const owner of level) {
      for (const { store, byOwner } of chain) {
        const reader = readers.get(store);
        for (const key of byOwner.get(owner)) {
          if (reader) yield [reader.target, key];
          const child = store.get(key);
          if (child && !seen.has(child.uid)) {
            seen.add(child.uid);
            next.push(child.uid);
          }
        }
      }
    }
    level = next;
  }
}
