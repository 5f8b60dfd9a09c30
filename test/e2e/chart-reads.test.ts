// The chart's read grants for related objects: derived from every template labeller renders for a
// kind (labels and annotations, global and the kind's own), wherever a relation appears in one:
// the whole variable, after text, before a default, or as a source lookup's key. Rendered, then
// used against the API server: labeller with the chart's RBAC sets a label and an annotation
// that read the namespace only through a lookup's key and an annotation.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { adminClient, create, createNamespace, eventually, patchLabels, skip } from './cluster.ts';
import { createConfigMap, grant, installRbac, labelled, ownLabel, read, type Rule, rulesOf } from './chart-rbac.ts';
import { localArgs, type Manifest, only, render } from './helm.ts';
import { Labeller } from '../process/labeller.ts';

const SOURCES = { teams: { configMap: { namespace: 'platform', name: 'teams', key: 'teams.yaml' } } };
/** The read rules of a ClusterRole: those without patch. */
const reads = (role: Manifest): Rule[] => rulesOf(role).filter((r) => !r.verbs.includes('patch'));
const clusterReads = async (values: object) =>
  reads(only(await render({ values: { events: { enabled: false }, ...values } }), 'ClusterRole')).filter((r) =>
    r.apiGroups[0] !== 'coordination.k8s.io'
  );
const WORKLOAD_CHAIN = [
  read('', 'replicationcontrollers'),
  read('apps', 'daemonsets', 'deployments', 'replicasets', 'statefulsets'),
  read('batch', 'cronjobs', 'jobs'),
];

describe('chart: read grants from every template', () => {
  test('a relation read by an annotation, global or the kind’s own, is granted', async () => {
    assert.deepEqual(
      await clusterReads({
        labels: { a: 'b' },
        annotations: { 'example.com/team': '{{namespace.labels.team}}' },
        kinds: [{ resource: 'configmaps' }],
      }),
      [read('', 'namespaces')],
    );
    assert.deepEqual(
      await clusterReads({
        labels: { a: 'b' },
        kinds: [{ resource: 'pods', annotations: { 'example.com/root': '{{root.kind}}/{{root.name}}' } }],
      }),
      WORKLOAD_CHAIN,
    );
  });

  test('a relation in a lookup’s key, in text, or before a default is granted', async () => {
    const cases: [template: string, expected: Rule[]][] = [
      ['{{teams[namespace.labels.team].costCenter}}', [read('', 'namespaces')]],
      ['{{ teams[ owner.labels.team ] }}', [read('batch', 'cronjobs')]],
      ['cc-{{teams[root.name].costCenter | default "none"}}', [read('batch', 'cronjobs')]],
      ['team-{{ namespace.labels.team | default "none" }}', [read('', 'namespaces')]],
    ];
    for (const [template, expected] of cases) {
      assert.deepEqual(
        await clusterReads({ sources: SOURCES, kinds: [{ resource: 'jobs', labels: { 'example.com/x': template } }] }),
        expected,
        template,
      );
    }
  });

  test('no grant for what reads no related object, nor for a template a kind drops', async () => {
    for (
      const template of [
        '{{namespace}}',
        '{{labels.team | default "namespace.labels.team"}}',
        '{{teams[name].costCenter}}',
        'namespace.labels.team',
      ]
    ) {
      assert.deepEqual(
        await clusterReads({
          sources: SOURCES,
          kinds: [{ resource: 'pods', annotations: { 'example.com/x': template } }],
        }),
        [],
        template,
      );
    }
    // The global annotation reads the namespace, and is dropped for the only kind.
    assert.deepEqual(
      await clusterReads({
        labels: { a: 'b' },
        annotations: { 'example.com/team': '{{namespace.labels.team}}' },
        kinds: [{ resource: 'configmaps', annotations: { 'example.com/team': null } }],
      }),
      [],
    );
  });

  test('namespaced mode: the namespaces an annotation reads, by name', async () => {
    const manifests = await render({
      values: {
        watchNamespaces: ['a', 'b'],
        labels: { a: 'b' },
        annotations: { 'example.com/cost-center': '{{teams[namespace.labels.team].costCenter}}' },
        sources: SOURCES,
        kinds: [{ resource: 'configmaps' }],
      },
    });
    assert.deepEqual(rulesOf(only(manifests, 'ClusterRole')), [
      { apiGroups: [''], resources: ['namespaces'], resourceNames: ['a', 'b'], verbs: ['list', 'watch'] },
    ]);
    const role = manifests.find((m) => m.kind === 'Role' && m.metadata.namespace === 'a');
    assert.ok(role);
    assert.deepEqual(rulesOf(role)[0], grant('', 'configmaps'));
  });
});

describe('chart: read grants against the API server', { skip }, () => {
  test('a label whose lookup key reads the namespace and an annotation that reads it are set with the chart’s RBAC', async () => {
    const { labels: own } = ownLabel('reads');
    const watched = await createNamespace('chart-reads');
    const platform = await createNamespace('chart-reads-platform');
    await patchLabels(`/api/v1/namespaces/${watched}`, { team: 'payments' });
    await create(`/api/v1/namespaces/${platform}/configmaps`, {
      metadata: { name: 'teams' },
      data: { 'teams.yaml': 'payments: { costCenter: cc-1234 }\n' },
    });
    const { manifests, kubeconfig } = await installRbac('chart-reads', {
      watchNamespaces: [watched],
      labels: { 'example.com/cost-center': '{{teams[namespace.labels.team].costCenter}}' },
      annotations: { 'example.com/team': '{{namespace.labels.team}}' },
      sources: { teams: { configMap: { namespace: platform, name: 'teams', key: 'teams.yaml' } } },
      kinds: [{ resource: 'configmaps' }],
    });
    await createConfigMap(watched, 'app-config', own);
    const path = `/api/v1/namespaces/${watched}/configmaps/app-config`;
    const labeller = new Labeller(localArgs(manifests, { leaderElection: false }), { kubeconfig });
    try {
      await eventually(() => labelled(path, { 'example.com/cost-center': 'cc-1234' }), 'the cost centre label');
      const client = await adminClient();
      const annotations = await eventually(async () => {
        const found = await client.json<{ metadata: { annotations?: Record<string, string> } }>('GET', path);
        return found.metadata.annotations?.['example.com/team'] === 'payments' && found.metadata.annotations;
      }, 'the team annotation');
      assert.equal(annotations['example.com/team'], 'payments');
      assert.deepEqual(labeller.logs.filter((l) => /\b403\b|forbidden|held/i.test(l.msg)), []);
    } finally {
      const exit = await labeller.stop();
      assert.equal(exit.code, 0, exit.stderr);
    }
  });
});
