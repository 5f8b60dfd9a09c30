// The two resources the policies are, at admissionregistration.k8s.io/v1: what the controller
// applies, prune deletes, status lists and the preflight asks rights on. v1 only, the version the
// renderer writes: Kubernetes 1.36 serves it on by default, 1.30–1.35 do not (their alpha and beta
// versions are off by default, and may change), so there labeller runs as the controller alone.
import type { ApiResource } from '../kube/resource.ts';

const GROUP = 'admissionregistration.k8s.io';
const VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

const resource = (plural: string, kind: string): ApiResource => ({
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

/** The policies, then their bindings: applied in this order, each policy before the binding that names it. */
export const POLICY_RESOURCES: readonly [policies: ApiResource, bindings: ApiResource] = [
  resource('mutatingadmissionpolicies', 'MutatingAdmissionPolicy'),
  resource('mutatingadmissionpolicybindings', 'MutatingAdmissionPolicyBinding'),
];

/** Whether discovery says the API server serves the policies at the version labeller renders. */
export function servesPolicies(resources: readonly Pick<ApiResource, 'group' | 'version' | 'resource'>[]): boolean {
  const [policies] = POLICY_RESOURCES;
  return resources.some((r) => r.group === GROUP && r.version === 'v1' && r.resource === policies.resource);
}
