import assert from 'node:assert/strict';
import { test } from 'node:test';
import { load, loadAll } from 'js-yaml';
import { rbacFor, subjectOf } from './rbac.ts';

test('rbacFor: a ClusterRole for cluster-wide rights, a Role per namespace, verbs merged per resource and name, bound to the ServiceAccount', () => {
  const yaml = rbacFor(
    [
      { group: '', resource: 'configmaps', verbs: ['watch'], namespace: 'shop', for: 'kind configmaps' },
      { group: '', resource: 'configmaps', verbs: ['patch'], namespace: 'shop', for: 'kind configmaps' },
      { group: '', resource: 'configmaps', verbs: ['list'], namespace: 'ops', name: 'teams', for: 'source catalog' },
      { group: 'coordination.k8s.io', resource: 'leases', verbs: ['list'], namespace: '', for: 'field-manager guard' },
    ],
    subjectOf('system:serviceaccount:ops:labeller'),
    'labeller-preflight',
  );
  const documents = loadAll(yaml) as { kind: string; metadata: { namespace?: string }; rules?: unknown }[];
  assert.deepEqual(documents.map((d) => `${d.kind}@${d.metadata.namespace ?? '*'}`), [
    'ClusterRole@*',
    'ClusterRoleBinding@*',
    'Role@ops',
    'RoleBinding@ops',
    'Role@shop',
    'RoleBinding@shop',
  ]);
  assert.deepEqual(documents[4]!.rules, [{ apiGroups: [''], resources: ['configmaps'], verbs: ['patch', 'watch'] }]);
  assert.deepEqual(documents[2]!.rules, [{
    apiGroups: [''],
    resources: ['configmaps'],
    resourceNames: ['teams'],
    verbs: ['list'],
  }]);
  assert.deepEqual((documents[1] as unknown as { subjects: unknown }).subjects, [
    { kind: 'ServiceAccount', name: 'labeller', namespace: 'ops' },
  ]);
  const user = load(
    rbacFor([{ group: '', resource: 'pods', verbs: ['list'], namespace: '', for: 'kind pods' }], {
      kind: 'User',
      name: 'jane@example.com',
    }, 'x').split('---\n')[2]!,
  ) as { subjects: unknown };
  assert.deepEqual(user.subjects, [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'jane@example.com' }]);
});
