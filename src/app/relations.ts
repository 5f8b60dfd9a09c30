// The related objects templates read (issue 12), wired: namespaces and each owner kind that
// labelled objects point at (found through discovery from their ownerReferences) are watched
// metadata-only once, whoever reads them, sharing a labelled kind's own cache when it covers
// the same resource and namespaces; their changes are mapped back to the labelled objects that
// read them; and a labelled kind reconciles only once every cache it reads has listed.
import { MetadataApi } from '../kube/api.ts';
import type { KubeClient } from '../kube/client.ts';
import { discover } from '../kube/discovery.ts';
import { type ApiResource, apiVersion, groupResource } from '../kube/resource.ts';
import type { KindConfig } from '../labeller/config.ts';
import { type ControllerRef, type LabelledObject, projector } from '../labeller/object.ts';
import {
  type ChainLink,
  type Consumer,
  namespaceRequeues,
  ownerRequeues,
  type RelatedCaches,
  RelatedPending,
  type RelatedReads,
  relatedReads,
  resolveRelated,
} from '../labeller/related.ts';
import { type RelatedScope, relatedScope, scopeLacks } from '../labeller/relatedscope.ts';
import type { TemplateContext } from '../labeller/template.ts';
import type { Logger } from '../util/log.ts';
import { Backoff } from '../util/backoff.ts';
import type { Controller } from '../runtime/controller.ts';
import { StoreIndex } from '../runtime/storeindex.ts';
import { Informer } from '../runtime/informer.ts';
import { SharedInformers, watches } from '../runtime/shared.ts';
import { sleep } from '../util/sleep.ts';
import { objectKey, type Projection } from '../runtime/store.ts';
import type { LabellerEvents } from './events.ts';

export interface RelationsOptions {
  readonly fieldManager: string;
  /** List related resources once (`--once`) instead of watching them. */
  readonly once: boolean;
  readonly watchTimeoutSeconds: number;
  readonly signal: AbortSignal;
  /** Reports a related kind labeller may not read (KindForbidden on its Pod), as for labelled kinds. */
  readonly events?: LabellerEvents | undefined;
}

/** What a labelled kind's controller takes from the relations: its cache's shape, and how it reads related objects. */
export interface KindRelations {
  readonly project: Projection<LabelledObject>;
  readonly indexes: readonly StoreIndex<LabelledObject>[];
  /** Undefined when its templates read no related object. */
  readonly related: ((object: LabelledObject) => TemplateContext['related']) | undefined;
  readonly dependencies: (() => Promise<void>) | undefined;
  /** Registers the controller once built: its cache is shared, its objects are requeued by related changes. */
  attach(controller: Controller<LabelledObject>): void;
  /** The controller is stopping (a live reload): its frozen cache serves no reader, and nothing requeues it. */
  detach(): void;
}

const NAMESPACES = 'namespaces';

/** An informer whose objects' owners are watched. */
interface Tracked {
  /** The informers of their owners. */
  readonly ids: Set<string>;
  /** Their owners' owners too, up the chains (root.*). */
  deep: boolean;
  /** Starts watching the owners of one more object. */
  readonly note: (object: LabelledObject | undefined) => void;
}

/** An owner kind as ownerReferences name it, and the resource serving it (null: none with list and watch). */
interface OwnerKind {
  readonly apiVersion: string;
  readonly kind: string;
  resource: ApiResource | null;
}

export class Relations implements RelatedCaches {
  readonly #client: KubeClient;
  /** What discovery serves; looked up again while an owner kind is missing from it. */
  #resources: readonly ApiResource[];
  readonly #options: RelationsOptions;
  readonly #log: Logger;
  readonly #informers: SharedInformers<LabelledObject>;
  /** Informers created here (not a controller's own), for readiness. */
  readonly #created: Informer<LabelledObject>[] = [];
  /** What the caches share across kinds, from the kinds at construction. */
  readonly #scope: RelatedScope;
  #consumers: Consumer[] = [];
  #chain: ChainLink[] = [];
  /** The informers whose objects' owners are watched: along the chains only for kinds that read `root.*`. */
  readonly #tracked = new Map<Informer<LabelledObject>, Tracked>();
  /** Owner kinds seen in ownerReferences (by apiVersion and kind), with their resource, or null when not served. */
  readonly #ownerResources = new Map<string, OwnerKind>();
  /** The pause between discoveries while an owner kind is not served: 5 s, growing to 5 min (jittered, so replicas spread). */
  readonly #rediscovery = new Backoff({ initialMs: 5_000, maxMs: 300_000 });
  /** performance.now() before which discovery does not run again. */
  #rediscoverAt = 0;
  /** A discovery is waiting for its pause to end or under way. */
  #rediscovering = false;

