// The chart's every-kind RBAC (`- resource: "*"`): RBAC has no "all but", so the chart enumerates
// the built-in resources of the entry's scope instead of granting "*" in "*", leaving out the
// sensitive ones (Secrets' data; admission webhooks and policies and CRDs, which reach other
// objects' content) unless a kind lists one by name, and those the entry excludes; custom
// resources are granted by group (`groups`). The ConfigMap excludes what is not granted, so that
// labeller and the chart agree. Rendered; then against the API server: the enumeration against
// discovery and labeller's default exclusions, what the ServiceAccount may do, and labeller
// running with it.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { load } from 'js-yaml';
import { DEFAULT_EXCLUDES } from '../../src/config/everykind.ts';
import { adminClient, create, createCrd, createNamespace, eventually, kubeconfig, labelsOf, skip } from './cluster.ts';
import {
  assertAccess,
  createConfigMap,
  createDeployment,
  each,
  installRbac,
  labelled,
  LABELLER_VERBS,
  ownLabel,
  read,
  type Rule,
  rulesOf,
} from './chart-rbac.ts';
import { CHART, localArgs, type Manifest, only, render, template, tool } from './helm.ts';
import { Labeller } from '../process/labeller.ts';

/** Read sensitive content, or reach it: never granted by the every-kind entry, only by name. */
const SENSITIVE = [
  'secrets',
  'mutatingwebhookconfigurations.admissionregistration.k8s.io',
  'validatingwebhookconfigurations.admissionregistration.k8s.io',
  'mutatingadmissionpolicies.admissionregistration.k8s.io',
  'mutatingadmissionpolicybindings.admissionregistration.k8s.io',
  'validatingadmissionpolicies.admissionregistration.k8s.io',
  'validatingadmissionpolicybindings.admissionregistration.k8s.io',
  'customresourcedefinitions.apiextensions.k8s.io',
];
const NAMESPACED_SENSITIVE = ['secrets'];
const id = (group: string, resource: string) => (group ? `${resource}.${group}` : resource);

/** The resources labeller's own rules (list, watch, patch) grant, as plural.group ids. */
const granted = (role: Manifest): string[] =>
  rulesOf(role).filter((r) => r.verbs.includes('patch') && !r.apiGroups.includes('events.k8s.io')).flatMap((r) =>
    r.apiGroups.flatMap((g) => r.resources.map((resource) => id(g, resource)))
  ).sort();
const configOf = (manifests: Manifest[]) =>
  load((only(manifests, 'ConfigMap')['data'] as Record<string, string>)['kinds.yaml'] ?? '') as {
    kinds: { resource: string; exclude?: string[] }[];
  };
const every = (entry: object = {}, values: object = {}) =>
  render({ release: 'rel', values: { labels: { a: 'b' }, kinds: [{ resource: '*', ...entry }], ...values } });

