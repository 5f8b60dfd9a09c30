// The caches of related objects, by id (`resource`, or `resource/namespace`): a labelled kind's
// own informer, offered to lookups of the same resource, or one acquired from the shared informer
// cache for them, with the mappers subscribed to it, until it is released.
import type { ApiResource } from '../apimachinery/resource.ts';
import { apiVersion, groupResource } from '../apimachinery/resource.ts';
import { isForbidden, isNotFound } from '../apimachinery/errors.ts';
import { type LabelledObject, projector } from '../labelling/object.ts';
import { Informer } from '../runtime/informer.ts';
import type { StoreIndex } from '../runtime/storeindex.ts';
import type { ObjectField } from '../config/template.ts';
import type { LabellerEvents } from '../events/labellerevents.ts';
import type { ResourceApis } from '../kube/api.ts';
import type { Metrics } from '../metrics/metrics.ts';
import type { InformerCache, InformerHandle } from '../runtime/informercache.ts';
import type { Logger } from '../util/log.ts';
import type { Shard } from '../shard/shard.ts';
import type { UnreadableKinds } from './unreadable.ts';

/** What the caches of related objects are made with (a kind's controller is wired with more: kinds/controller.ts). */
export interface RelatedWiring {
  /** Metadata-only access to each resource. */
  readonly apis: ResourceApis;
  readonly informers: InformerCache<LabelledObject>;
  readonly options: { readonly fieldManager: string; readonly watchTimeoutSeconds: number };
  readonly log: Logger;
  readonly metrics?: Metrics | undefined;
  readonly events?: LabellerEvents | undefined;
  /** Told when a list or watch finds its resource not served (404: its CRD removed), so discovery is asked again and what reads it stops. */
  readonly notServed?: (() => void) | undefined;
  /** Set when replicas share the work: each cache keeps this member's share (shard/shard.ts). */
  readonly shard?: Shard | undefined;
}

/** What a cache acquired here lists and watches: a resource in a namespace ('' for all), maybe one object by name. */
export interface RelatedRead {
  readonly resource: ApiResource;
  readonly namespace: string;
  /** Set when it watches one object (metadata.name=…): RBAC may grant it by resourceNames. */
  readonly name: string | undefined;
}

interface Related {
  readonly informer: Informer<LabelledObject>;
  /** Set when acquired here; a labelled kind's own informer is only offered. */
  readonly handle?: InformerHandle<LabelledObject>;
  /** Set when acquired here. */
  readonly read?: RelatedRead;
  /** The mappers subscribed to it here, ended when it is released. */
  readonly unsubscribe: (() => void)[];
}

/** What the caches made here keep of each object: the annotations templates read of related objects, and controller references when chains run through them. */
export interface RelatedProjection {
  readonly annotations: ReadonlySet<string>;
  /** Keeps each object's controller reference and indexes by it, for root.*: an index made by `index`. */
  readonly index: (() => StoreIndex<LabelledObject>) | undefined;
  /** Kept whole on every shard member: objects of any namespace may read it (a PV's claim). */
  readonly unsplit?: boolean | undefined;
  /** Fields outside the metadata its objects are projected to (a reverse reference's): watched whole. */
  readonly fields?: readonly ObjectField[] | undefined;
  /** An index of its objects by what they name by reference. */
  readonly byReference?: (() => StoreIndex<LabelledObject>) | undefined;
}

export class RelatedInformers {
  readonly #wiring: RelatedWiring;
  readonly #unreadable: UnreadableKinds;
  readonly #related = new Map<string, Related>();

  constructor(wiring: RelatedWiring, unreadable: UnreadableKinds) {
    this.#wiring = wiring;
    this.#unreadable = unreadable;
  }

  get(id: string): Informer<LabelledObject> | undefined {
    return this.#related.get(id)?.informer;
  }

