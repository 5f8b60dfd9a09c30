// The admission path in the chaos harness (--admission-policies): the rights labeller's policies
// need, and what an operator does to them behind its back. Written from the names and labels
// docs/operations.md gives the policies, not from labeller's renderer.
import { createHash } from 'node:crypto';
import type { Cluster, PolicyRule } from '../cluster/cluster.ts';
import { isNotFound } from '../../src/apimachinery/errors.ts';

const API = '/apis/admissionregistration.k8s.io/v1';
const RESOURCES = ['mutatingadmissionpolicies', 'mutatingadmissionpolicybindings'] as const;
/** The labels of the policies and bindings of labeller's default field manager. */
const SELECTOR = 'app.kubernetes.io/managed-by=labeller,labeller/field-manager=labeller';
/**
 * The ConfigMaps entry's policy and binding, `<field manager>-<kind>-<hash>`, the hash the first 8
 * hex digits of the SHA-256 of `["<field manager>","<kind>"]`: the harness creates ConfigMaps.
 */
const CONFIGMAPS = `labeller-configmaps-${
  createHash('sha256').update(JSON.stringify(['labeller', 'configmaps'])).digest('hex').slice(0, 8)
}`;

/** What --admission-policies needs on its policies and bindings: server-side apply creates and changes, the rest listed and deleted. */
export const POLICY_RULE: PolicyRule = {
  apiGroups: ['admissionregistration.k8s.io'],
  resources: RESOURCES,
  verbs: ['list', 'create', 'patch', 'delete'],
};

/** Whether the API server serves MutatingAdmissionPolicies v1 (Kubernetes 1.36 and later). */
export async function servesPolicies(cluster: Cluster): Promise<boolean> {
  const group = await cluster.get<{ resources: { name: string }[] }>(API).catch(() => ({ resources: [] }));
  return group.resources.some((r) => r.name === RESOURCES[0]);
}

/** Deletes labeller's policies and bindings, mutating and protecting, as `kubectl delete … -l` would: bindings first. */
export async function removePolicies(cluster: Cluster): Promise<void> {
  const protecting = ['validatingadmissionpolicybindings', 'validatingadmissionpolicies'];
  for (const resource of [...protecting, ...[...RESOURCES].reverse()]) {
    await cluster.client.json('DELETE', `${API}/${resource}`, { query: { labelSelector: SELECTOR } });
  }
}

/**
 * What an operator does to the ConfigMaps policy: deletes it, deletes its binding, or edits its
 * CEL into one that sets a key of another domain only (none of the scenario's keys, nor the
 * marker: a value of a scenario key set that way would be the operator's, which labeller leaves).
 */
export type Tamper = 'delete' | 'unbind' | 'edit';

/** The key the edited policy sets instead. */
export const TAMPERED_KEY = 'tampered.example.com/by';

/** Tampers with the ConfigMaps policy; false when there was none to tamper with (the config renders none, or it is gone already). */
export async function tamper(cluster: Cluster, how: Tamper): Promise<boolean> {
  const [policies, bindings] = RESOURCES;
  try {
    if (how === 'edit') {
      await cluster.client.json('PATCH', `${API}/${policies}/${CONFIGMAPS}`, {
        headers: { 'content-type': 'application/json-patch+json' },
        body: JSON.stringify([{
          op: 'replace',
          path: '/spec/mutations/0/applyConfiguration/expression',
          value: `Object{metadata: Object.metadata{labels: {"${TAMPERED_KEY}": "operator"}}}`,
        }]),
      });
    } else {
      await cluster.delete(`${API}/${how === 'delete' ? policies : bindings}/${CONFIGMAPS}`);
    }
    return true;
  } catch (error) {
    if (isNotFound(error)) return false;
    throw error;
  }
}