  constructor(
    client: KubeClient,
    kinds: readonly KindConfig[],
    resources: readonly ApiResource[],
    options: RelationsOptions,
    log: Logger,
  ) {
    this.#client = client;
    this.#resources = resources;
    this.#options = options;
    this.#log = log;
    this.#scope = relatedScope(kinds);
    this.#informers = new SharedInformers((informer) => {
      if (!options.once) return void informer.run(options.signal);
      // Reported here; the kinds that read it fail through their dependencies.
      informer.listOnce(options.signal).catch((error: unknown) =>
        log.error('cannot list related objects', { controller: informer.name, error })
      );
    });
  }

  /** What these caches lack to serve `kinds` (a reloaded config), in words; empty when they serve them. */
  lacks(kinds: readonly KindConfig[]): string[] {
    return scopeLacks(this.#scope, relatedScope(kinds));
  }

  /** Readiness problems of the caches created for related objects. */
  problems(): string[] {
    return this.#created.flatMap((informer) => {
      const failure = informer.watchFailure ? `: ${informer.watchFailure.message}` : '';
      if (!informer.store.synced) return [`${informer.name} (read by templates): waiting for the first list${failure}`];
      return failure ? [`${informer.name} (read by templates): watch down${failure}`] : [];
    });
  }

  /** The relations of one labelled kind's controller in `namespace` ('' for all). */
  forKind(kind: KindConfig, resource: ApiResource, namespace: string): KindRelations {
    const reads = relatedReads(kind.labels.values());
    const own = [...kind.labels.values()].flatMap((template) => template.annotations);
    // Any labelled object may be another's owner or root: its cache keeps what they read.
    const annotations = new Set([
      ...own,
      ...(this.#scope.owners || resource.resource === NAMESPACES ? this.#scope.annotations : []),
    ]);
    // A controller of one namespace holds nothing else: its whole cache is the index.
    const byNamespace = reads.has('namespace') && resource.namespaced && !namespace
      ? new StoreIndex<LabelledObject>((object) => object.namespace || undefined)
      : undefined;
    // Controller references are kept by kinds that read owners and, for root.*, by every kind an
    // owner chain may run through.
    const owners = reads.has('owner') || this.#scope.roots;
    const byOwner = owners ? new StoreIndex<LabelledObject>((object) => object.owner?.uid) : undefined;
    const id = this.#id(resource, namespace);
    let informer: Informer<LabelledObject> | undefined;
    return {
      project: projector(this.#options.fieldManager, annotations, owners),
      indexes: [byNamespace, byOwner].filter((index) => index !== undefined),
      related: reads.size === 0 ? undefined : (object) => resolveRelated(object, resource.kind, reads, this),
      dependencies: reads.size === 0 ? undefined : () => this.#dependencies(informer!, reads, namespace),
      attach: (controller) => {
        informer = controller.informer;
        if (!kind.selector) this.#informers.share(id, controller.informer);
        if (reads.size > 0) {
          const inNamespace = byNamespace
            ? (name: string) => byNamespace.get(name)
            : reads.has('namespace') && namespace
            ? (name: string) => (name === namespace ? controller.store.keys() : [])
            : undefined;
          this.#consumers.push({ reads, store: controller.store, target: controller, inNamespace, byOwner });
        }
        // Its objects may be others' owners: their changes requeue what reads them.
        if (this.#scope.owners) this.#asOwners(controller.informer, byOwner);
        if (reads.has('owner') || reads.has('root')) this.#track(controller.informer, reads.has('root'));
        if (reads.has('namespace')) this.#namespaceInformer(namespace);
        // Labelled namespaces that are also the namespace cache: their changes map to what reads them.
        if (
          resource.group === '' && resource.resource === NAMESPACES &&
          this.#informers.get(NAMESPACES) === controller.informer
        ) this.#watchNamespaces(controller.informer);
      },
      detach: () => {
        if (!informer) return;
        const { store } = informer;
        this.#informers.unshare(id, informer);
        this.#consumers = this.#consumers.filter((consumer) => consumer.store !== store);
        this.#chain = this.#chain.filter((link) => link.store !== store);
        this.#tracked.delete(informer);
      },
    };
  }

  namespace(name: string): LabelledObject | undefined {
    // Made again when the one shared by labelled namespaces stopped with them (a live reload).
    const informer = this.#informers.get(this.#namespaceId(name)) ??
      this.#namespaceInformer(this.#scope.namespaced ? name : '');
    if (!informer?.store.synced) {
      throw new RelatedPending(`waiting for the first list of namespaces (read by templates)`);
    }
    return informer.store.get(name);
  }

  owner(ref: ControllerRef, namespace: string): LabelledObject | undefined {
    const found = this.#ownerInformer(ref, namespace);
    if (!found) {
      throw new RelatedPending(
        `owner kind ${ref.kind} (${ref.apiVersion}) is not served with list and watch; the objects it controls are left alone`,
      );
    }
    const { informer, resource } = found;
    if (!informer.store.synced) {
      throw new RelatedPending(`waiting for the first list of ${informer.name} (owners read by templates)`);
    }
    const object = informer.store.get(objectKey({ name: ref.name, namespace: resource.namespaced ? namespace : '' }));
    // Another object under the owner's old name is not the owner.
    return object?.uid === ref.uid ? object : undefined;
  }

  /** The informer id of `resource` watched in `namespace` ('' = all namespaces). */
  #id(resource: ApiResource, namespace: string): string {
    const name = groupResource(resource);
    return resource.namespaced && namespace ? `${name}/${namespace}` : name;
  }

  #namespaceId(name: string): string {
    return this.#scope.namespaced ? `${NAMESPACES}/${name}` : NAMESPACES;
  }

  /** The cache of the namespace(s) a controller in `namespace` reads: one namespace, by name, or all. */
  #namespaceInformer(namespace: string): Informer<LabelledObject> | undefined {
    const resource = this.#resources.find((r) => r.group === '' && r.resource === NAMESPACES);
    // A cluster-scoped kind has no namespace to read, and namespaced mode may list none but its own.
    if (!resource || (this.#scope.namespaced && !namespace)) return undefined;
    const only = this.#scope.namespaced ? namespace : '';
    // RBAC limited by resourceNames allows a list or watch that selects that one name.
    return this.#create(
      this.#namespaceId(only),
      resource,
      '',
      only ? `metadata.name=${only}` : undefined,
      (informer) => this.#watchNamespaces(informer),
    );
  }

  #watchNamespaces(informer: Informer<LabelledObject>): void {
    watches(informer, (change) => namespaceRequeues(change, informer.store, this.#consumers));
  }

  /**
   * A change to one of `informer`'s objects requeues what reads it as owner or root; with
   * `byOwner`, its objects are also links of owner chains (root.*).
   */
  #asOwners(informer: Informer<LabelledObject>, byOwner: StoreIndex<LabelledObject> | undefined): void {
    if (byOwner) this.#chain.push({ store: informer.store, byOwner });
    watches(informer, (change) => ownerRequeues(change, informer.store, this.#consumers, this.#chain));
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
        for (const id of known.ids) this.#track(this.#informers.get(id)!, true);
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
    const tracked = { ids: new Set<string>(), deep, note };
    this.#tracked.set(informer, tracked);
    for (const key of informer.store.keys()) note(informer.store.get(key));
    informer.subscribe((change) => {
      if (change.type === 'upsert') note(change.object);
      else if (change.type === 'resync') { for (const key of change.changed) note(informer.store.get(key)); }
    });
  }

  /** The cache an owner reference points into, created on first use; undefined when its kind is not served. */
  #ownerInformer(
    ref: ControllerRef,
    namespace: string,
  ): { informer: Informer<LabelledObject>; resource: ApiResource; id: string } | undefined {
    const resource = this.#ownerResource(ref);
    if (!resource) return undefined;
    const scope = resource.namespaced && this.#scope.namespaced ? namespace : '';
    const id = this.#id(resource, scope);
    // With root.*, an owner is a link further down chains; otherwise only its own children read it.
    const informer = this.#informers.get(id) ??
      this.#create(id, resource, scope, undefined, (created, byOwner) => this.#asOwners(created, byOwner));
    return { informer, resource, id };
  }

  #ownerResource(ref: ControllerRef): ApiResource | undefined {
    const type = `${ref.apiVersion} ${ref.kind}`;
    let owner = this.#ownerResources.get(type);
    if (owner === undefined) {
      owner = { apiVersion: ref.apiVersion, kind: ref.kind, resource: this.#served(ref.apiVersion, ref.kind) };
      this.#ownerResources.set(type, owner);
      if (owner.resource === null) {
        this.#log.error('owner kind not served with list and watch; objects it controls are left alone', {
          ownerKind: ref.kind,
          ownerApiVersion: ref.apiVersion,
        });
      }
    }
    if (owner.resource === null) this.#lookAgain();
    return owner.resource ?? undefined;
  }

  /** The resource that serves owner references of `apiVersion` and `kind` with list and watch, or null. */
  #served(apiVersion: string, kind: string): ApiResource | null {
    const slash = apiVersion.indexOf('/');
    const [group, version] = slash === -1
      ? ['', apiVersion]
      : [apiVersion.slice(0, slash), apiVersion.slice(slash + 1)];
    const candidates = this.#resources.filter((r) =>
      r.group === group && r.kind === kind && !r.resource.includes('/') && r.verbs.includes('list') &&
      r.verbs.includes('watch')
    );
    return candidates.find((r) => r.version === version) ?? candidates.find((r) => r.preferred) ?? candidates[0] ??
      null;
  }

  /**
   * An owner kind is not served: its CRD may be installed later (or a rebuild of these caches kept
   * the discovery of start), so discovery runs again, in the background, once per pause. When an
   * owner kind turns up, every tracked object is noted again: the caches of its owners start, and
   * their first lists requeue the objects that read them.
   */
  #lookAgain(): void {
    if (this.#options.once || this.#rediscovering) return;
    this.#rediscovering = true;
    const { signal } = this.#options;
    void sleep(Math.max(0, this.#rediscoverAt - performance.now()), signal)
      .then(() => signal.aborted ? undefined : discover(this.#client, signal))
      .then((discovery) => {
        if (!discovery) return;
        this.#resources = discovery.resources;
        const found = [...this.#ownerResources.values()].filter((owner) => owner.resource === null).flatMap((owner) => {
          owner.resource = this.#served(owner.apiVersion, owner.kind);
          if (!owner.resource) return [];
          this.#log.info('owner kind is served now; watching it', {
            ownerKind: owner.kind,
            ownerApiVersion: owner.apiVersion,
          });
          return [owner.resource];
        });
        if (found.length === 0) return;
        this.#rediscovery.reset();
        for (const [informer, { note }] of this.#tracked) {
          for (const key of informer.store.keys()) note(informer.store.get(key));
        }
      })
      .catch((error: unknown) => {
        if (!signal.aborted) this.#log.warn('discovery failed; owner kinds are looked for again later', { error });
      })
      .finally(() => {
        this.#rediscovering = false;
        this.#rediscoverAt = performance.now() + this.#rediscovery.next();
      });
  }

  /** Creates (once) and starts the informer `id` of related objects. */
  #create(
    id: string,
    resource: ApiResource,
    namespace: string,
    fieldSelector: string | undefined,
    setUp: (informer: Informer<LabelledObject>, byOwner: StoreIndex<LabelledObject> | undefined) => void,
  ): Informer<LabelledObject> {
    return this.#informers.ensure(id, () => {
      const byOwner = this.#scope.roots && resource.resource !== NAMESPACES
        ? new StoreIndex<LabelledObject>((object) => object.owner?.uid)
        : undefined;
      const informer = new Informer<LabelledObject>({
        name: id,
        api: new MetadataApi(this.#client, resource, namespace),
        project: projector(this.#options.fieldManager, this.#scope.annotations, byOwner !== undefined),
        indexes: byOwner ? [byOwner] : [],
        watch: { fieldSelector, watchTimeoutSeconds: this.#options.watchTimeoutSeconds },
        onWatchError: this.#options.events?.forKind(id, { apiVersion: apiVersion(resource), kind: resource.kind })
          .watchFailed,
        log: this.#log.child({ kind: resource.kind, controller: id }),
      });
      this.#created.push(informer);
      setUp(informer, byOwner);
      return informer;
    });
  }

  /** Resolves once every cache the controller's templates read has listed, including caches found meanwhile. */
  async #dependencies(informer: Informer<LabelledObject>, reads: RelatedReads, namespace: string): Promise<void> {
    for (;;) {
      const ids = this.#dependencyIds(informer, reads, namespace);
      await Promise.all([...ids].map((id) => this.#informers.get(id)?.synced));
      if ([...this.#dependencyIds(informer, reads, namespace)].every((id) => ids.has(id))) return;
    }
  }

  #dependencyIds(informer: Informer<LabelledObject>, reads: RelatedReads, namespace: string): Set<string> {
    const ids = new Set<string>();
    if (reads.has('namespace')) ids.add(this.#namespaceId(this.#scope.namespaced ? namespace : ''));
    if (!reads.has('owner') && !reads.has('root')) return ids;
    const pending = [...(this.#tracked.get(informer)?.ids ?? [])];
    for (let id = pending.pop(); id !== undefined; id = pending.pop()) {
      if (ids.has(id)) continue;
      ids.add(id);
      const owner = this.#informers.get(id);
      if (reads.has('root') && owner) pending.push(...(this.#tracked.get(owner)?.ids ?? []));
    }
    return ids;
  }
}
