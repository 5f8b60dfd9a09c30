// The admission policies and bindings of one field manager on the API server, mutating and
// validating: found by the labels they carry (admission/names.ts), server-side applied under the
// field manager (forced: they are labeller's own objects, and a field another manager changed
// goes back to the config's), and deleted. Metadata-only reads: the names, uids and versions are
// all that is compared.
import { POLICY_RESOURCES, resourceOf } from '../admission/resources.ts';
import type { AdmissionObject } from '../admission/policy.ts';
import type { ProtectionPolicyBinding } from '../admission/protection.ts';
import { policySelector } from '../admission/names.ts';
import { MetadataApi } from '../kube/api.ts';
import { isForbidden } from '../apimachinery/errors.ts';
import type { KubeClient } from '../kube/client.ts';
import type { ApplyConfiguration, PartialObjectMetadata } from '../apimachinery/objects.ts';
import type { Logger } from '../util/log.ts';

/** A policy or binding as rendered. */
export type PolicyObject = AdmissionObject;

/** Which kinds of policies and bindings to look at: those served, and those that may be forbidden. */
export interface PolicyKinds {
  readonly served: (kind: PolicyObject['kind']) => boolean;
  /** Kinds whose list a 403 may answer: none of them is then found. */
  readonly optional?: ((kind: PolicyObject['kind']) => boolean) | undefined;
}

/** The kinds of policies and bindings, bindings first: the order they are deleted in. */
const DELETE_ORDER: readonly PolicyObject['kind'][] = POLICY_RESOURCES.map((r) => r.kind as PolicyObject['kind'])
  .sort((a, b) => Number(b.endsWith('Binding')) - Number(a.endsWith('Binding')));

/** One of labeller's policies or bindings found on the API server. */
export interface PolicyOnServer {
  readonly kind: PolicyObject['kind'];
  readonly name: string;
  readonly uid: string | undefined;
  readonly resourceVersion: string | undefined;
}

/** How people and logs name a policy or binding: `MutatingAdmissionPolicy labeller-pods`. */
export function describePolicy(object: Pick<PolicyOnServer, 'kind' | 'name'>): string {
  return `${object.kind} ${object.name}`;
}

export class PolicyStore {
  readonly fieldManager: string;
  readonly #client: KubeClient;
  readonly #apis: Readonly<Record<PolicyObject['kind'], MetadataApi>>;

  constructor(client: KubeClient, fieldManager: string) {
    const api = (kind: PolicyObject['kind']) => new MetadataApi(client, resourceOf(kind));
    this.fieldManager = fieldManager;
    this.#client = client;
    this.#apis = {
      MutatingAdmissionPolicy: api('MutatingAdmissionPolicy'),
      MutatingAdmissionPolicyBinding: api('MutatingAdmissionPolicyBinding'),
      ValidatingAdmissionPolicy: api('ValidatingAdmissionPolicy'),
      ValidatingAdmissionPolicyBinding: api('ValidatingAdmissionPolicyBinding'),
    };
  }

  /**
   * The field manager's policies and bindings on the API server, of the kinds `kinds.served`
   * says the API server serves: bindings first, the order they are deleted in. A kind this
   * identity may not list is a failure, but for the kinds `kinds.optional` names (the protecting
   * policies of a labeller that protects nothing: the chart grants no rights on them then).
   */
  async list(kinds: PolicyKinds, signal?: AbortSignal): Promise<PolicyOnServer[]> {
    const found: PolicyOnServer[] = [];
    for (const kind of DELETE_ORDER.filter(kinds.served)) {
      let page: string | undefined;
      try {
        do {
          const list = await this.#apis[kind].list({
            labelSelector: policySelector(this.fieldManager),
            limit: 500,
            continue: page,
            signal,
          });
          for (const { metadata } of list.items) {
            found.push({ kind, name: metadata.name, uid: metadata.uid, resourceVersion: metadata.resourceVersion });
          }
          page = list.metadata.continue || undefined;
        } while (page);
      } catch (error) {
        if (!isForbidden(error) || !kinds.optional?.(kind)) throw error;
      }
    }
    return found;
  }

  /**
   * What each protecting policy's binding has the API server do (its validationActions, as
   * protect modes: deny, warn, audit), by the policy it binds. Read whole: the metadata does not say.
   */
  async protectionModes(signal?: AbortSignal): Promise<Map<string, string>> {
    const bindings = this.#apis.ValidatingAdmissionPolicyBinding;
    const list = await this.#client.json<{ items: ProtectionPolicyBinding[] }>('GET', bindings.path(), {
      query: { labelSelector: policySelector(this.fieldManager) },
      signal,
    });
    return new Map(
      list.items.map((binding) => [
        binding.spec.policyName,
        binding.spec.validationActions.map((action) => action.toLowerCase()).join('+'),
      ]),
    );
  }

  /**
   * Applies `object` (or, with `dryRun`, has the API server check it and write nothing); answers
   * its metadata. With `resourceVersion`, only over that version: a 409 Conflict when the object
   * changed since (the fence against a write that lands late, after another's).
   */
  apply(
    object: PolicyObject,
    options: { readonly dryRun: boolean; readonly signal?: AbortSignal; readonly resourceVersion?: string | undefined },
  ): Promise<PartialObjectMetadata> {
    const { resourceVersion } = options;
    const fenced: ApplyConfiguration = resourceVersion === undefined
      ? object
      : { ...object, metadata: { ...object.metadata, resourceVersion } };
    return this.#apis[object.kind].apply(fenced, {
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
    options: {
      readonly kinds: PolicyKinds;
      readonly dryRun: boolean;
      readonly why: string;
      readonly log: Logger;
      readonly signal?: AbortSignal;
    },
  ): Promise<PolicyOnServer[]> {
    const { kinds, dryRun, why, log, signal } = options;
    const deleted: PolicyOnServer[] = [];
    for (const object of await this.list(kinds, signal)) {
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
