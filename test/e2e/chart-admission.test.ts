// admissionPolicies as the chart deploys them, on a server that serves them (1.36 and later): the
// release's RBAC, used through a token of its ServiceAccount, is enough for labeller to apply its
// policies, one of them reading a ConfigMap source as its params (which the API server lets only
// whoever may get every ConfigMap create), and grants nothing more on them; the cleanup Job's own
// RBAC is enough for its prune to delete them all.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { policyName, policySelector } from '../../src/admission/names.ts';
import { Labeller, runLabeller } from '../process/labeller.ts';
import { adminClient, create, createNamespace, eventually, serviceAccountKubeconfig, skip } from './cluster.ts';
import { policiesOf } from './admission.ts';
import { assertAccess, each, installRbac } from './chart-rbac.ts';
import { apply, containers, deleteAfter, localArgs, type Manifest, only, render, tempFile } from './helm.ts';

const GROUP = 'admissionregistration.k8s.io';
const RESOURCES = ['mutatingadmissionpolicies', 'mutatingadmissionpolicybindings'];

describe('chart: admissionPolicies on the cluster', { skip }, () => {
  test("the release's RBAC applies its policies (one reading a ConfigMap as params) and nothing more; the cleanup Job's deletes them", async (t) => {
    const client = await adminClient();
    const group = await client.json<{ resources: { name: string }[] }>('GET', `/apis/${GROUP}/v1`)
      .catch(() => ({ resources: [] }));
    if (!group.resources.some((r) => r.name === 'mutatingadmissionpolicies')) {
      t.skip('the API server does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicies');
      return;
    }
    const watched = await createNamespace('chart-adm-watched');
    const platform = await createNamespace('chart-adm-platform');
    await create(`/api/v1/namespaces/${platform}/configmaps`, { metadata: { name: 'teams' }, data: { web: 'cc-7' } });
    const values = {
      labels: { 'example.com/cost-center': '{{teams[labels.app]}}', 'example.com/managed': 'labeller' },
      watchNamespaces: [watched],
      kinds: [{ resource: 'cm' }],
      sources: { teams: { configMap: { namespace: platform, name: 'teams' } } },
      leaderElection: { enabled: false },
      admissionPolicies: { enabled: true },
    };
    const { namespace, manifests, kubeconfig } = await installRbac('chart-adm', values);
    const fieldManager = namespace;
    const args = localArgs(manifests, { leaderElection: false });
    assert.ok(args.includes('--admission-policies'));
    const labeller = new Labeller(args, { kubeconfig });
    try {
      for (const name of [policyName(fieldManager, 'configmaps'), policyName(fieldManager, 'configmaps', 'teams')]) {
        await labeller.waitForLog((l) =>
          l.msg === 'admission policy applied' && l['kind'] === 'MutatingAdmissionPolicyBinding' && l['name'] === name
        );
      }
      // Both policies in force: the constant, and the cost center read from the source through the binding's paramRef.
      let probes = 0;
      const created = await eventually(async () => {
        const probe = await create<{ metadata: { labels?: Record<string, string> } }>(
          `/api/v1/namespaces/${watched}/configmaps`,
          { metadata: { name: `web-${probes++}`, labels: { app: 'web' } } },
        );
        return probe.metadata.labels?.['example.com/cost-center'] !== undefined && probe;
      }, 'the policies in force');
      assert.deepEqual(created.metadata.labels, {
        app: 'web',
        'example.com/cost-center': 'cc-7',
        'example.com/managed': 'labeller',
      });
      assert.deepEqual(
        labeller.logs.filter((l) => l.msg.startsWith('admission policy refused') || /forbidden|\b403\b/i.test(l.msg)),
        [],
      );
    } finally {
      const exit = await labeller.stop();
      assert.equal(exit.code, 0, exit.stderr);
    }
    assert.deepEqual(await policiesOf(fieldManager), [
      ...['mutatingadmissionpolicies', 'mutatingadmissionpolicybindings'].flatMap((resource) =>
        [policyName(fieldManager, 'configmaps'), policyName(fieldManager, 'configmaps', 'teams')].sort().map((name) =>
          `${resource}/${name}`
        )
      ),
    ]);
    // They depend on the release's ClusterRole for them: the garbage collector removes them with it
    // (admission-owner-realshapes.test.ts), on uninstall or when an upgrade turns them off.
    const owner = manifests.find((m) => m.kind === 'ClusterRole' && m.metadata.name.endsWith('-admission-policies'))!
      .metadata.name;
    assert.ok(args.includes(`--admission-policies-owner=clusterroles.rbac.authorization.k8s.io/${owner}`));
    for (const resource of RESOURCES) {
      const list = await client.json<{ items: { metadata: { ownerReferences?: unknown[] } }[] }>(
        'GET',
        `/apis/${GROUP}/v1/${resource}`,
        { query: { labelSelector: policySelector(fieldManager) } },
      );
      const role = await client.json<{ metadata: { uid: string } }>(
        'GET',
        `/apis/rbac.authorization.k8s.io/v1/clusterroles/${owner}`,
      );
      for (const item of list.items) {
        assert.deepEqual(item.metadata.ownerReferences, [{
          apiVersion: 'rbac.authorization.k8s.io/v1',
          kind: 'ClusterRole',
          name: owner,
          uid: role.metadata.uid,
        }]);
      }
    }
    const policies = (verbs: readonly string[]) =>
      RESOURCES.flatMap((resource) => each(verbs, { group: GROUP, resource }));
    const roles = { group: 'rbac.authorization.k8s.io', resource: 'clusterroles' };
    await assertAccess(
      kubeconfig,
      [
        ...policies(['list', 'create', 'patch', 'delete']),
        { verb: 'get', resource: 'configmaps' },
        { verb: 'get', ...roles, name: owner },
      ],
      [
        ...policies(['get', 'watch', 'update', 'deletecollection']),
        { verb: 'list', resource: 'configmaps' },
        { verb: 'get', ...roles, name: `${owner}-other` },
      ],
    );

    // The cleanup Job, with its own ServiceAccount and RBAC (hooks, applied here by hand), prunes them.
    const withCleanup = await render({
      release: namespace,
      namespace,
      values: { ...values, cleanupOnUninstall: true },
    });
    const hooks = withCleanup.filter((m: Manifest) =>
      /^(ServiceAccount|(Cluster)?Role(Binding)?)$/.test(m.kind) && m.metadata.name.includes('-cleanup')
    );
    deleteAfter(hooks);
    await apply(hooks);
    const job = only(withCleanup, 'Job');
    const cleanup = await serviceAccountKubeconfig(
      namespace,
      (job['spec'] as { template: { spec: { serviceAccountName: string } } }).template.spec.serviceAccountName,
    );
    const cleanupConfig = withCleanup.find((m) => m.kind === 'ConfigMap' && m.metadata.name.endsWith('-cleanup'));
    const config = tempFile('kinds.yaml', (cleanupConfig?.['data'] as Record<string, string>)['kinds.yaml'] ?? '');
    const pruneArgs = (containers(job)[0]?.args ?? []).filter((a) => !a.startsWith('--log-format'))
      .map((a) => (a.startsWith('--config=') ? `--config=${config}` : a));
    assert.ok(pruneArgs.includes('--admission-policies'));
    const pruned = await runLabeller(pruneArgs, { kubeconfig: cleanup });
    assert.equal(pruned.code, 0, pruned.stderr);
    assert.deepEqual(await policiesOf(fieldManager), []);
  });
});
