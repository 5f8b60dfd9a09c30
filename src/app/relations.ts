// The related objects templates read, wired to the shared informer cache: namespaces, and the
// owner kinds labelled objects point at that labeller follows (the workload chain by default,
// others named in `ownerKinds`). Each is watched metadata-only once, whoever reads it, sharing a
// labelled kind's own cache when it covers the same resource and namespace; its changes are
// mapped back to the labelled objects that read it. A kind waits for the caches it reads to list
// or fail; what cannot be read (a kind not followed, not served or refused) holds the labels that
// read it, is reported once, and keeps neither the kind nor readiness waiting. The caches are
// released when the last kind reading them goes.
import type { ResourceApis } from '../kube/api.ts';
import type { DiscoveryCache } from '../kube/discoverycache.ts';
import { isForbidden } from '../kube/errors.ts';
import { ResolveError } from '../kube/resolve.ts';
import { type ApiResource, apiVersion, groupResource } from '../kube/resource.ts';
import type { Config, KindConfig } from '../labeller/config.ts';
import { type ControllerRef, type LabelledObject, projector } from '../labeller/object.ts';
import {
  type ChainLink,
  type Consumer,
  namespaceRequeues,
  ownerRequeues,
  type RelatedCaches,
  type RelatedReads,
  relatedReads,
  RelatedUnreadable,
  type RelatedView,
  resolveRelated,
} from '../labeller/related.ts';
import { type RelatedScope, relatedScope, scopeLacks } from '../labeller/relatedscope.ts';
import type { Metrics } from '../metrics/metrics.ts';
import type { Controller } from '../runtime/controller.ts';
import { Informer } from '../runtime/informer.ts';
import type { InformerCache, InformerHandle } from '../runtime/informercache.ts';
import { StoreIndex } from '../runtime/storeindex.ts';
import { objectKey, type Projection } from '../runtime/store.ts';
import { watches } from '../runtime/watches.ts';
import type { Logger } from '../util/log.ts';
import type { LabellerEvents } from './events.ts';

/** Owner kinds followed without being named: the workload controllers' chain (Pod → ReplicaSet → Deployment, Job → CronJob…). */
export const WORKLOAD_OWNERS: readonly string[] = [
  'replicasets.apps',
  'deployments.apps',
  'statefulsets.apps',
  'daemonsets.apps',
  'jobs.batch',
  'cronjobs.batch',
  'replicationcontrollers',
];

const NAMESPACES = 'namespaces';
/** The names of the store indexes by namespace and by controller owner uid. */
const NAMESPACE = 'namespace';
const OWNER = 'owner';

export interface RelationsOptions {
  readonly apis: ResourceApis;
  readonly cache: InformerCache<LabelledObject>;
  readonly discovery: DiscoveryCache;
  readonly fieldManager: string;
  readonly watchTimeoutSeconds: number;
  /** Reports a related kind labeller may not read or does not follow (on its Pod). */
  readonly events?: LabellerEvents | undefined;
  readonly metrics?: Metrics | undefined;
  readonly log: Logger;
}

/** What a labelled kind's controller takes from the relations: its cache's shape, and how it reads related objects. */
export interface KindRelations {
  readonly project: Projection<LabelledObject>;
  /** New indexes for one of its caches (one per namespace watched). */
  indexes(): StoreIndex<LabelledObject>[];
  /** What the projection keeps and the indexes index: caches of one resource, namespace and selector with the same signature serve alike. */
  readonly signature: string;
  /** Undefined when its templates read no related object. */
  readonly related: ((object: LabelledObject) => RelatedView) | undefined;
  readonly dependencies: (() => Promise<void>) | undefined;
  /** Registers the controller once built: its caches are shared, its objects requeued by related changes. */
  attach(controller: Controller<LabelledObject>, shared: boolean): void;
  /** The controller is stopping: its caches serve no reader, nothing requeues it, and what only it read is released. */
  detach(): void;
}

/** An informer whose objects' owners are watched, and the owner caches found so far. */
interface Tracked {
  readonly ids: Set<string>;
  /** Their owners' owners too, up the chains (root.*). */
  deep: boolean;
  readonly note: (object: LabelledObject | undefined) => void;
  readonly unsubscribe: () => void;
}

/** A related cache and how it came: created here (held), or a labelled kind's own (shared). */
interface Related {
  readonly informer: Informer<LabelledObject>;
  readonly handle?: InformerHandle<LabelledObject>;
  /** The mappers subscribed to it here, ended when it is released. */
  readonly unsubscribe: (() => void)[];
}

