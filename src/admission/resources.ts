// The resources labeller's admission policies are, at admissionregistration.k8s.io/v1: what the
// controller applies, prune deletes, status lists and the preflight asks rights on. v1 only, the
// version the renderer writes. The mutating policies (labels at create) are served from
// Kubernetes 1.36 (1.30–1.35 keep their alpha and beta versions off by default, and they may
// change), so there labeller labels after the create; the validating ones (protection) from 1.30.
import type { ApiResource } from '../apimachinery/resource.ts';
import type { AdmissionObject } from './policy.ts';

const GROUP = 'admissionregistration.k8s.io';
const VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

const resource = (plural: string, kind: AdmissionObject['kind']): ApiResource => ({
  group: GROUP,
  version: 'v1',
  resource: plural,
  singular: kind.toLowerCase(),
  kind,
  shortNames: [],
  namespaced: false,
  verbs: VERBS,
  preferred: true,
});

/** The mutating policies, then their bindings (labels at create). */
export const MUTATING: readonly [policies: ApiResource, bindings: ApiResource] = [
  resource('mutatingadmissionpolicies', 'MutatingAdmissionPolicy'),
  resource('mutatingadmissionpolicybindings', 'MutatingAdmissionPolicyBinding'),
];

/** The validating policies, then their bindings (protection). */
export const VALIDATING: readonly [policies: ApiResource, bindings: ApiResource] = [
  resource('validatingadmissionpolicies', 'ValidatingAdmissionPolicy'),
  resource('validatingadmissionpolicybindings', 'ValidatingAdmissionPolicyBinding'),
];

/** Every resource of labeller's policies, each policy resource before its bindings'. */
export const POLICY_RESOURCES: readonly ApiResource[] = [...MUTATING, ...VALIDATING];

/** The resource of a policy or binding of `kind`. */
export function resourceOf(kind: AdmissionObject['kind']): ApiResource {
  return POLICY_RESOURCES.find((r) => r.kind === kind)!;
}

/** Whether discovery says the API server serves the policies of `kind` (and so their bindings) at the version labeller renders. */
export function serves(
  resources: readonly Pick<ApiResource, 'group' | 'version' | 'resource'>[],
  kind: AdmissionObject['kind'],
): boolean {
  const wanted = resourceOf(kind);
  return resources.some((r) => r.group === GROUP && r.version === 'v1' && r.resource === wanted.resource);
}

/** Whether the API server serves the mutating policies: labels at create. */
export function servesPolicies(resources: readonly Pick<ApiResource, 'group' | 'version' | 'resource'>[]): boolean {
  return serves(resources, 'MutatingAdmissionPolicy');
}

/** Whether `kind` is a protecting (validating) policy's or binding's. */
export function isProtecting(kind: AdmissionObject['kind']): boolean {
  return kind.startsWith('Validating');
}

/** Whether `object` is a policy, not a binding. */
export function isPolicy(object: Pick<AdmissionObject, 'kind'>): boolean {
  return !object.kind.endsWith('Binding');
}

/** The name of the policy `object` is or binds. */
export function policyOf(object: AdmissionObject): string {
  return 'policyName' in object.spec ? object.spec.policyName : object.metadata.name;
}
