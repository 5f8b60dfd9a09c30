// The related objects templates read, wired to the shared informer cache: namespaces, the owner
// kinds labelled objects point at that labeller follows (ownerkinds.ts), and the objects their
// references name (references.ts). Each is watched
// metadata-only once, whoever reads it, sharing a labelled kind's own cache when it covers the
// same resource and namespace (caches.ts); its changes are mapped back to the labelled
// objects that read it. A kind waits for the caches it reads to list or fail; what cannot be read
// holds the labels that read it, is reported once (unreadable.ts), and keeps neither the kind nor
// readiness waiting. The caches go when the last kind reading them does. (Over 300 lines: a kind's
// wiring, forKind, and the lookups share the consumers, the owner chain and the caches.)
import type { DiscoveryCache } from '../kube/discoverycache.ts';
import type { ApiResource } from '../apimachinery/resource.ts';
import { groupResource } from '../apimachinery/resource.ts';
import { type Config, type KindConfig, templatesOf } from '../config/model.ts';
import { type ControllerRef, type LabelledObject, projector, writtenOrder } from '../labelling/object.ts';
import {
  type ChainLink,
  type Consumer,
  isReference,
  namespaceRequeues,
  ownerRequeues,
  referenceRequeues,
  type RelatedCaches,
  type RelatedReads,
  relatedReads,
  RelatedUnreadable,
  resolveRelated,
  reverseRequeues,
} from './read.ts';
import { type RelatedView } from '../labelling/ports.ts';
import { kindSettings } from '../config/model.ts';
import { type RelatedScope, relatedScope, scopeLacks } from './scope.ts';
import type { Controller } from '../runtime/controller.ts';
import type { Informer } from '../runtime/informer.ts';
import { StoreIndex } from '../runtime/storeindex.ts';
import { objectKey, type Projection } from '../runtime/store.ts';
import { watches } from '../runtime/watches.ts';
import { OwnerKinds } from './ownerkinds.ts';
import { OwnerTracker } from './ownertracker.ts';
import { RelatedInformers, type RelatedRead, type RelatedWiring } from './caches.ts';
import { UnreadableKinds } from './unreadable.ts';
import { agreed, namedBy, References, reverseKey, reverseKeys } from './references.ts';
import type { ReferenceRelation, RelatedObject } from '../config/template.ts';

const NAMESPACES = 'namespaces';
/** The names of the store indexes by namespace and by controller owner uid. */
const NAMESPACE = 'namespace';
const OWNER = 'owner';

/** What a labelled kind's controller takes from the relations: its cache's shape, and how it reads related objects. */
export interface KindRelations {
  readonly project: Projection<LabelledObject>;
  /** New indexes for one of its caches (one per namespace watched). */
  indexes(): StoreIndex<LabelledObject>[];
  /** What the projection keeps and the indexes index: caches of one resource, namespace and selector with the same signature serve alike. */
  readonly signature: string;
  /** Its templates read fields outside the metadata: its caches list and watch whole objects, projected to what is read. */
  readonly whole: boolean;
  /** Undefined when its templates read no related object. */
  readonly related: ((object: LabelledObject) => RelatedView) | undefined;
  readonly dependencies: (() => Promise<void>) | undefined;
  /** Registers the controller once built: its caches are offered to lookups (`shared`: no selector), its objects requeued by related changes. */
  attach(controller: Controller<LabelledObject>, shared: boolean): void;
  /** The controller is stopping: its caches serve no reader, nothing requeues it, and what only it read is released. */
  detach(): void;
}

