// The chart's RBAC as its test files check it: rules as rendered, a release's ServiceAccount and
// RBAC applied for real with a kubeconfig holding the ServiceAccount's token, and what that
// identity may do, asked of the API server.
import assert from 'node:assert/strict';
import { create, createNamespace, labelsOf, serviceAccountKubeconfig } from './cluster.ts';
import {
  type Access,
  accessReview,
  apply,
  containers,
  deleteAfter,
  describeAccess,
  flagValue,
  type Manifest,
  only,
  render,
} from './helm.ts';

export const LABELLER_VERBS = ['list', 'watch', 'patch'];

export interface Rule {
  readonly apiGroups: string[];
  readonly resources: string[];
  readonly resourceNames?: string[];
  readonly verbs: string[];
}
export const rulesOf = (role: Manifest) => role['rules'] as Rule[];
/** labeller's own verbs on resources of one group. */
export const grant = (group: string, ...resources: string[]): Rule => ({
  apiGroups: [group],
  resources,
  verbs: LABELLER_VERBS,
});
/** Read access to related objects templates read. */
export const read = (group: string, ...resources: string[]): Rule => ({
  apiGroups: [group],
  resources,
  verbs: ['list', 'watch'],
});
/** Kubernetes Events: create a series' Event, patch its count. */
export const EVENTS_RULE: Rule = { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] };
export const EVENTS_VERBS = EVENTS_RULE.verbs;
/** The field-manager guard looks for other labellers' Leases in every namespace. */
export const GUARD_RULE: Rule = { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['list'] };
/** Sharded: the namespaces' names, which the oldest member lays the buckets out over. */
export const SHARD_LAYOUT_RULE: Rule = { apiGroups: [''], resources: ['namespaces'], verbs: ['list'] };

/** --admission-policies: server-side apply creates and changes the release's policies and bindings; those the config no longer renders are listed and deleted. */
export const ADMISSION_POLICIES_RULE: Rule = {
  apiGroups: ['admissionregistration.k8s.io'],
  resources: ['mutatingadmissionpolicies', 'mutatingadmissionpolicybindings'],
  verbs: ['list', 'create', 'patch', 'delete'],
};
/** protect: the ValidatingAdmissionPolicies, with the same rights. */
export const PROTECTION_RULE: Rule = {
  ...ADMISSION_POLICIES_RULE,
  resources: ['validatingadmissionpolicies', 'validatingadmissionpolicybindings'],
};
/** The policies depend on the release's ClusterRole `name` for them: get, for its uid. */
export const ownerRule = (name: string): Rule => ({
  apiGroups: ['rbac.authorization.k8s.io'],
  resources: ['clusterroles'],
  resourceNames: [name],
  verbs: ['get'],
});
/** --policy-reports: server-side apply creates and changes the reports, those with nothing to say are listed and deleted; get and watch for readers with the role's rights. */
export const POLICY_REPORTS_RULE: Rule = {
  apiGroups: ['wgpolicyk8s.io'],
  resources: ['policyreports', 'clusterpolicyreports'],
  verbs: ['create', 'get', 'list', 'watch', 'patch', 'delete'],
};
/** A policy whose params are ConfigMaps may be created only by who may get every ConfigMap. */
export const POLICY_PARAMS_RULE: Rule = { apiGroups: [''], resources: ['configmaps'], verbs: ['get'] };

const RBAC_KINDS = new Set(['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding']);

/** Renders a release into a fresh namespace, applies its ServiceAccount and RBAC, and returns a kubeconfig with the ServiceAccount's token. */
export async function installRbac(prefix: string, values: object) {
  const namespace = await createNamespace(`${prefix}-rel`);
  const manifests = await render({ release: namespace, namespace, values });
  deleteAfter(manifests);
  await apply(manifests.filter((m) => RBAC_KINDS.has(m.kind)));
  const deployment = only(manifests, 'Deployment');
  // The Deployment's: with admissionPolicies, the admission test has a ServiceAccount of its own.
  const account = (deployment['spec'] as { template: { spec: { serviceAccountName: string } } }).template.spec
    .serviceAccountName;
  const kubeconfig = await serviceAccountKubeconfig(namespace, account);
  const leaseName = flagValue(containers(deployment)[0]?.args ?? [], '--leader-elect-resource-name') ?? '';
  return { namespace, manifests, kubeconfig, leaseName };
}

/**
 * The label a test file puts on the objects it makes, and its selector: other test files share
 * the cluster, so a cluster-wide labeller selects only its own file's objects.
 */
export function ownLabel(file: string) {
  return { labels: { 'e2e.labeller/chart': file }, selector: `e2e.labeller/chart=${file}` };
}

export async function createConfigMap(namespace: string, name: string, labels: Record<string, string>): Promise<void> {
  await create(`/api/v1/namespaces/${namespace}/configmaps`, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, labels },
    data: { key: 'value' },
  });
}

export async function createDeployment(namespace: string, name: string, labels: Record<string, string>): Promise<void> {
  const app = { app: name };
  await create(`/apis/apps/v1/namespaces/${namespace}/deployments`, {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, labels: { ...app, ...labels } },
    spec: {
      selector: { matchLabels: app },
      template: { metadata: { labels: app }, spec: { containers: [{ name, image: 'nginx' }] } },
    },
  });
}

/** Whether the object at `path` carries every label of `expected`. */
export async function labelled(path: string, expected: Record<string, string>): Promise<boolean> {
  const labels = await labelsOf(path);
  return Object.entries(expected).every(([key, value]) => labels[key] === value);
}

/** Asserts that the identity of `kubeconfig` may do each of `allowed` and none of `denied`. */
export async function assertAccess(
  kubeconfig: string,
  allowed: readonly Access[],
  denied: readonly Access[],
): Promise<void> {
  const answers = await accessReview(kubeconfig, [...allowed, ...denied]);
  const wrong = [
    ...allowed.filter((a) => !answers.get(a)).map((a) => `denied but needed: ${describeAccess(a)}`),
    ...denied.filter((a) => answers.get(a)).map((a) => `allowed but not needed: ${describeAccess(a)}`),
  ];
  assert.deepEqual(wrong, []);
}

export const each = (verbs: readonly string[], access: Omit<Access, 'verb'>): Access[] =>
  verbs.map((verb) => ({ verb, ...access }));
