// This process's share of the work in a shard group: the membership's buckets (membership.ts) as
// partitions of each resource's cache, and as the check before each write.
//
// Objects are split by namespace: a namespace's objects, its own Namespace object, its labels and
// its owner chains stay with one member. Cluster-scoped objects of other kinds are all kept by the
// member whose buckets hold the hash of the empty namespace, and are so one member's: the API
// server's shardRange() hashes only a namespace or a uid, so a split by name could not be asked of
// the server, while these go with one namespace's worth of work; cluster-scoped kinds are few
// objects (nodes, namespaces, cluster roles) beside the namespaced ones that grow with a cluster.
// A Namespace object goes with the namespace it names; the server cannot select it (its own
// namespace is empty), so its stream is filtered here. A related cache of another cluster-scoped
// kind (an owner outside any namespace) is not split: any member may need any of it.
import type { ApiResource } from '../apimachinery/resource.ts';
import type { Added, Partition, PartitionChange } from '../runtime/partition.ts';
import type { Membership } from './membership.ts';

/** Whether `resource` is core/v1 namespaces. */
function isNamespaces(resource: Pick<ApiResource, 'group' | 'resource'>): boolean {
  return resource.group === '' && resource.resource === 'namespaces';
}

/** What a cache of `resource` is for: a labelled kind's own, or related objects templates read. */
export type CacheRole = 'kind' | 'related';

export class Shard {
  readonly membership: Membership;

  constructor(membership: Membership) {
    this.membership = membership;
  }

  /** The partition of a cache of `resource`, or undefined when each member keeps all of it. */
  partition(resource: ApiResource, role: CacheRole): Partition | undefined {
    if (role === 'related' && !resource.namespaced && !isNamespaces(resource)) return undefined;
    const byName = isNamespaces(resource);
    const membership = this.membership;
    return {
      keeps: (meta) => membership.keeps.has(membership.layout.bucketOf(byName ? meta.name : (meta.namespace ?? ''))),
      // A Namespace's own namespace is empty: the server cannot select it by the namespace it names.
      selector: () => byName ? undefined : membership.layout.selectorOf('object.metadata.namespace', membership.keeps),
      subscribe: (listener: (change: PartitionChange) => void) =>
        membership.subscribe(({ keepsGrew, keepsShrank, kept }) => {
          if (!keepsGrew && !keepsShrank) return;
          const { layout } = membership;
          const added: Added = {
            adds: (meta) => kept.has(layout.bucketOf(byName ? meta.name : (meta.namespace ?? ''))),
            selector: byName ? undefined : layout.selectorOf('object.metadata.namespace', kept),
          };
          listener(keepsGrew ? { added } : {});
        }),
    };
  }

  /** Whether a related cache of `resource` may be served by a labelled kind's partitioned cache of it. */
  sharesCaches(resource: ApiResource): boolean {
    return resource.namespaced || isNamespaces(resource);
  }

  /**
   * Claims the write of the object cached under `key` (namespace/name, or name): a release
   * function when this member writes it now, else undefined (another member's, or not yet);
   * released with `cutShort` when the write was aborted on its way.
   */
  hold(resource: ApiResource, key: string): ((cutShort?: boolean) => void) | undefined {
    return this.membership.hold(this.#bucketOf(resource, key));
  }

  /** Whether a write of the object cached under `key` may be sent now: its bucket written, the member's claim valid. */
  writing(resource: ApiResource, key: string): boolean {
    return this.membership.writing(this.#bucketOf(resource, key));
  }

  /** Aborted when this member's claim lapses: writes on the wire stop. */
  get claim(): AbortSignal {
    return this.membership.claim;
  }

  /** Whether the object cached under `key` lies in one of `buckets`. */
  within(resource: ApiResource, key: string, buckets: ReadonlySet<number>): boolean {
    return buckets.has(this.#bucketOf(resource, key));
  }

  #bucketOf(resource: ApiResource, key: string): number {
    const slash = key.indexOf('/');
    return this.membership.layout.bucketOf(isNamespaces(resource) ? key : slash < 0 ? '' : key.slice(0, slash));
  }
}