export class Relations {
  readonly #wiring: RelatedWiring;
  readonly #discovery: DiscoveryCache;
  readonly #scope: RelatedScope;
  readonly unreadable: UnreadableKinds;
  readonly #owners: OwnerKinds;
  readonly #references: References;
  readonly #related: RelatedInformers;
  /** The caches of objects references name, by id, with the references that name their objects. */
  readonly #referenceCaches = new Map<string, Set<ReferenceRelation>>();
  #consumers: Consumer[] = [];
  #chain: ChainLink[] = [];
  readonly #tracker = new OwnerTracker({
    forOwnerOf: (object) => object.owner && this.#ownerInformer(object.owner, object.namespace),
    get: (id) => this.#related.get(id),
  });
  /** Consumers reading namespaces and owners: the caches made for them go with the last. */
  #namespaceReaders = 0;
  #ownerReaders = 0;
  #referenceReaders = 0;
  readonly #stopDiscovery: () => void;

  constructor(config: Config, wiring: RelatedWiring, discovery: DiscoveryCache) {
    this.#wiring = wiring;
    this.#discovery = discovery;
    this.#scope = relatedScope(kindSettings(config));
    this.unreadable = new UnreadableKinds(wiring.log, wiring.events);
    this.#owners = new OwnerKinds(config.ownerKinds, discovery, this.unreadable);
    this.#references = new References(config.references, discovery, this.unreadable);
    this.#references.resolve();
    this.#related = new RelatedInformers(wiring, this.unreadable);
    // A CRD installed later may be an owner kind, or a kind a reference names: its objects' dependents are looked at again.
    this.#stopDiscovery = discovery.onChange(() => {
      this.#owners.resolve();
      this.#references.resolve();
      this.#tracker.renote();
    });
  }

  /** What these caches lack to serve `config` (a reloaded one), in words; empty when they serve it. */
  lacks(config: Config): string[] {
    const owners = this.#owners.same(config.ownerKinds) ? [] : ['other owner kinds followed'];
    const references = this.#references.same(config.references) ? [] : ['other references'];
    return [...scopeLacks(this.#scope, relatedScope(kindSettings(config))), ...owners, ...references];
  }

  /** What the caches of related objects list and watch now (the preflight asks whether it may). */
  reads(): RelatedRead[] {
    return this.#related.reads();
  }

  /** What cannot be read (labels reading it are held), and related caches that are down: reported, not blocking readiness. */
  notes(): string[] {
    return [...this.unreadable.notes(), ...this.#related.notes()];
  }

  /** Gives up every cache made here (these relations are replaced, or labeller stops). */
  release(): void {
    this.#stopDiscovery();
    this.#tracker.forget();
    this.#related.releaseWhere(() => true);
  }

  /** The relations of one labelled kind's controller, watched in `namespaces` ('' for all). */
  forKind(kind: KindConfig, resource: ApiResource, namespaces: readonly string[]): KindRelations {
    const templates = templatesOf(kind);
    const reads = relatedReads(templates);
    // The lookup index notes on each object what it looked up.
    const lookups = templates.some((template) => template.lookups.length > 0);
    const own = templates.flatMap((template) => template.annotations);
    const referencing = [...reads.keys()].filter(isReference);
    // The fields its references read are kept as the templates' own fields are.
    const fields = [
      ...new Map(
        [...templates.flatMap((t) => t.fields), ...this.#references.fields(referencing)].map((field) => [
          field.path,
          field,
        ]),
      ).values(),
    ];
    // Of the annotations labeller writes, the cache keeps digests.
    const written = writtenOrder(kind.annotations.keys());
    // Any labelled object may be another's owner or root: its cache keeps what they read.
    const annotations = new Set([
      ...own,
      ...(this.#scope.owners || isNamespaces(resource) ? this.#scope.annotations : []),
    ]);
    // Controller references are kept by kinds that read owners and, for root.*, by every kind an
    // owner chain may run through.
    const owners = reads.has('owner') || this.#scope.roots;
    const reading = { namespace: reads.has('namespace'), owners: reads.has('owner') || reads.has('root') };
    // Objects of one namespace need no index: the cache of that namespace is the index.
    const all = namespaces.length === 1 && namespaces[0] === '';
    const indexedByNamespace = reading.namespace && resource.namespaced && all;
    let controller: Controller<LabelledObject> | undefined;
    /** Mappers subscribed to its own caches. */
    const subscriptions: (() => void)[] = [];
    const caches: RelatedCaches = {
      namespace: (name) => this.#namespace(name),
      owner: (ref, namespace) => this.#owner(ref, namespace),
      referenced: (relation, object) => this.#referenced(relation, object, resource),
    };
    return {
      project: projector({
        fieldManager: this.#wiring.options.fieldManager,
        read: annotations,
        written,
        owners,
        lookups,
        fields,
      }),
      indexes: () => [
        ...(indexedByNamespace
          ? [new StoreIndex<LabelledObject>(NAMESPACE, (object) => object.namespace || undefined)]
          : []),
        ...(owners ? [new StoreIndex<LabelledObject>(OWNER, (object) => object.owner?.uid)] : []),
        ...this.#references.indexes(referencing),
      ],
      signature: JSON.stringify([
        [...annotations].sort(),
        owners,
        indexedByNamespace,
        lookups,
        written,
        fields.map((field) => field.path).sort(),
        referencing.sort(),
      ]),
      whole: fields.length > 0,
      related: reads.size === 0 ? undefined : (object) => resolveRelated(object, resource.kind, reads, caches),
      dependencies: reads.size === 0 ? undefined : () => this.#dependencies(controller!, resource, reads),
      attach: (attached, shared) => {
        controller = attached;
        if (shared) {
          for (const informer of attached.informers) {
            this.#related.offer(this.#id(resource, namespaceOf(informer)), informer);
          }
        }
        if (reads.size > 0) {
          const byOwner = attached.informers.flatMap((informer) => informer.store.index(OWNER) ?? []);
          this.#consumers.push({
            kind: resource.kind,
            reads,
            stores: attached.informers.map((informer) => informer.store),
            target: attached,
            inNamespace: reading.namespace
              ? (name) =>
                all
                  ? attached.informers[0]?.store.index(NAMESPACE)?.get(name) ?? []
                  : informerIn(attached, name)?.store.keys() ?? []
              : undefined,
            byOwner: byOwner.length > 0 ? byOwner : undefined,
            byReference: referencing.length > 0
              ? new Map(referencing.map((relation) => [
                relation,
                attached.informers.flatMap(({ store }) => {
                  const index = store.index(relation);
                  return index ? [{ store, index }] : [];
                }),
              ]))
              : undefined,
          });
        }
        if (reading.namespace) this.#namespaceReaders++;
        if (reading.owners) this.#ownerReaders++;
        if (referencing.length > 0) this.#referenceReaders++;
        for (const informer of attached.informers) {
          // Its objects may be others' owners: their changes requeue what reads them.
          if (this.#scope.owners) subscriptions.push(this.#asOwners(informer, informer.store.index(OWNER)));
          if (reading.owners) this.#tracker.track(informer, reads.has('root'));
          if (reading.namespace) this.#namespaceInformer(namespaceOf(informer));
          // The caches its references read start listing now, not at the first object naming one.
          for (const relation of referencing) this.#tryReferenceInformer(relation, resource, namespaceOf(informer));
          // Labelled namespaces that are also the namespace cache: their changes map to what reads them.
          if (isNamespaces(resource) && this.#related.get(this.#id(resource, namespaceOf(informer))) === informer) {
            subscriptions.push(this.#watchNamespaces(informer));
          }
        }
      },
      detach: () => {
        const stopping = controller;
        if (!stopping) return;
        controller = undefined;
        for (const stop of subscriptions) stop();
        const informers = new Set(stopping.informers);
        this.#related.withdraw(informers);
        this.#consumers = this.#consumers.filter((consumer) => consumer.target !== stopping);
        this.#chain = this.#chain.filter((link) =>
          !stopping.informers.some((informer) => informer.store === link.store)
        );
        for (const informer of informers) this.#tracker.forget(informer);
        if (reading.namespace && --this.#namespaceReaders === 0) {
          this.#release((id) => id.startsWith(NAMESPACES) && !this.#referenceCaches.has(id));
        }
        if (reading.owners && --this.#ownerReaders === 0) this.#releaseOwners();
        if (referencing.length > 0 && --this.#referenceReaders === 0) {
          this.#release((id) => this.#referenceCaches.has(id));
          this.#referenceCaches.clear();
        }
      },
    };
  }

  #namespace(name: string): LabelledObject | undefined {
    const informer = this.#namespaceInformer(this.#scope.namespaced ? name : '');
    if (!informer) throw new RelatedUnreadable('unavailable', 'namespaces cannot be read');
    requireListed(informer, 'namespaces');
    return informer.store.get(name);
  }

  #owner(ref: ControllerRef, namespace: string): LabelledObject | undefined {
    const found = this.#ownerInformer(ref, namespace);
    if (!found) {
      throw new RelatedUnreadable('unavailable', `owner kind ${ref.kind} (${ref.apiVersion}) is not followed`);
    }
    const { informer, resource } = found;
    requireListed(informer, `owners (${informer.name})`);
    const object = informer.store.get(objectKey({ name: ref.name, namespace: resource.namespaced ? namespace : '' }));
    // Another object under the owner's old name is not the owner.
    return object?.uid === ref.uid ? object : undefined;
  }

  /**
   * The related object `relation` reads for `object`, of `labelled`: what it names (forward), or
   * what those naming it agree on (reverse); undefined when there is none.
   */
  #referenced(relation: ReferenceRelation, object: LabelledObject, labelled: ApiResource): RelatedObject | undefined {
    const spec = this.#references.spec(relation);
    if (!spec) return undefined;
    if (spec.direction === 'reverse') {
      const informer = this.#referenceInformer(relation, labelled, object.namespace);
      requireListed(informer, `${spec.from} (reference ${spec.name})`);
      const { store } = informer;
      const referrers = [...(store.index(relation)?.get(reverseKey(spec, labelled.kind, object)) ?? [])].flatMap((
        key,
      ) => store.get(key) ?? []);
      const kind = this.#references.resource(relation)?.kind ?? spec.from;
      return referrers.length === 0 ? undefined : agreed(kind, referrers, spec.field.path);
    }
    const value = object.fields?.[spec.field.path];
    if (!value) return undefined;
    const informer = this.#referenceInformer(relation, labelled, object.namespace);
    const to = this.#references.resource(relation);
    const named = to && namedBy(spec, object, to);
    if (!to || !named) return undefined;
    requireListed(informer, `${spec.to} (reference ${spec.name})`);
    const found = informer.store.get(objectKey(named));
    return found && {
      kind: to.kind,
      name: found.name,
      labels: found.labels,
      annotations: found.annotations,
      via: { path: spec.field.path, value },
    };
  }

  /** The cache of `relation`'s related objects for objects of `labelled` in `namespace`; throws RelatedUnreadable when their kind is not served. */
  #referenceInformer(relation: ReferenceRelation, labelled: ApiResource, namespace: string): Informer<LabelledObject> {
    const cache = this.#references.cache(relation, labelled, namespace, this.#scope.namespaced);
    let relations = this.#referenceCaches.get(cache.id);
    if (!relations) this.#referenceCaches.set(cache.id, relations = new Set());
    relations.add(relation);
    const reading = relations;
    const spec = this.#references.spec(relation);
    return this.#related.ensure(
      cache.id,
      cache.resource,
      cache.namespace,
      undefined,
      {
        annotations: this.#scope.annotations,
        index: undefined,
        unsplit: cache.unsplit,
        fields: cache.fields,
        byReference: cache.index,
      },
      (informer) => [
        watches(
          informer,
          (change) =>
            spec?.direction === 'reverse'
              ? reverseRequeues(
                change,
                informer.store,
                relation,
                this.#consumers,
                (object) => reverseKeys(spec, object),
              )
              : referenceRequeues(change, informer.store, reading, this.#consumers, (rel, object, named) => {
                const forward = this.#references.spec(rel);
                const found = forward?.direction === 'forward' &&
                  namedBy(forward, object, this.#references.resource(rel));
                return Boolean(found && found.name === named.name && found.namespace === named.namespace);
              }),
        ),
      ],
    );
  }

  /** As #referenceInformer, for a cache that need not be there yet: one not served is reported, and read when it is. */
  #tryReferenceInformer(relation: ReferenceRelation, labelled: ApiResource, namespace: string): void {
    try {
      this.#referenceInformer(relation, labelled, namespace);
    } catch (error) {
      if (!(error instanceof RelatedUnreadable)) throw error;
    }
  }

  /** The informer id of `resource` watched in `namespace` ('' = all namespaces). */
  #id(resource: Pick<ApiResource, 'group' | 'resource' | 'namespaced'>, namespace: string): string {
    const name = groupResource(resource);
    return resource.namespaced && namespace ? `${name}/${namespace}` : name;
  }

  /** What the caches made here keep: for owners along chains (root.*), their controller references, indexed. */
  #projection(resource: ApiResource) {
    const chained = this.#scope.roots && !isNamespaces(resource);
    return {
      annotations: this.#scope.annotations,
      index: chained ? () => new StoreIndex<LabelledObject>(OWNER, (object) => object.owner?.uid) : undefined,
    };
  }

  /** The cache of the namespace(s) a controller in `namespace` reads: one namespace, by name, or all. */
  #namespaceInformer(namespace: string): Informer<LabelledObject> | undefined {
    const resource = this.#discovery.resources.find(isNamespaces);
    // A cluster-scoped kind has no namespace to read, and namespaced mode may list none but its own.
    if (!resource || (this.#scope.namespaced && !namespace)) return undefined;
    const only = this.#scope.namespaced ? namespace : '';
    // RBAC limited by resourceNames allows a list or watch that selects that one name.
    return this.#related.ensure(
      only ? `${NAMESPACES}/${only}` : NAMESPACES,
      resource,
      '',
      only ? `metadata.name=${only}` : undefined,
      this.#projection(resource),
      (informer) => [this.#watchNamespaces(informer)],
    );
  }

  #watchNamespaces(informer: Informer<LabelledObject>): () => void {
    return watches(informer, (change) => namespaceRequeues(change, informer.store, this.#consumers));
  }

  /**
   * A change to one of `informer`'s objects requeues what reads it as owner or root; with
   * `byOwner`, its objects are also links of owner chains (root.*).
   */
  #asOwners(informer: Informer<LabelledObject>, byOwner: StoreIndex<LabelledObject> | undefined): () => void {
    if (byOwner) this.#chain.push({ store: informer.store, byOwner });
    return watches(informer, (change) => ownerRequeues(change, informer.store, this.#consumers, this.#chain));
  }

  /** The cache an owner reference points into, made on first use; undefined when its kind is not followed or served. */
  #ownerInformer(
    ref: ControllerRef,
    namespace: string,
  ): { informer: Informer<LabelledObject>; resource: ApiResource; id: string } | undefined {
    const resource = this.#owners.resource(ref);
    if (!resource) return undefined;
    const scope = resource.namespaced && this.#scope.namespaced ? namespace : '';
    const id = this.#id(resource, scope);
    // With root.*, an owner is a link further down chains; otherwise only its own children read it.
    const informer = this.#related.ensure(
      id,
      resource,
      scope,
      undefined,
      this.#projection(resource),
      (made, byOwner) => {
        // Reported as not served before: a CRD installed since.
        if (this.unreadable.readable(`${ref.kind}.${ref.apiVersion}`) === 'not-served') {
          this.#wiring.log.info('owner kind is served now; watching it', {
            ownerKind: ref.kind,
            ownerApiVersion: ref.apiVersion,
          });
        }
        return [this.#asOwners(made, byOwner)];
      },
    );
    return { informer, resource, id };
  }

  /** Resolves once every cache the controller's templates read has listed or failed, including caches found meanwhile. */
  async #dependencies(
    controller: Controller<LabelledObject>,
    labelled: ApiResource,
    reads: RelatedReads,
  ): Promise<void> {
    for (;;) {
      const ids = this.#dependencyIds(controller, labelled, reads);
      await Promise.all([...ids].map((id) => this.#related.get(id)?.settled));
      if ([...this.#dependencyIds(controller, labelled, reads)].every((id) => ids.has(id))) return;
    }
  }

  #dependencyIds(controller: Controller<LabelledObject>, labelled: ApiResource, reads: RelatedReads): Set<string> {
    const ids = new Set<string>();
    for (const informer of controller.informers) {
      if (reads.has('namespace')) {
        const namespace = this.#scope.namespaced ? namespaceOf(informer) : '';
        ids.add(namespace ? `${NAMESPACES}/${namespace}` : NAMESPACES);
      }
      if (reads.has('owner') || reads.has('root')) this.#tracker.ids(informer, reads.has('root'), ids);
      for (const relation of reads.keys()) {
        if (!isReference(relation)) continue;
        try {
          ids.add(this.#references.cache(relation, labelled, namespaceOf(informer), this.#scope.namespaced).id);
        } catch (error) {
          // Not served: nothing to wait for; its labels are held.
          if (!(error instanceof RelatedUnreadable)) throw error;
        }
      }
    }
    return ids;
  }

  /** The owner caches made here go: no kind reads owners any more. */
  #releaseOwners(): void {
    this.#tracker.forget();
    this.#release((id) => !id.startsWith(NAMESPACES) && !this.#referenceCaches.has(id));
  }

  #release(matches: (id: string) => boolean): void {
    const released = new Set(this.#related.releaseWhere(matches).map((informer) => informer.store));
    this.#chain = this.#chain.filter((link) => !released.has(link.store));
  }
}

const isNamespaces = (resource: ApiResource): boolean => resource.group === '' && resource.resource === NAMESPACES;

/** The namespace an informer watches ('' for all), from its name (`resource/namespace`). */
function namespaceOf(informer: Informer<LabelledObject>): string {
  const slash = informer.name.indexOf('/');
  return slash === -1 ? '' : informer.name.slice(slash + 1);
}

function informerIn(controller: Controller<LabelledObject>, namespace: string): Informer<LabelledObject> | undefined {
  return controller.informers.find((informer) => namespaceOf(informer) === namespace);
}

/** Throws RelatedUnreadable while `informer` has not listed: pending, or unavailable once it failed. */
function requireListed(informer: Informer<LabelledObject>, what: string): void {
  if (informer.store.synced) return;
  if (informer.watchFailure) {
    throw new RelatedUnreadable('unavailable', `${what} cannot be listed: ${informer.watchFailure.message}`);
  }
  throw new RelatedUnreadable('pending', `waiting for the first list of ${what}`);
}
