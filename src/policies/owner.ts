// What the admission policies are dependents of (--admission-policies-owner): a cluster-scoped
// object that lives exactly as long as the policies should, such as the chart's ClusterRole for
// them. Each policy and binding carries an ownerReference to it, so the garbage collector deletes
// them once it is gone: `helm uninstall`, or an upgrade that turns the policies off, removes that
// ClusterRole, and with it every policy the controller applied, though no labeller runs then to
// delete them. Read at every round: the reference names the owner's uid, which a new object of
// the same name does not share.
import { MetadataApi } from '../kube/api.ts';
import type { KubeClient } from '../kube/client.ts';
import type { DiscoveryCache } from '../kube/discoverycache.ts';
import { isNotFound } from '../apimachinery/errors.ts';
import type { OwnerReference } from '../apimachinery/objects.ts';
import { resolveResource } from '../apimachinery/resolve.ts';
import { apiVersion, groupResource } from '../apimachinery/resource.ts';
import { ReasonedError } from '../util/reasonederror.ts';

/** Why the policies cannot be given their owner now: it is `missing`, or not cluster-scoped. */
export class OwnerUnavailable extends ReasonedError<'missing' | 'namespaced'> {
  override readonly name = 'OwnerUnavailable';
}

export class PolicyOwner {
  /** As given: `<resource>/<name>`, kubectl-style (`clusterrole/labeller-admission-policies`). */
  readonly spec: string;
  readonly #client: KubeClient;
  readonly #discovery: DiscoveryCache;

  constructor(client: KubeClient, discovery: DiscoveryCache, spec: string) {
    this.spec = spec;
    this.#client = client;
    this.#discovery = discovery;
  }

  /** The ownerReference to the owner as it is now; throws OwnerUnavailable, or the API error. */
  async reference(signal: AbortSignal): Promise<OwnerReference> {
    const at = this.spec.indexOf('/');
    const resource = resolveResource(this.spec.slice(0, at), this.#discovery.resources, ['get']);
    if (resource.namespaced) {
      throw new OwnerUnavailable(
        'namespaced',
        `${this.spec}: ${
          groupResource(resource)
        } are namespaced, and a cluster-scoped policy can only depend on a cluster-scoped object; name a ClusterRole, say`,
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
        `${this.spec} does not exist: policies depending on it would be garbage-collected at once, so none are applied (the chart makes it when admissionPolicies.enabled)`,
      );
    }
  }
}
