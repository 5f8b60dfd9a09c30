// What labeller's own objects are dependents of, when they must not outlive an install: a
// cluster-scoped object that lives exactly as long as they should, such as the chart's ClusterRole
// for them (--admission-policies-owner, --policy-reports-owner). Each carries an ownerReference to
// it, so the garbage collector deletes them once it is gone: `helm uninstall`, or an upgrade that
// turns them off, removes that ClusterRole, and with it every object labeller wrote, though no
// labeller runs then to delete them. Read at every use: the reference names the owner's uid,
// which a new object of the same name does not share.
import { MetadataApi } from './api.ts';
import type { KubeClient } from './client.ts';
import type { DiscoveryCache } from './discoverycache.ts';
import { isNotFound } from '../apimachinery/errors.ts';
import type { OwnerReference } from '../apimachinery/objects.ts';
import { resolveResource } from '../apimachinery/resolve.ts';
import { apiVersion, groupResource } from '../apimachinery/resource.ts';
import { ReasonedError } from '../util/reasonederror.ts';

/** Why the dependents cannot be given their owner now: it is `missing`, or not cluster-scoped. */
export class OwnerUnavailable extends ReasonedError<'missing' | 'namespaced'> {
  override readonly name = 'OwnerUnavailable';
}

/** What depends on the owner, for messages: 'policies' and 'applied', or 'policy reports' and 'written'. */
export interface Dependents {
  readonly what: string;
  readonly done: string;
  /** The chart value that makes the owner: `admissionPolicies.enabled`. */
  readonly chartValue: string;
}

export class ClusterOwner {
  /** As given: `<resource>/<name>`, kubectl-style (`clusterrole/labeller-admission-policies`). */
  readonly spec: string;
  readonly #client: KubeClient;
  readonly #discovery: DiscoveryCache;
  readonly #dependents: Dependents;

  constructor(client: KubeClient, discovery: DiscoveryCache, spec: string, dependents: Dependents) {
    this.spec = spec;
    this.#client = client;
    this.#discovery = discovery;
    this.#dependents = dependents;
  }

  /** The ownerReference to the owner as it is now; throws OwnerUnavailable, or the API error. */
  async reference(signal: AbortSignal): Promise<OwnerReference> {
    const { what, done, chartValue } = this.#dependents;
    const at = this.spec.indexOf('/');
    const resource = resolveResource(this.spec.slice(0, at), this.#discovery.resources, ['get']);
    if (resource.namespaced) {
      throw new OwnerUnavailable(
        'namespaced',
        `${this.spec}: ${
          groupResource(resource)
        } are namespaced, and the ${what} can only depend on a cluster-scoped object; name a ClusterRole, say`,
      );
    }
    const name = this.spec.slice(at + 1);
    try {
      const { metadata } = await new MetadataApi(this.#client, resource).get(name, { signal });
      return { apiVersion: apiVersion(resource), kind: resource.kind, name, uid: metadata.uid };
    } catch (error) {
      if (!isNotFound(error)) throw error;
      throw new OwnerUnavailable(
        'missing',
        `${this.spec} does not exist: ${what} depending on it would be garbage-collected at once, so none are ${done} (the chart makes it when ${chartValue})`,
      );
    }
  }
}
