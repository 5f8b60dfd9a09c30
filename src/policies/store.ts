// The admission policies and bindings of one field manager on the API server: found by the labels
// they carry (admission/names.ts), server-side applied under the field manager (forced: they are
// labeller's own objects, and a field another manager changed goes back to the config's), and
// deleted. Metadata-only reads: the names, uids and versions are all that is compared.
import { POLICY_RESOURCES } from '../admission/resources.ts';
import type { AdmissionPolicy, AdmissionPolicyBinding } from '../admission/policy.ts';
import { policySelector } from '../admission/names.ts';
import { MetadataApi } from '../kube/api.ts';
import type { KubeClient } from '../kube/client.ts';
import type { PartialObjectMetadata } from '../kube/objects.ts';
import type { Logger } from '../util/log.ts';

/** A policy or binding as rendered. */
export type PolicyObject = AdmissionPolicy | AdmissionPolicyBinding;

/** One of labeller's policies or bindings found on the API server. */
export interface PolicyOnServer {
  readonly kind: PolicyObject['kind'];
  readonly name: string;
  readonly uid: string | undefined;
}

/** How people and logs name a policy or binding: `MutatingAdmissionPolicy labeller-pods`. */
export function describePolicy(object: Pick<PolicyOnServer, 'kind' | 'name'>): string {
  return `${object.kind} ${object.name}`;
}

export class PolicyStore {
  readonly fieldManager: string;
  readonly #apis: Readonly<Record<PolicyObject['kind'], MetadataApi>>;

  constructor(client: KubeClient, fieldManager: string) {
    const [policies, bindings] = POLICY_RESOURCES;
    this.fieldManager = fieldManager;
    this.#apis = {
      MutatingAdmissionPolicy: new MetadataApi(client, policies),
      MutatingAdmissionPolicyBinding: new MetadataApi(client, bindings),
    };
  }

  /** The field manager's policies and bindings on the API server: bindings first, the order they are deleted in. */
  async list(signal?: AbortSignal): Promise<PolicyOnServer[]> {
    const found: PolicyOnServer[] = [];
    for (const kind of ['MutatingAdmissionPolicyBinding', 'MutatingAdmissionPolicy'] as const) {
      let page: string | undefined;
      do {
        const list = await this.#apis[kind].list({
          labelSelector: policySelector(this.fieldManager),
          limit: 500,
          continue: page,
          signal,
        });
        for (const { metadata } of list.items) found.push({ kind, name: metadata.name, uid: metadata.uid });
        page = list.metadata.continue || undefined;
      } while (page);
    }
    return found;
  }

  /** Applies `object` (or, with `dryRun`, has the API server check it and write nothing); answers its metadata. */
  apply(
    object: PolicyObject,
    options: { readonly dryRun: boolean; readonly signal?: AbortSignal },
  ): Promise<PartialObjectMetadata> {
    return this.#apis[object.kind].apply(object, {
      fieldManager: this.fieldManager,
      force: true,
      dryRun: options.dryRun,
      signal: options.signal,
    });
  }

  /**
   * Deletes the field manager's policies and bindings but those `kept` (as describePolicy names
   * them), bindings first, so that none is left naming a policy gone; each is logged with `why`.
   * With `dryRun`, only logs what it would delete. Answers what it deleted (or would).
   */
  async prune(
    kept: ReadonlySet<string>,
    options: { readonly dryRun: boolean; readonly why: string; readonly log: Logger; readonly signal?: AbortSignal },
  ): Promise<PolicyOnServer[]> {
    const { dryRun, why, log, signal } = options;
    const deleted: PolicyOnServer[] = [];
    for (const object of await this.list(signal)) {
      if (kept.has(describePolicy(object))) continue;
      // The uid: an object made again since it was listed stays.
      if (!dryRun) await this.#apis[object.kind].delete(object.name, { uid: object.uid, signal });
      log.info(dryRun ? 'admission policy would be deleted (dry run)' : 'admission policy deleted', {
        kind: object.kind,
        name: object.name,
        why,
      });
      deleted.push(object);
    }
    return deleted;
  }
}