  /** Offers a labelled kind's own informer to lookups of `id`; one already there keeps serving them. */
  offer(id: string, informer: Informer<LabelledObject>): void {
    if (!this.#related.has(id)) this.#related.set(id, { informer, unsubscribe: [] });
  }

  /** Withdraws the informers offered from `informers` (their kind is stopping). */
  withdraw(informers: ReadonlySet<Informer<LabelledObject>>): void {
    for (const [id, related] of this.#related) {
      if (!related.handle && informers.has(related.informer)) this.#related.delete(id);
    }
  }

  /**
   * The cache `id` of `resource` in `namespace` ('' for all): the one there, or one acquired now,
   * on which `setUp` subscribes its mappers (ended at release).
   */
  ensure(
    id: string,
    resource: ApiResource,
    namespace: string,
    fieldSelector: string | undefined,
    projection: RelatedProjection,
    setUp: (informer: Informer<LabelledObject>, byOwner: StoreIndex<LabelledObject> | undefined) => (() => void)[],
  ): Informer<LabelledObject> {
    const known = this.#related.get(id);
    if (known) return known.informer;
    const { apis, informers, options, events, metrics, notServed, shard, log } = this.#wiring;
    const byOwner = projection.index?.();
    const byReference = projection.byReference?.();
    const fields = projection.fields ?? [];
    const annotations = [...projection.annotations].sort().join(',');
    const handle = informers.acquire(
      `related ${id} ${annotations} ${byOwner ? 'owners' : ''}`,
      () =>
        new Informer<LabelledObject>({
          name: id,
          api: apis(resource, namespace, fields.length > 0),
          project: projector({
            fieldManager: options.fieldManager,
            read: projection.annotations,
            owners: byOwner !== undefined,
            fields,
          }),
          indexes: [...(byOwner ? [byOwner] : []), ...(byReference ? [byReference] : [])],
          watch: { fieldSelector, watchTimeoutSeconds: options.watchTimeoutSeconds },
          partition: projection.unsplit ? undefined : shard?.partition(resource, 'related'),
          metrics: metrics?.informer(id),
          onWatchError: (error) => {
            events?.forKind(id, { apiVersion: apiVersion(resource), kind: resource.kind }).watchFailed(error);
            if (isNotFound(error)) notServed?.();
            if (!isForbidden(error)) return;
            this.#unreadable.report(id, 'forbidden', 'related objects may not be read', {
              resource: id,
              hint: `grant list and watch on ${groupResource(resource)}`,
            }, error);
          },
          log: log.child({ kind: resource.kind, controller: id }),
        }),
    );
    // The index of a cache acquired before is its own.
    const index = byOwner && (handle.informer.store.index(byOwner.name) ?? byOwner);
    const name = fieldSelector?.match(/^metadata\.name=([^,]+)$/)?.[1];
    this.#related.set(id, {
      informer: handle.informer,
      handle,
      read: { resource, namespace, name },
      unsubscribe: setUp(handle.informer, index),
    });
    return handle.informer;
  }

  /** What the caches acquired here read (a labelled kind's own informers are its kind's). */
  reads(): RelatedRead[] {
    return [...this.#related.values()].flatMap(({ read }) => (read ? [read] : []));
  }

  /** Releases the caches acquired here whose ids `matches`; answers them. */
  releaseWhere(matches: (id: string) => boolean): Informer<LabelledObject>[] {
    const released: Informer<LabelledObject>[] = [];
    for (const [id, { handle, unsubscribe, informer }] of this.#related) {
      if (!handle || !matches(id)) continue;
      for (const stop of unsubscribe) stop();
      void handle.release();
      this.#related.delete(id);
      released.push(informer);
    }
    return released;
  }

  /** The caches acquired here that have not listed, or whose watch is down: reported, not blocking readiness. */
  notes(): string[] {
    return [...this.#related.values()].flatMap(({ informer, handle }) => {
      const problem = handle && informer.problem;
      return problem ? [`${informer.name} (read by templates): ${problem}`] : [];
    });
  }
}
