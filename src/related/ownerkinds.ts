// The owner kinds `owner.*` and `root.*` follow: the workload controllers' chain by default, and
// what the config names in `ownerKinds`; an ownerReference to any other kind (a mirror pod's Node,
// a tenant's Secret) is not followed, so no informer is started for whatever an object points at.
// Resolved through the discovery cache, again when it changes (a CRD installed later).
import type { DiscoveryCache } from '../kube/discoverycache.ts';
import { ResolveError } from '../apimachinery/resolve.ts';
import { type ApiResource, groupResource } from '../apimachinery/resource.ts';
import type { ControllerRef } from '../labelling/object.ts';
import type { UnreadableKinds } from './unreadable.ts';

/** Owner kinds followed without being named: Pod → ReplicaSet → Deployment, StatefulSet, DaemonSet, Job → CronJob, ReplicationController. */
export const WORKLOAD_OWNERS: readonly string[] = [
  'replicasets.apps',
  'deployments.apps',
  'statefulsets.apps',
  'daemonsets.apps',
  'jobs.batch',
  'cronjobs.batch',
  'replicationcontrollers',
];

export class OwnerKinds {
  /** ownerKinds as configured. */
  readonly configured: readonly string[];
  readonly #discovery: DiscoveryCache;
  readonly #unreadable: UnreadableKinds;
  /** groupResource of every owner kind followed and served now. */
  #followed = new Set<string>();

  constructor(configured: readonly string[], discovery: DiscoveryCache, unreadable: UnreadableKinds) {
    this.configured = configured;
    this.#discovery = discovery;
    this.#unreadable = unreadable;
    this.resolve();
  }

  /** Whether `configured` (a reloaded config's) names the same kinds. */
  same(configured: readonly string[]): boolean {
    return [...configured].sort().join(',') === [...this.configured].sort().join(',');
  }

  /** Resolves the kinds followed against what discovery serves now. */
  resolve(): void {
    const followed = new Set<string>();
    for (const name of [...WORKLOAD_OWNERS, ...this.configured]) {
      try {
        followed.add(groupResource(this.#discovery.resolve(name, ['list', 'watch'])));
        this.#unreadable.readable(name);
      } catch (error) {
        // A named owner kind not served (yet) is followed once it is; a workload kind missing is no matter.
        if (!(error instanceof ResolveError) || !this.configured.includes(name)) continue;
        this.#unreadable.report(name, 'not-served', 'owner kind named in ownerKinds is not served', {
          ownerKind: name,
        }, error);
      }
    }
    this.#followed = followed;
  }

  /** The resource `ref` points into when its kind is followed and served; else undefined, reported once. */
  resource(ref: ControllerRef): ApiResource | undefined {
    const resource = this.#discovery.forKind(ref.apiVersion, ref.kind);
    const kind = `${ref.kind}.${ref.apiVersion}`;
    const at = { ownerKind: ref.kind, ownerApiVersion: ref.apiVersion };
    if (!resource) {
      this.#unreadable.report(kind, 'not-served', 'owner kind not served with list and watch', at);
      return undefined;
    }
    const name = groupResource(resource);
    if (!this.#followed.has(name)) {
      this.#unreadable.report(kind, 'not-followed', 'owner kind not followed', {
        ...at,
        hint: `add "${name}" to ownerKinds in the config (and grant list and watch on it) to read it`,
      });
      return undefined;
    }
    return resource;
  }
}
