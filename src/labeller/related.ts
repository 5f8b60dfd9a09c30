// Labels drawn from related objects: the namespace, the controller owner and the root of the
// controller chain. Reconcile reads them from caches (RelatedCaches), never from the API; and a
// change to a related object requeues only the objects whose rendered labels it can change:
// those whose templates read a field of it that changed.
import type { Enqueue } from '../runtime/shared.ts';
import type { StoreIndex } from '../runtime/storeindex.ts';
import type { Store, StoreChange } from '../runtime/store.ts';
import type { ControllerRef, LabelledObject } from './object.ts';
import type { RelatedObject, RelatedRead, Relation, Template, TemplateContext } from './template.ts';

/** How far up an owner chain `root` looks (Pod → ReplicaSet → Deployment is 2); a longer or cyclic chain has no root. */
export const MAX_CHAIN = 8;

/** A cache a template reads has not listed yet (or its kind cannot be read): retried, not reconciled. */
export class RelatedPending extends Error {
  override readonly name = 'RelatedPending';
}

/** The caches of related objects; each lookup throws RelatedPending while its cache has not listed. */
export interface RelatedCaches {
  /** The namespace named `name`, or undefined when there is none. */
  namespace(name: string): LabelledObject | undefined;
  /** The object `ref` points at from an object in `namespace`, or undefined when it is gone (or another object now has its name). */
  owner(ref: ControllerRef, namespace: string): LabelledObject | undefined;
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

/** The related objects of `object` (of kind `kind`) that `reads` needs, from the caches. */
export function resolveRelated(
  object: LabelledObject,
  kind: string,
  reads: RelatedReads,
  caches: RelatedCaches,
): NonNullable<TemplateContext['related']> {
  const related: Partial<Record<Relation, RelatedObject>> = {};
  if (reads.has('namespace') && object.namespace !== '') {
    const namespace = caches.namespace(object.namespace);
    if (namespace) related.namespace = view('Namespace', namespace);
  }
  if (reads.has('owner') && object.owner) {
    const owner = caches.owner(object.owner, object.namespace);
    if (owner) related.owner = view(object.owner.kind, owner);
  }
  if (reads.has('root')) {
    const root = rootOf(object, kind, caches);
    if (root) related.root = root;
  }
  return related;
}

/**
 * The top of the controller chain: the object itself when it has no controller. Undefined when a
 * link is gone (its owner was deleted), the chain is longer than MAX_CHAIN, or it loops.
 */
function rootOf(object: LabelledObject, kind: string, caches: RelatedCaches): RelatedObject | undefined {
  let current = object;
  let currentKind = kind;
  const seen = new Set([object.uid]);
  for (let depth = 0; current.owner; depth++) {
    const ref: ControllerRef = current.owner;
    if (depth === MAX_CHAIN || seen.has(ref.uid)) return undefined;
    const next = caches.owner(ref, current.namespace);
    if (!next) return undefined;
    seen.add(ref.uid);
    current = next;
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
  readonly reads: RelatedReads;
  readonly store: Store<LabelledObject>;
  readonly target: Enqueue;
  /** The keys of its objects in a namespace, when it reads `namespace.*`. */
  readonly inNamespace?: ((name: string) => Iterable<string>) | undefined;
  /** Its objects by their controller's uid, when it reads `owner.*` or `root.*`. */
  readonly byOwner?: StoreIndex<LabelledObject> | undefined;
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
  // A first list: its readers have waited for it (Controller dependencies), so none has read it yet.
  else if (change.previous.size > 0) {
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
        for (const key of consumer.byOwner.get(uid)) yield [consumer.target, key];
      }
    }
    // An object whose own controller changed (orphaned, adopted) may stop or start being a root.
    const reparented = old?.owner?.uid !== now?.owner?.uid;
    const rootReaders = new Map(
      consumers.filter((c) => reparented || readsChanged(c.reads.get('root'), old, now)).map((c) => [c.store, c]),
    );
    if (rootReaders.size > 0) yield* descendants(uid, chain, rootReaders);
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