describe('chart: every-kind RBAC, rendered', () => {
  test('never "*" in "*", no subresource, no sensitive kind: the built-ins of its scope, enumerated, in a ClusterRole or the Roles', async () => {
    for (const scope of ['namespaced', 'cluster', 'all']) {
      const manifests = await every({ scope });
      const role = only(manifests, 'ClusterRole');
      const ids = granted(role);
      assert.ok(!rulesOf(role).some((r) => r.apiGroups.includes('*') || r.resources.includes('*')), scope);
      assert.ok(!ids.some((i) => i.includes('/')), `${scope}: a subresource`);
      assert.deepEqual(ids.filter((i) => SENSITIVE.includes(i)), [], scope);
      assert.deepEqual(ids.filter((i) => DEFAULT_EXCLUDES.some((d) => d.resource === i)), [], `${scope}: defaults`);
      assert.equal(ids.includes('configmaps'), scope !== 'cluster', scope);
      assert.equal(ids.includes('deployments.apps'), scope !== 'cluster', scope);
      assert.equal(ids.includes('nodes'), scope !== 'namespaced', scope);
      assert.equal(ids.includes('clusterroles.rbac.authorization.k8s.io'), scope !== 'namespaced', scope);
      // What it does not grant, labeller leaves out too.
      const [entry] = configOf(manifests).kinds;
      assert.deepEqual(
        entry?.exclude?.sort(),
        (scope === 'namespaced' ? NAMESPACED_SENSITIVE : scope === 'cluster' ? SENSITIVE.slice(1) : SENSITIVE).sort(),
        scope,
      );
    }
    const namespaced = await every({}, { watchNamespaces: ['a', 'b'] });
    assert.ok(!namespaced.some((m) => m.kind === 'ClusterRole' && m.metadata.name === 'rel-labeller'));
    const roles = namespaced.filter((m) => m.kind === 'Role' && m.metadata.name === 'rel-labeller');
    assert.deepEqual(roles.map((r) => r.metadata.namespace), ['a', 'b']);
    for (const role of roles) {
      assert.deepEqual(granted(role), granted(only(await every(), 'ClusterRole')), 'the same as cluster-wide');
      assert.ok(!rulesOf(role).some((r) => r.resources.includes('*')));
    }
  });

  test('a sensitive kind listed by name is granted and labelled by its own entry; built-ins the entry excludes are not granted', async () => {
    const manifests = await render({
      release: 'rel',
      values: {
        labels: { a: 'b' },
        kinds: [
          { resource: '*', scope: 'all', exclude: ['po', 'Deployment', 'replicasets.apps', 'widgets.example.com'] },
          { resource: 'secrets', selector: 'example.com/label-me' },
          { resource: 'mutatingwebhookconfigurations', group: 'admissionregistration.k8s.io', scope: 'Cluster' },
        ],
      },
    });
    const ids = granted(only(manifests, 'ClusterRole'));
    for (const name of ['secrets', 'mutatingwebhookconfigurations.admissionregistration.k8s.io']) {
      assert.ok(ids.includes(name), name);
    }
    for (const name of ['pods', 'deployments.apps', 'replicasets.apps']) assert.ok(!ids.includes(name), name);
    assert.ok(ids.includes('statefulsets.apps'));
    const [entry] = configOf(manifests).kinds;
    assert.deepEqual(entry?.exclude, [
      'po',
      'Deployment',
      'replicasets.apps',
      'widgets.example.com',
      ...SENSITIVE.filter((s) => s !== 'secrets' && !s.startsWith('mutatingwebhookconfigurations.')).sort(),
    ]);
    // The example: secrets by name, with a selector of their own.
    const example = await render({ release: 'rel', files: [join(CHART, 'examples', 'every-kind.yaml')] });
    assert.ok(granted(only(example, 'ClusterRole')).includes('secrets'));
    assert.ok(!granted(only(example, 'ClusterRole')).includes('pods'));
    assert.deepEqual(configOf(example).kinds[0]?.exclude, ['pods', 'replicasets.apps', 'jobs.batch']);
  });

  test('custom resources by group: "*" in each of `groups`, refused for a built-in group and on other kinds', async () => {
    const rules = rulesOf(only(await every({ groups: ['example.com', 'cert-manager.io'] }), 'ClusterRole'));
    for (const group of ['example.com', 'cert-manager.io']) {
      assert.deepEqual(rules.find((r) => r.apiGroups[0] === group), {
        apiGroups: [group],
        resources: ['*'],
        verbs: LABELLER_VERBS,
      });
    }
    assert.ok(!('groups' in (configOf(await every({ groups: ['example.com'] })).kinds[0] ?? {})), 'chart-only');
    const refused: [values: object, message: RegExp][] = [
      [
        { kinds: [{ resource: '*', groups: ['networking.k8s.io'] }] },
        /groups: networking\.k8s\.io is a built-in group, whose kinds the every-kind entry grants already/,
      ],
      [
        { kinds: [{ resource: 'cm', groups: ['example.com'] }] },
        /only the every-kind entry \(resource: "\*"\) takes `groups`/,
      ],
      [{ kinds: [{ resource: '*', group: 'apps' }] }, /name custom resources' groups in `groups`/],
      [{ kinds: [{ resource: '*', groups: ['*'] }] }, /at '\/kinds\/0\/groups\/0': '\*' does not match pattern/],
    ];
    for (const [values, message] of refused) {
      const run = await template({ values: { labels: { a: 'b' }, ...values } });
      assert.notEqual(run.code, 0, JSON.stringify(values));
      assert.match(run.stderr, message, JSON.stringify(values));
    }
  });

  test('owner and root templates of the every-kind entry read the workload chain, excluded kinds included', async () => {
    const manifests = await every({ exclude: ['replicasets.apps'], labels: { 'example.com/root': '{{root.name}}' } });
    const reads = rulesOf(only(manifests, 'ClusterRole')).filter((r) => !r.verbs.includes('patch'));
    assert.deepEqual(
      reads.filter((r) => r.apiGroups[0] !== 'coordination.k8s.io'),
      [
        read('', 'replicationcontrollers'),
        read('apps', 'daemonsets', 'deployments', 'replicasets', 'statefulsets'),
        read('batch', 'cronjobs', 'jobs'),
      ] satisfies Rule[],
    );
  });
});

/** What discovery serves with list, watch and patch, as plural.group ids, without custom resources. */
async function builtins(namespaced: boolean): Promise<string[]> {
  const names = async (args: string[]) => {
    const run = await tool('kubectl', ['--kubeconfig', kubeconfig(), ...args]);
    assert.equal(run.code, 0, run.stderr);
    return run.stdout.split(/\s+/).filter(Boolean);
  };
  const crds = () =>
    names(['get', 'customresourcedefinitions', '-o', 'jsonpath={range .items[*]}{.metadata.name} {end}']);
  // Other test files make and delete CRDs meanwhile: one made between the two reads is in the second list.
  const before = await crds();
  const served = await names([
    'api-resources',
    '--verbs=list,watch,patch',
    `--namespaced=${namespaced}`,
    '-o',
    'name',
  ]);
  const custom = new Set([...before, ...(await crds())]);
  return served.filter((name) => !custom.has(name)).sort();
}

describe('chart: every-kind RBAC against the API server', { skip }, () => {
  test('the enumeration agrees with discovery: every built-in is granted or left out by labeller, never both', async () => {
    const defaults = DEFAULT_EXCLUDES.map((d) => d.resource);
    // The chart's table is as of Kubernetes 1.37: an older server (CI tests 1.30 too) does not
    // serve the newer kinds, and a grant of a kind not served is harmless there.
    const { minor } = await (await adminClient()).json<{ minor: string }>('GET', '/version');
    const tableServer = Number.parseInt(minor, 10) >= 37;
    for (const [scope, namespaced] of [['namespaced', true], ['cluster', false]] as const) {
      const manifests = await every({ scope });
      const grant = new Set(granted(only(manifests, 'ClusterRole')));
      const leftOut = new Set([...defaults, ...(configOf(manifests).kinds[0]?.exclude ?? [])]);
      const served = await builtins(namespaced);
      assert.deepEqual(served.filter((name) => !grant.has(name) && !leftOut.has(name)), [], `${scope}: neither`);
      assert.deepEqual(served.filter((name) => grant.has(name) && leftOut.has(name)), [], `${scope}: both`);
      // Every grant names something served (a table entry gone from Kubernetes would show here).
      if (tableServer) {
        assert.deepEqual([...grant].filter((name) => !served.includes(name)), [], `${scope}: not served`);
      }
    }
  });

  test("scope all: with the chart's RBAC labeller labels built-ins and its groups' custom resources and skips no built-in kind; Secrets and the like are neither granted nor tried", async () => {
    const { labels: own, selector } = ownLabel('everykind');
    const group = `ek${Date.now().toString(36)}.example.com`;
    await createCrd(group, 'gizmos', 'Gizmo');
    const target = await createNamespace('chart-ek-all');
    const { manifests, kubeconfig: saKubeconfig } = await installRbac('chart-ek-all', {
      labels: { 'example.com/team': 'platform' },
      selector,
      kinds: [{ resource: '*', scope: 'all', groups: [group] }],
    });
    await createConfigMap(target, 'app-config', own);
    await createDeployment(target, 'web', own);
    const secret = `/api/v1/namespaces/${target}/secrets/token`;
    await create(`/api/v1/namespaces/${target}/secrets`, {
      metadata: { name: 'token', labels: own },
      stringData: { a: 'b' },
    });
    const gizmo = `/apis/${group}/v1/namespaces/${target}/gizmos/g`;
    await create(`/apis/${group}/v1/namespaces/${target}/gizmos`, {
      apiVersion: `${group}/v1`,
      kind: 'Gizmo',
      metadata: { name: 'g', labels: own },
    });

    const inNamespace = { namespace: target };
    await assertAccess(saKubeconfig, [
      ...each(LABELLER_VERBS, { resource: 'configmaps' }),
      ...each(LABELLER_VERBS, { group: 'apps', resource: 'deployments', ...inNamespace }),
      ...each(LABELLER_VERBS, { resource: 'nodes' }),
      ...each(LABELLER_VERBS, { resource: 'namespaces' }),
      ...each(LABELLER_VERBS, { group, resource: 'gizmos', ...inNamespace }),
    ], [
      ...each(LABELLER_VERBS, { resource: 'secrets' }),
      ...each(LABELLER_VERBS, { resource: 'secrets', ...inNamespace }),
      ...each(['get'], { resource: 'secrets', ...inNamespace, name: 'token' }),
      ...each(['get', 'create', 'update', 'delete'], { resource: 'configmaps', ...inNamespace }),
      ...each(['list', 'patch'], { group: 'admissionregistration.k8s.io', resource: 'mutatingwebhookconfigurations' }),
      ...each(['list', 'patch'], { group: 'admissionregistration.k8s.io', resource: 'validatingadmissionpolicies' }),
      ...each(['patch'], { group: 'apiextensions.k8s.io', resource: 'customresourcedefinitions' }),
      ...each(['patch'], { group: 'apiregistration.k8s.io', resource: 'apiservices' }),
      ...each(['patch'], { group: 'coordination.k8s.io', resource: 'leases', namespace: 'kube-system' }),
      ...each(['patch'], { resource: 'pods', subresource: 'ephemeralcontainers', ...inNamespace }),
      ...each(['patch'], { resource: 'pods', subresource: 'status', ...inNamespace }),
      ...each(['patch', 'update'], { group: 'apps', resource: 'deployments', subresource: 'scale', ...inNamespace }),
      ...each(['create'], { resource: 'serviceaccounts', subresource: 'token', ...inNamespace }),
      ...each(['create'], { resource: 'pods', subresource: 'exec', ...inNamespace }),
    ]);

    // As deployed: with leader election, so the field-manager guard holds the Lease the RBAC names.
    const labeller = new Labeller(localArgs(manifests, { leaderElection: true }), { kubeconfig: saKubeconfig });
    try {
      const team = { 'example.com/team': 'platform' };
      for (
        const path of [
          `/api/v1/namespaces/${target}/configmaps/app-config`,
          `/apis/apps/v1/namespaces/${target}/deployments/web`,
          gizmo,
        ]
      ) {
        await eventually(() => labelled(path, team), `${path} labelled`);
      }
      const builtin = new Set([...(await builtins(true)), ...(await builtins(false))]);
      const skipped = labeller.logs.filter((l) => l.msg === 'kind skipped: labeller may not use it');
      assert.deepEqual(skipped.filter((l) => builtin.has(String(l['kind']))), [], 'no built-in kind skipped');
      assert.deepEqual(
        labeller.logs.filter((l) => /\b403\b|forbidden/i.test(`${l.msg} ${String(l['error'] ?? '')}`)),
        [],
      );
    } finally {
      const exit = await labeller.stop();
      assert.equal(exit.code, 0, exit.stderr);
    }
    assert.deepEqual(await labelsOf(secret), own, 'the Secret untouched');
  });

  test('namespaced mode: the Role in the watched namespace is enough for every built-in kind there, Secrets neither granted nor tried, other namespaces untouched', async () => {
    const { labels: own } = ownLabel('everykind');
    const watched = await createNamespace('chart-ek-watched');
    const other = await createNamespace('chart-ek-other');
    const { manifests, kubeconfig: saKubeconfig } = await installRbac('chart-ek', {
      labels: { 'example.com/namespace': '{{namespace}}' },
      watchNamespaces: [watched],
      kinds: [{ resource: '*' }],
    });
    for (const namespace of [watched, other]) {
      await createConfigMap(namespace, 'app-config', own);
      await createDeployment(namespace, 'web', own);
    }
    const labeller = new Labeller(localArgs(manifests, { leaderElection: true }), { kubeconfig: saKubeconfig });
    try {
      const expected = { 'example.com/namespace': watched };
      await eventually(
        () => labelled(`/api/v1/namespaces/${watched}/configmaps/app-config`, expected),
        'the config map labelled',
      );
      await eventually(
        () => labelled(`/apis/apps/v1/namespaces/${watched}/deployments/web`, expected),
        'the deployment labelled',
      );
      const builtin = new Set(await builtins(true));
      assert.deepEqual(
        labeller.logs.filter((l) =>
          l.level === 'error' || (l.msg.startsWith('kind skipped') && builtin.has(String(l['kind'])))
        ),
        [],
      );
    } finally {
      const exit = await labeller.stop();
      assert.equal(exit.code, 0, exit.stderr);
    }
    assert.deepEqual(await labelsOf(`/api/v1/namespaces/${other}/configmaps/app-config`), own);
    await assertAccess(saKubeconfig, each(LABELLER_VERBS, { resource: 'configmaps', namespace: watched }), [
      ...each(LABELLER_VERBS, { resource: 'secrets', namespace: watched }),
      ...each(['list'], { resource: 'configmaps' }),
      ...each(LABELLER_VERBS, { resource: 'configmaps', namespace: other }),
      ...each(['create', 'delete'], { resource: 'configmaps', namespace: watched }),
    ]);
  });
});