/** Why related objects cannot be read: the label of the metric, and what the user can do. */
export type UnreadableReason = 'not-followed' | 'not-served' | 'forbidden';

export class Relations implements RelatedCaches {
  readonly #options: RelationsOptions;
  readonly #scope: RelatedScope;
  /** ownerKinds as configured: the scope of what owner.* and root.* follow beyond the workload chain. */
  readonly #ownerKinds: readonly string[];
  /** groupResource of every owner kind followed and served now. */
  #followed = new Set<string>();
  /** Related caches by id (resource@namespace): labelled kinds' own, offered to lookups, or made here. */
  readonly #related = new Map<string, Related>();
  #consumers: Consumer[] = [];
  #chain: ChainLink[] = [];
  readonly #tracked = new Map<Informer<LabelledObject>, Tracked>();
  /** Related kinds not followed, not served or not readable, reported once each: kind → reason and message. */
  readonly #unreadable = new Map<string, { readonly reason: UnreadableReason; readonly message: string }>();
  /** Consumers reading namespaces and owners: the caches made for them go with the last. */
  #namespaceReaders = 0;
  #ownerReaders = 0;
  readonly #stopDiscovery: () => void;

  constructor(config: Config, options: RelationsOptions) {
    this.#options = options;
    this.#scope = relatedScope(config.kinds);
    this.#ownerKinds = config.ownerKinds;
    this.#follow();
    // A CRD installed later may be an owner kind: its objects' dependents are looked at again.
    this.#stopDiscovery = options.discovery.onChange(() => {
      this.#follow();
      for (const [informer, { note }] of this.#tracked) {
        for (const key of informer.store.keys()) note(informer.store.get(key));
      }
    });
  }

  /** What these caches lack to serve `config` (a reloaded one), in words; empty when they serve it. */
  lacks(config: Config): string[] {
    const owners = [...config.ownerKinds].sort().join(',') === [...this.#ownerKinds].sort().join(',')
      ? []
      : ['other owner kinds followed'];
    return [...scopeLacks(this.#scope, relatedScope(config.kinds)), ...owners];
  }

  /** What cannot be read (labels reading it are held), and related caches that are down: reported, not blocking readiness. */
  notes(): string[] {
    const down = [...this.#related.values()].flatMap(({ informer, handle }) => {
      const problem = handle && informer.problem;
      return problem ? [`${informer.name} (read by templates): ${problem}`] : [];
    });
    return [...[...this.#unreadable.values()].map((u) => u.message), ...down];
  }

  /** What cannot be read, by kind (`Node.v1`, `replicasets.apps/shop`) and reason: the labeller_related_unreadable gauge. */
  unreadable(): { readonly kind: string; readonly reason: UnreadableReason }[] {
    return [...this.#unreadable].map(([kind, { reason }]) => ({ kind, reason }));
  }

  /** Gives up every cache made here (these relations are replaced, or labeller stops). */
  release(): void {
    this.#stopDiscovery();
    for (const tracked of this.#tracked.values()) tracked.unsubscribe();
    this.#tracked.clear();
    for (const { handle, unsubscribe } of this.#related.values()) {
      for (const stop of unsubscribe) stop();
      handle?.release();
    }
    this.#related.clear();
  }

  /** The relations of one labelled kind's controller, watched in `namespaces` ('' for all). */
  forKind(kind: KindConfig, resource: ApiResource, namespaces: readonly string[]): KindRelations {
    const reads = relatedReads(kind.labels.values());
    const own = [...kind.labels.values()].flatMap((template) => template.annotations);
    // Any labelled object may be another's owner or root: its cache keeps what they read.
    const annotations = new Set([
      ...own,
      ...(this.#scope.owners || resource.resource === NAMESPACES ? this.#scope.annotations : []),
    ]);
    const all = namespaces.length === 1 && namespaces[0] === '';
    // Controller references are kept by kinds that read owners and, for root.*, by every kind an
    // owner chain may run through.
    const owners = reads.has('owner') || this.#scope.roots;
    let controller: Controller<LabelledObject> | undefined;
    /** Mappers subscribed to its own caches. */
    const subscriptions: (() => void)[] = [];
    const reading = { namespace: reads.has('namespace'), owners: reads.has('owner') || reads.has('root') };
    let detached = false;
    // Objects of one namespace need no index: the cache of that namespace is the index.
    const indexedByNamespace = reading.namespace && resource.namespaced && all;
    return {
      project: projector(this.#options.fieldManager, annotations, owners),
      indexes: () => [
        ...(indexedByNamespace
          ? [new StoreIndex<LabelledObject>(NAMESPACE, (object) => object.namespace || undefined)]
          : []),
        ...(owners ? [new StoreIndex<LabelledObject>(OWNER, (object) => object.owner?.uid)] : []),
      ],
      signature: JSON.stringify([[...annotations].sort(), owners, indexedByNamespace]),
      related: reads.size === 0 ? undefined : (object) => resolveRelated(object, resource.kind, reads, this),
      dependencies: reads.size === 0 ? undefined : () => this.#dependencies(controller!, reads),
      attach: (attached, shared) => {
        controller = attached;
        const byOwner = attached.sources.flatMap((source) => source.store.index(OWNER) ?? []);
        // Offered to lookups of the same resource; a related cache made earlier keeps serving them.
        if (shared) {
          for (const source of attached.sources) {
            const id = this.#id(resource, namespaceOf(source));
            if (!this.#related.has(id)) this.#related.set(id, { informer: source, unsubscribe: [] });
          }
        }
        if (reads.size > 0) {
          this.#consumers.push({
            reads,
            stores: attached.sources.map((source) => source.store),
            target: attached,
            inNamespace: reading.namespace
              ? (name) =>
                all
                  ? attached.sources[0]?.store.index(NAMESPACE)?.get(name) ?? []
                  : sourceIn(attached, name)?.store.keys() ?? []
              : undefined,
            byOwner: byOwner.length > 0 ? byOwner : undefined,
          });
        }
        if (reading.namespace) this.#namespaceReaders++;
        if (reading.owners) this.#ownerReaders++;
        for (const source of attached.sources) {
          // Its objects may be others' owners: their changes requeue what reads them.
          if (this.#scope.owners) subscriptions.push(this.#asOwners(source, source.store.index(OWNER)));
          if (reading.owners) this.#track(source, reads.has('root'));
          if (reading.namespace) this.#namespaceInformer(namespaceOf(source));
          // Labelled namespaces that are also the namespace cache: their changes map to what reads them.
          if (
            this.#related.get(this.#id(resource, namespaceOf(source)))?.informer === source && isNamespaces(resource)
          ) {
            subscriptions.push(this.#watchNamespaces(source));
          }
        }
      },
      detach: () => {
        if (!controller || detached) return;
        detached = true;
        for (const stop of subscriptions) stop();
        const sources = new Set(controller.sources);
        for (const [id, related] of this.#related) {
          if (!related.handle && sources.has(related.informer)) this.#related.delete(id);
        }
        this.#consumers = this.#consumers.filter((consumer) => consumer.target !== controller);
        this.#chain = this.#chain.filter((link) => !controller!.sources.some((source) => source.store === link.store));
        for (const source of sources) {
          this.#tracked.get(source)?.unsubscribe();
          this.#tracked.delete(source);
        }
        if (reading.namespace && --this.#namespaceReaders === 0) this.#releaseWhere((id) => id.startsWith(NAMESPACES));
        if (reading.owners && --this.#ownerReaders === 0) this.#releaseOwners();
      },
    };
  }

  namespace(name: string): LabelledObject | undefined {
    const informer = this.#namespaceInformer(this.#scope.namespaced ? name : '');
    if (!informer) throw new RelatedUnreadable('unavailable', 'namespaces cannot be read');
    requireListed(informer, 'namespaces');
    return informer.store.get(name);
  }

  owner(ref: ControllerRef, namespace: string): LabelledObject | undefined {
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

  /** Resolves the owner kinds followed: the workload chain and ownerKinds, as discovery serves them now. */
  #follow(): void {
    const followed = new Set<string>();
    for (const name of [...WORKLOAD_OWNERS, ...this.#ownerKinds]) {
      try {
        followed.add(groupResource(this.#options.discovery.resolve(name, ['list', 'watch'])));
        this.#unreadable.delete(name);
      } catch (error) {
        // A named owner kind not served (yet) is followed once it is; a workload kind missing is no matter.
        if (!(error instanceof ResolveError) || !this.#ownerKinds.includes(name)) continue;
        this.#report(name, 'not-served', 'owner kind named in ownerKinds is not served', { ownerKind: name }, error);
      }
    }
    this.#followed = followed;
  }

  /** The informer id of `resource` watched in `namespace` ('' = all namespaces). */
  #id(resource: Pick<ApiResource, 'group' | 'resource' | 'namespaced'>, namespace: string): string {
    const name = groupResource(resource);
    return resource.namespaced && namespace ? `${name}/${namespace}` : name;
  }

  /** The cache of the namespace(s) a controller in `namespace` reads: one namespace, by name, or all. */
  #namespaceInformer(namespace: string): Informer<LabelledObject> | undefined {
    const resource = this.#options.discovery.resources.find((r) => r.group === '' && r.resource === NAMESPACES);
    // A cluster-scoped kind has no namespace to read, and namespaced mode may list none but its own.
    if (!resource || (this.#scope.namespaced && !namespace)) return undefined;
    const only = this.#scope.namespaced ? namespace : '';
    // RBAC limited by resourceNames allows a list or watch that selects that one name.
    return this.#ensure(
      only ? `${NAMESPACES}/${only}` : NAMESPACES,
      resource,
      '',
      only ? `metadata.name=${only}` : undefined,
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

  /**
   * Watches the owners of `informer`'s objects, as they appear; `deep` (for `root.*`), their
   * owners' owners too, up the chains. An owner kind read only by `owner.*` is not followed up:
   * its own owners may be kinds labeller is not allowed to read.
   */
  #track(informer: Informer<LabelledObject>, deep: boolean): void {
    const known = this.#tracked.get(informer);
    if (known) {
      if (deep && !known.deep) {
        known.deep = true;
        for (const id of known.ids) this.#track(this.#related.get(id)!.informer, true);
      }
      return;
    }
    const note = (object: LabelledObject | undefined): void => {
      if (!object?.owner) return;
      const found = this.#ownerInformer(object.owner, object.namespace);
      if (!found || tracked.ids.has(found.id)) return;
      tracked.ids.add(found.id);
      if (tracked.deep) this.#track(found.informer, true);
    };
    const unsubscribe = informer.subscribe((change) => {
      if (change.type === 'upsert') note(change.object);
      else if (change.type === 'resync') { for (const key of change.changed) note(informer.store.get(key)); }
    });
    const tracked: Tracked = { ids: new Set<string>(), deep, note, unsubscribe };
    this.#tracked.set(informer, tracked);
    for (const key of informer.store.keys()) note(informer.store.get(key));
  }

  /** The cache an owner reference points into, made on first use; undefined when its kind is not followed or served. */
  #ownerInformer(
    ref: ControllerRef,
    namespace: string,
  ): { informer: Informer<LabelledObject>; resource: ApiResource; id: string } | undefined {
    const resource = this.#options.discovery.forKind(ref.apiVersion, ref.kind);
    const kind = `${ref.kind}.${ref.apiVersion}`;
    const at = { ownerKind: ref.kind, ownerApiVersion: ref.apiVersion };
    if (!resource) {
      this.#report(kind, 'not-served', 'owner kind not served with list and watch', at);
      return undefined;
    }
    const name = groupResource(resource);
    if (!this.#followed.has(name)) {
      this.#report(kind, 'not-followed', 'owner kind not followed', {
        ...at,
        hint: `add "${name}" to ownerKinds in the config (and grant list and watch on it) to read it`,
      });
      return undefined;
    }
    const scope = resource.namespaced && this.#scope.namespaced ? namespace : '';
    const id = this.#id(resource, scope);
    // Reported as not served before: a CRD installed since.
    if (this.#unreadable.get(kind)?.reason === 'not-served') {
      this.#unreadable.delete(kind);
      this.#options.log.info('owner kind is served now; watching it', at);
    }
    // With root.*, an owner is a link further down chains; otherwise only its own children read it.
    const informer = this.#ensure(id, resource, scope, undefined, (made, byOwner) => [this.#asOwners(made, byOwner)]);
    return { informer, resource, id };
  }

  /** The related cache `id`: a labelled kind's, one made earlier, or one made and started now. */
  #ensure(
    id: string,
    resource: ApiResource,
    namespace: string,
    fieldSelector: string | undefined,
    setUp: (informer: Informer<LabelledObject>, byOwner: StoreIndex<LabelledObject> | undefined) => (() => void)[],
  ): Informer<LabelledObject> {
    const known = this.#related.get(id);
    if (known) return known.informer;
    const { apis, cache, fieldManager, watchTimeoutSeconds, events, metrics, log } = this.#options;
    const byOwner = this.#scope.roots && resource.resource !== NAMESPACES
      ? new StoreIndex<LabelledObject>(OWNER, (object) => object.owner?.uid)
      : undefined;
    const annotations = [...this.#scope.annotations].sort().join(',');
    const handle = cache.acquire(
      `related ${id} ${annotations} ${byOwner ? 'owners' : ''}`,
      () =>
        new Informer<LabelledObject>({
          name: id,
          api: apis(resource, namespace),
          project: projector(fieldManager, this.#scope.annotations, byOwner !== undefined),
          indexes: byOwner ? [byOwner] : [],
          watch: { fieldSelector, watchTimeoutSeconds },
          metrics: metrics?.informer(id),
          onWatchError: (error) => {
            events?.forKind(id, { apiVersion: apiVersion(resource), kind: resource.kind }).watchFailed(error);
            if (isForbidden(error)) {
              this.#report(id, 'forbidden', 'related objects may not be read', {
                resource: id,
                hint: `grant list and watch on ${groupResource(resource)}`,
              }, error);
            }
          },
          log: log.child({ kind: resource.kind, controller: id }),
        }),
    );
    this.#related.set(id, { informer: handle.informer, handle, unsubscribe: setUp(handle.informer, byOwner) });
    return handle.informer;
  }

  /** Resolves once every cache the controller's templates read has listed or failed, including caches found meanwhile. */
  async #dependencies(controller: Controller<LabelledObject>, reads: RelatedReads): Promise<void> {
    for (;;) {
      const ids = this.#dependencyIds(controller, reads);
      await Promise.all([...ids].map((id) => this.#related.get(id)?.informer.settled));
      if ([...this.#dependencyIds(controller, reads)].every((id) => ids.has(id))) return;
    }
  }

  #dependencyIds(controller: Controller<LabelledObject>, reads: RelatedReads): Set<string> {
    const ids = new Set<string>();
    for (const source of controller.sources) {
      if (reads.has('namespace')) {
        const namespace = this.#scope.namespaced ? namespaceOf(source) : '';
        ids.add(namespace ? `${NAMESPACES}/${namespace}` : NAMESPACES);
      }
      if (!reads.has('owner') && !reads.has('root')) continue;
      const pending = [...(this.#tracked.get(source)?.ids ?? [])];
      for (let id = pending.pop(); id !== undefined; id = pending.pop()) {
        if (ids.has(id)) continue;
        ids.add(id);
        const owner = this.#related.get(id)?.informer;
        if (reads.has('root') && owner) pending.push(...(this.#tracked.get(owner)?.ids ?? []));
      }
    }
    return ids;
  }

  /** The owner caches made here go: no kind reads owners any more. */
  #releaseOwners(): void {
    for (const [informer, tracked] of this.#tracked) {
      tracked.unsubscribe();
      this.#tracked.delete(informer);
    }
    this.#releaseWhere((id) => !id.startsWith(NAMESPACES));
  }

  #releaseWhere(matches: (id: string) => boolean): void {
    for (const [id, { handle, unsubscribe, informer }] of this.#related) {
      if (!handle || !matches(id)) continue;
      for (const stop of unsubscribe) stop();
      this.#chain = this.#chain.filter((link) => link.store !== informer.store);
      handle.release();
      this.#related.delete(id);
    }
  }

  /** Says once why a related kind cannot be read: a log line, an Event on labeller's Pod, a metric, a line in /readyz. */
  #report(
    kind: string,
    reason: UnreadableReason,
    message: string,
    fields: Record<string, unknown>,
    error?: unknown,
  ): void {
    if (this.#unreadable.has(kind)) return;
    const detail = Object.entries(fields).map(([name, value]) => `${name} ${String(value)}`).join(', ');
    this.#unreadable.set(kind, { reason, message: `${message} (${detail}); labels that read it are held` });
    this.#options.log.warn(`${message}; labels that read it are held`, { ...fields, ...(error ? { error } : {}) });
    this.#options.events?.relatedUnreadable(reason, `${message} (${detail}); labels that read it are held`);
  }
}

const isNamespaces = (resource: ApiResource): boolean => resource.group === '' && resource.resource === NAMESPACES;

/** The namespace a source watches ('' for all), from its name (`resource/namespace`). */
function namespaceOf(source: Informer<LabelledObject>): string {
  const slash = source.name.indexOf('/');
  return slash === -1 ? '' : source.name.slice(slash + 1);
}

function sourceIn(controller: Controller<LabelledObject>, namespace: string): Informer<LabelledObject> | undefined {
  return controller.sources.find((source) => namespaceOf(source) === namespace);
}

/** Throws RelatedUnreadable while `informer` has not listed: pending, or unavailable once it failed. */
function requireListed(informer: Informer<LabelledObject>, what: string): void {
  if (informer.store.synced) return;
  if (informer.watchFailure) {
    throw new RelatedUnreadable('unavailable', `${what} cannot be listed: ${informer.watchFailure.message}`);
  }
  throw new RelatedUnreadable('pending', `waiting for the first list of ${what}`);
}
