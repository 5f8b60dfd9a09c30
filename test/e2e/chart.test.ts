// The Helm chart, the sidecar example and the Dockerfile.
//  - Rendering (helm only, no cluster): lint and template pass for the defaults and every example;
//    the schema and the chart's own checks reject bad values with messages that say what to fix;
//    RBAC is derived from the kinds; the Deployment is hardened and its ConfigMap is a config
//    labeller accepts.
//  - Against the API server: the rendered RBAC, applied and used through a token minted for the
//    chart's ServiceAccount, is enough for labeller to do its job, and nothing more (cluster-wide
//    and namespaced); every rendered object passes server-side validation; the sidecar example
//    labels its namespace with its Role and LABELLER_* variables only.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import { load, loadAll } from 'js-yaml';
import { parseConfig } from '../../src/labeller/config.ts';
import { parseDuration } from '../../src/options.ts';
import { adminClient, create, createNamespace, eventually, labelsOf, skip } from './cluster.ts';
import {
  accessReview,
  apply,
  CHART,
  containers,
  deleteAfter,
  describeAccess,
  EXAMPLES,
  freePort,
  labellerHasFlag,
  lint,
  only,
  peakRss,
  render,
  ROOT,
  serviceAccountKubeconfig,
  SIDECAR,
  template,
  tempFile,
  type Access,
  type Container,
  type Manifest,
} from './helm.ts';
import { Labeller, runLabeller } from './labeller.ts';

const LABELLER_VERBS = ['get', 'list', 'watch', 'patch'];
const LEADER_FLAGS = ['--leader-elect', '--leader-election-namespace', '--leader-election-id', '--lease-duration', '--renew-deadline', '--retry-period'];
const VALUE_FILES: readonly (string | undefined)[] = [undefined, ...EXAMPLES];
const shortName = (file: string | undefined) => (file ? file.slice(CHART.length + 1) : 'default values');

interface Rule {
  readonly apiGroups: string[];
  readonly resources: string[];
  readonly resourceNames?: string[];
  readonly verbs: string[];
}
const rulesOf = (role: Manifest) => role['rules'] as Rule[];
const grant = (group: string, ...resources: string[]): Rule => ({ apiGroups: [group], resources, verbs: LABELLER_VERBS });

/** A flag's value in an argument list (`--flag=value`), or undefined. */
function flagValue(args: readonly string[], flag: string): string | undefined {
  const arg = args.find((a) => a === flag || a.startsWith(`${flag}=`));
  return arg === undefined ? undefined : arg.slice(flag.length + 1);
}

interface PodSpec {
  enableServiceLinks: boolean;
  terminationGracePeriodSeconds: number;
  serviceAccountName: string;
  securityContext: Record<string, unknown>;
  containers: (Container & Record<string, any>)[];
  volumes: { name: string; emptyDir?: object; configMap?: { name: string } }[];
}
const podSpec = (deployment: Manifest) => (deployment['spec'] as { template: { spec: PodSpec } }).template.spec;

describe('chart: lint and render', () => {
  test('helm lint --strict passes for the default values and every example', async () => {
    for (const file of VALUE_FILES) {
      const run = await lint({ files: file ? [file] : [] });
      assert.equal(run.code, 0, `${shortName(file)}: ${run.stdout}${run.stderr}`);
    }
  });

  test('every rendered object carries the standard app.kubernetes.io labels', async () => {
    for (const file of VALUE_FILES) {
      const manifests = await render({ release: 'rel', files: file ? [file] : [] });
      assert.ok(manifests.length >= 6, `${shortName(file)}: rendered ${manifests.length} objects`);
      for (const m of manifests) {
        const labels = m.metadata.labels ?? {};
        for (const key of ['app.kubernetes.io/name', 'app.kubernetes.io/instance', 'app.kubernetes.io/version', 'app.kubernetes.io/managed-by', 'helm.sh/chart']) {
          assert.ok(labels[key], `${shortName(file)}: ${m.kind} ${m.metadata.name} lacks ${key}`);
        }
        assert.equal(labels['app.kubernetes.io/instance'], 'rel');
      }
    }
  });

  test('the Deployment is hardened, probed and outlives labeller\'s grace period; its ConfigMap is a config labeller accepts', async () => {
    for (const file of VALUE_FILES) {
      const what = shortName(file);
      const manifests = await render({ release: 'rel', files: file ? [file] : [] });
      const deployment = only(manifests, 'Deployment');
      const pod = podSpec(deployment);
      const [container] = pod.containers;
      assert.ok(container && pod.containers.length === 1, what);
      const args = container.args ?? [];

      assert.equal(pod.enableServiceLinks, false, `${what}: enableServiceLinks`);
      assert.equal(pod.serviceAccountName, only(manifests, 'ServiceAccount').metadata.name);
      assert.equal(pod.securityContext['runAsNonRoot'], true, `${what}: runAsNonRoot`);
      assert.deepEqual(pod.securityContext['seccompProfile'], { type: 'RuntimeDefault' });
      assert.deepEqual(container['securityContext'], { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } });
      assert.equal(container.command, undefined, 'the image\'s entry point runs, as in the Dockerfile');
      for (const kind of ['requests', 'limits']) {
        assert.ok(container['resources'][kind]?.cpu && container['resources'][kind]?.memory, `${what}: resources.${kind}`);
      }

      // Probes on the port labeller serves them on.
      const port = container['ports'].find((p: { name: string }) => p.name === 'http');
      assert.equal(String(port.containerPort), flagValue(args, '--http-port'));
      assert.deepEqual(container['livenessProbe'].httpGet, { path: '/healthz', port: 'http' });
      assert.deepEqual(container['readinessProbe'].httpGet, { path: '/readyz', port: 'http' });

      // Kubernetes waits for labeller's own grace period, with room to spare.
      const graceMs = parseDuration(flagValue(args, '--grace-period') ?? '');
      assert.ok(graceMs !== undefined && pod.terminationGracePeriodSeconds * 1000 >= graceMs + 10_000, `${what}: terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds} vs --grace-period ${graceMs} ms`);

      // Nothing writable is needed; the config is mounted read-only where --config points.
      const mounts = container['volumeMounts'] as { name: string; mountPath: string; readOnly?: boolean }[];
      const configPath = flagValue(args, '--config') ?? '';
      const config = mounts.find((m) => configPath.startsWith(`${m.mountPath}/`));
      assert.ok(config?.readOnly, `${what}: the config is mounted read-only`);
      const configMap = only(manifests, 'ConfigMap');
      assert.equal(pod.volumes.find((v) => v.name === config.name)?.configMap?.name, configMap.metadata.name);
      const text = (configMap['data'] as Record<string, string>)[configPath.slice(config.mountPath.length + 1)] ?? '';
      assert.doesNotThrow(() => parseConfig(text, `${what}: ConfigMap`), `${what}: labeller's loader accepts the ConfigMap`);

      // More than one replica: leader election on.
      const replicas = (deployment['spec'] as { replicas: number }).replicas;
      if (replicas > 1) assert.ok(args.includes('--leader-elect'), `${what}: ${replicas} replicas without --leader-elect`);
    }
  });

  test('RBAC is derived from the kinds: get/list/watch/patch on exactly the configured resources', async () => {
    // CRDs carry their group; a built-in without a table entry takes group ""; a kind with its own
    // namespaces gets Roles there instead of the ClusterRole.
    const crd = await render({ release: 'rel', namespace: 'ops', files: [join(CHART, 'examples', 'crd.yaml')] });
    assert.deepEqual(rulesOf(only(crd, 'ClusterRole')), [grant('apps', 'deployments'), grant('cert-manager.io', 'certificates', 'clusterissuers'), grant('example.com', 'widgets')]);
    assert.deepEqual(rulesOf(only(crd, 'Role', 'rel-labeller')), [grant('', 'resourcequotas')]);
    assert.equal(only(crd, 'Role', 'rel-labeller').metadata.namespace, 'default');
    const kinds = load((only(crd, 'ConfigMap')['data'] as Record<string, string>)['kinds.yaml'] ?? '') as { kinds: { resource: string }[] };
    assert.deepEqual(kinds.kinds.map((k) => k.resource), ['widgets.example.com', 'certificates.cert-manager.io', 'clusterissuers.cert-manager.io', 'resourcequotas', 'deployments.apps']);
    assert.ok(kinds.kinds.every((k) => !('group' in k) && !('scope' in k)), 'chart-only fields are stripped');

    // The leader-election Role: create any Lease, read and renew only labeller's; list the guard
    // Leases of other labellers, hold the release's own.
    assert.deepEqual(rulesOf(only(crd, 'Role', 'rel-labeller-leader-election')), [
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create', 'list'] },
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: ['rel-labeller'], verbs: ['get', 'update'] },
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: ['rel-labeller-field-manager'], verbs: ['get', 'update', 'delete'] },
    ]);
    // The field manager is the release's name unless set.
    assert.ok((containers(only(crd, 'Deployment'))[0]?.args ?? []).includes('--field-manager=rel'));
    assert.equal(only(crd, 'Role', 'rel-labeller-leader-election').metadata.namespace, 'ops');

    // Namespaced mode: a Role in each watched namespace, no ClusterRole, and --namespace.
    const namespaced = await render({ release: 'rel', files: [join(CHART, 'examples', 'namespaced.yaml')] });
    assert.equal(namespaced.filter((m) => m.kind.startsWith('Cluster')).length, 0);
    const roles = namespaced.filter((m) => m.kind === 'Role' && m.metadata.name === 'rel-labeller');
    assert.deepEqual(roles.map((r) => r.metadata.namespace), ['team-a', 'team-a-staging']);
    for (const role of roles) {
      assert.deepEqual(rulesOf(role), [grant('', 'configmaps', 'persistentvolumeclaims', 'services'), grant('apps', 'deployments'), grant('networking.k8s.io', 'ingresses')]);
    }
    assert.equal(namespaced.filter((m) => m.kind === 'RoleBinding').length, 3);
    assert.equal(flagValue(containers(only(namespaced, 'Deployment'))[0]?.args ?? [], '--namespace'), 'team-a,team-a-staging');

    // Every example: labeller's roles grant its four verbs and nothing else.
    for (const file of VALUE_FILES) {
      for (const role of (await render({ files: file ? [file] : [] })).filter((m) => /^(Cluster)?Role$/.test(m.kind) && !/-(leader-election|field-manager-guard)$/.test(m.metadata.name))) {
        for (const rule of rulesOf(role)) assert.deepEqual(rule.verbs, LABELLER_VERBS, `${shortName(file)}: ${role.kind} ${role.metadata.name}`);
      }
    }
    // Leader election off: no leader-election Lease rights; the field-manager guard's, in the release namespace.
    const off = await render({ values: { leaderElection: { enabled: false } } });
    assert.ok(!off.some((m) => m.metadata.name.endsWith('-leader-election')));
    assert.deepEqual(rulesOf(only(off, 'Role', 'labeller-field-manager-guard')), [
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create', 'list', 'get', 'update', 'delete'] },
    ]);
    assert.ok(!(containers(only(off, 'Deployment'))[0]?.args ?? []).some((a) => a.startsWith('--lease')));
  });

  const schemaCases: [what: string, values: object, message: RegExp][] = [
    ['a bad conflicts policy', { conflicts: 'forse' }, /at '\/conflicts': value must be one of 'force', 'skip'/],
    ['a bad global label key', { labels: { 'bad key': 'x' } }, /at '\/labels': validation failed[\s\S]*invalid propertyName 'bad key'[\s\S]*does not match pattern/],
    ['a bad label key of a kind', { kinds: [{ resource: 'cm', labels: { 'example.com/-x': 'y' } }] }, /at '\/kinds\/0\/labels': validation failed[\s\S]*invalid propertyName 'example\.com\/-x'/],
    ['an unknown top-level key (a typo)', { replicas: 2 }, /additional properties 'replicas' not allowed/],
    ['an unknown field of a kind', { kinds: [{ resource: 'cm', namespace: ['x'] }] }, /at '\/kinds\/0': additional properties 'namespace' not allowed/],
    ['replicaCount not an integer', { replicaCount: 1.5 }, /at '\/replicaCount': got number, want integer/],
    ['replicaCount a string', { replicaCount: 'two' }, /at '\/replicaCount': got string, want integer/],
    ['no kinds', { kinds: [] }, /at '\/kinds': minItems: got 0, want 1/],
    ['a duration without unit', { gracePeriod: '30' }, /at '\/gracePeriod': got string|at '\/gracePeriod': '30' does not match pattern/],
    ['an invalid namespace name', { watchNamespaces: ['Team-A'] }, /at '\/watchNamespaces\/0': 'Team-A' does not match pattern/],
    ['a bad pull policy', { image: { pullPolicy: 'Sometimes' } }, /at '\/image\/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'/],
  ];
  for (const [what, values, message] of schemaCases) {
    test(`values.schema.json rejects ${what} with a clear message`, async () => {
      const run = await template({ values });
      assert.notEqual(run.code, 0, `rendered: ${run.stdout.slice(0, 200)}`);
      assert.match(run.stderr, /values don't meet the specifications of the schema/);
      assert.match(run.stderr, message);
    });
  }

  const label = { labels: { 'example.com/x': 'y' } };
  const checkCases: [what: string, values: object, message: RegExp][] = [
    ['an unknown resource without group', { kinds: [{ resource: 'widgets', ...label }] }, /kinds\[0\] \(resource: widgets\): the chart does not know the API group of "widgets", so it cannot grant RBAC for it\. For a custom resource, add its group and write its plural: `resource: widgets` with `group: example\.com`/],
    ['the group given twice', { kinds: [{ resource: 'widgets.example.com', group: 'example.com', ...label }] }, /give the API group once/],
    ['a custom kind instead of its plural', { kinds: [{ resource: 'Widget', group: 'example.com', ...label }] }, /kinds\[0\] \(resource: Widget\): write the resource's plural name in lowercase \(e\.g\. "widgets"\)/],
    ['the same resource twice', { kinds: [{ resource: 'deploy', ...label }, { resource: 'Deployment.apps' }] }, /kinds\[1\] \(resource: Deployment\.apps\): the same resource as kinds\[0\] \(deployments\.apps\): merge the two entries/],
    ['a cluster-scoped kind in namespaced mode', { watchNamespaces: ['a'], kinds: [{ resource: 'ns', ...label }] }, /namespaces is cluster-scoped and needs a ClusterRole, but namespaced mode \(watchNamespaces\) grants Roles only/],
    ['a kind without labels', { kinds: [{ resource: 'cm' }] }, /kinds\[0\] \(resource: cm\): no labels to apply: give this kind `labels` or set the global `labels`/],
    ['a null label without a global one', { kinds: [{ resource: 'cm', labels: { a: 'b', c: null } }] }, /labels\["c"\] is null, which drops a global label, but there is no global label "c"/],
    ['an invalid constant label value', { kinds: [{ resource: 'cm', labels: { a: '-x-' } }] }, /label a="-x-": not a valid label value/],
    ['several replicas without leader election', { replicaCount: 2, leaderElection: { enabled: false } }, /replicaCount is 2 but leaderElection\.enabled is false: every replica would write/],
    ['lease timings in the wrong order', { leaderElection: { renewDeadline: '20s' } }, /need leaseDuration > renewDeadline > retryPeriod, got 15s, 20s, 2s/],
    ['a ServiceMonitor without the Service', { metrics: { service: { enabled: false }, serviceMonitor: { enabled: true } } }, /metrics\.serviceMonitor\.enabled needs metrics\.service\.enabled/],
  ];
  for (const [what, values, message] of checkCases) {
    test(`the chart refuses ${what} with a message that says what to write`, async () => {
      const run = await template({ values: { kinds: [{ resource: 'deploy', ...label }], ...values } });
      assert.notEqual(run.code, 0, `rendered: ${run.stdout.slice(0, 200)}`);
      assert.match(run.stderr, message);
    });
  }

  test('the Dockerfile: Node 24 base, production dependencies only, non-root, the chart\'s entry point', async () => {
    const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
    assert.match(dockerfile, /^ARG NODE_IMAGE=node:24[-\w.]*$/m);
    assert.equal(dockerfile.match(/^FROM /gm)?.length, 2, 'multi-stage');
    assert.match(dockerfile, /npm install --omit=dev --omit=optional/);
    assert.match(dockerfile, /^ENTRYPOINT \["node", "bin\/labeller\.js"\]$/m);
    const user = /^USER (\d+):(\d+)$/m.exec(dockerfile);
    assert.ok(user && user[1] !== '0', 'a numeric non-root USER');
    // The chart runs the image's entry point as the image's user.
    const pod = podSpec(only(await render(), 'Deployment'));
    assert.equal(pod.containers[0]?.command, undefined);
    assert.equal(String(pod.securityContext['runAsUser']), user[1]);
    const ignore = readFileSync(join(ROOT, '.dockerignore'), 'utf8');
    for (const path of ['package.json', 'package-lock.json', 'bin/', 'src/']) assert.match(ignore, new RegExp(`^!${path.replace('.', '\\.')}$`, 'm'));
  });
});

const RBAC_KINDS = new Set(['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding']);
const LABELS = { 'example.com/team': 'platform', 'example.com/namespace': '{{namespace}}' };

/**
 * The chart's container arguments for a local run: --config names the rendered ConfigMap's
 * kinds.yaml written to a file, the harness sets --log-format, leader election only when asked,
 * and flags this tree's labeller does not take yet are left out (and reported).
 */
async function localArgs(t: TestContext, manifests: readonly Manifest[], options: { leaderElection: boolean; httpPort?: number }): Promise<string[]> {
  const configFile = tempFile('kinds.yaml', (only(manifests, 'ConfigMap')['data'] as Record<string, string>)['kinds.yaml'] ?? '');
  const args: string[] = [];
  const dropped: string[] = [];
  for (const arg of containers(only(manifests, 'Deployment'))[0]?.args ?? []) {
    const flag = arg.split('=')[0] ?? '';
    if (flag === '--config') args.push(`--config=${configFile}`);
    else if (flag === '--log-format' || (LEADER_FLAGS.includes(flag) && !options.leaderElection)) continue;
    else if (!(await labellerHasFlag(flag))) dropped.push(arg);
    else if (flag === '--http-port') args.push(`--http-port=${options.httpPort ?? 0}`);
    else args.push(arg);
  }
  if (dropped.length > 0) t.diagnostic(`this labeller does not take ${dropped.join(' ')} yet: run without`);
  return args;
}

/** Renders a release into a fresh namespace, applies its ServiceAccount and RBAC, and returns a kubeconfig with the ServiceAccount's token. */
async function installRbac(prefix: string, values: object) {
  const namespace = await createNamespace(`${prefix}-rel`);
  const manifests = await render({ release: namespace, namespace, values });
  deleteAfter(manifests);
  await apply(manifests.filter((m) => RBAC_KINDS.has(m.kind)));
  const kubeconfig = await serviceAccountKubeconfig(namespace, only(manifests, 'ServiceAccount').metadata.name);
  const leaseName = flagValue(containers(only(manifests, 'Deployment'))[0]?.args ?? [], '--leader-election-id') ?? '';
  return { namespace, manifests, kubeconfig, leaseName };
}

async function createConfigMap(namespace: string, name: string): Promise<void> {
  await create(`/api/v1/namespaces/${namespace}/configmaps`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data: { key: 'value' } });
}

async function createDeployment(namespace: string, name: string): Promise<void> {
  const labels = { app: name };
  await create(`/apis/apps/v1/namespaces/${namespace}/deployments`, {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, labels },
    spec: { selector: { matchLabels: labels }, template: { metadata: { labels }, spec: { containers: [{ name, image: 'nginx' }] } } },
  });
}

async function labelled(path: string, expected: Record<string, string>): Promise<boolean> {
  const labels = await labelsOf(path);
  return Object.entries(expected).every(([key, value]) => labels[key] === value);
}

async function assertAccess(kubeconfig: string, allowed: readonly Access[], denied: readonly Access[]): Promise<void> {
  const answers = await accessReview(kubeconfig, [...allowed, ...denied]);
  const wrong = [
    ...allowed.filter((a) => !answers.get(a)).map((a) => `denied but needed: ${describeAccess(a)}`),
    ...denied.filter((a) => answers.get(a)).map((a) => `allowed but not needed: ${describeAccess(a)}`),
  ];
  assert.deepEqual(wrong, []);
}

const each = (verbs: readonly string[], access: Omit<Access, 'verb'>): Access[] => verbs.map((verb) => ({ verb, ...access }));

describe('chart: RBAC against the API server', { skip }, () => {
  test('cluster-wide: the rendered RBAC lets labeller label config maps and deployments, and allows nothing more', async (t) => {
    const target = await createNamespace('chart-target');
    const { namespace, manifests, kubeconfig, leaseName } = await installRbac('chart-cw', { labels: LABELS, kinds: [{ resource: 'configmaps' }, { resource: 'deployments' }] });
    await createConfigMap(target, 'app-config');
    await createDeployment(target, 'web');
    await create(`/api/v1/namespaces/${target}/secrets`, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'token' }, stringData: { a: 'b' } });

    // Enough: labeller, as the chart's ServiceAccount with the chart's arguments, labels both kinds.
    // As deployed: with leader election, so the field-manager guard holds the Lease the RBAC names.
    const labeller = new Labeller(await localArgs(t, manifests, { leaderElection: true }), { kubeconfig });
    try {
      const expected = { 'example.com/team': 'platform', 'example.com/namespace': target };
      await eventually(() => labelled(`/api/v1/namespaces/${target}/configmaps/app-config`, expected), 'the config map to be labelled');
      await eventually(() => labelled(`/apis/apps/v1/namespaces/${target}/deployments/web`, expected), 'the deployment to be labelled');
      assert.deepEqual(labeller.logs.filter((l) => l.level === 'error' || /\b403\b|forbidden/i.test(`${l.msg} ${String(l['error'] ?? '')}`)), []);
    } finally {
      const exit = await labeller.stop();
      assert.equal(exit.code, 0, exit.stderr);
    }

    // Nothing more: the four verbs on the two resources (and the one Lease), nothing else.
    const configmaps = { resource: 'configmaps' };
    const deployments = { group: 'apps', resource: 'deployments' };
    const leases = { group: 'coordination.k8s.io', resource: 'leases', namespace };
    await assertAccess(
      kubeconfig,
      [
        ...each(LABELLER_VERBS, configmaps),
        ...each(LABELLER_VERBS, deployments),
        ...each(LABELLER_VERBS, { ...deployments, namespace: target }),
        ...each(['create', 'list'], leases),
        ...each(['get', 'update'], { ...leases, name: leaseName }),
        ...each(['get', 'update', 'delete'], { ...leases, name: `${leaseName}-field-manager` }),
      ],
      [
        ...each(['create', 'update', 'delete', 'deletecollection'], configmaps),
        ...each(['create', 'update', 'delete'], { ...deployments, namespace: target }),
        ...each(['patch', 'update'], { ...deployments, subresource: 'scale', namespace: target }),
        ...each(['patch'], { ...deployments, subresource: 'status', namespace: target }),
        ...each(LABELLER_VERBS, { resource: 'secrets', namespace: target }),
        ...each(['list', 'patch'], { resource: 'pods' }),
        ...each(['list', 'patch'], { group: 'apps', resource: 'statefulsets' }),
        ...each(['list'], { resource: 'namespaces' }),
        ...each(['watch', 'delete'], leases),
        ...each(['list'], { ...leases, namespace: target }),
        ...each(['get', 'update', 'delete'], { ...leases, name: 'someone-elses' }),
        ...each(['create'], { ...leases, namespace: target }),
        ...each(['create'], { group: 'rbac.authorization.k8s.io', resource: 'rolebindings', namespace }),
      ],
    );

    // And labeller itself is refused a kind outside the configuration.
    const exit = await runLabeller(['--kinds', 'secrets', '--label', 'a=b', '--namespace', target, '--once'], { kubeconfig });
    assert.equal(exit.code, 1, exit.stderr);
    assert.match(exit.stderr, /403 Forbidden/);
    assert.equal((await labelsOf(`/api/v1/namespaces/${target}/secrets/token`))['a'], undefined);
  });

  test('cluster-wide with leader election: the Lease Role is enough for the chart\'s full arguments', async (t) => {
    if (!(await labellerHasFlag('--leader-elect'))) {
      t.skip('this labeller does not take --leader-elect yet');
      return;
    }
    const target = await createNamespace('chart-target');
    const { namespace, manifests, kubeconfig, leaseName } = await installRbac('chart-le', { labels: LABELS, kinds: [{ resource: 'configmaps' }] });
    await createConfigMap(target, 'app-config');
    const httpPort = await freePort();
    const labeller = new Labeller(await localArgs(t, manifests, { leaderElection: true, httpPort }), { kubeconfig });
    try {
      await eventually(() => labelled(`/api/v1/namespaces/${target}/configmaps/app-config`, { 'example.com/team': 'platform' }), 'the config map to be labelled by the leader');
      const lease = await eventually(async () => {
        const client = await adminClient();
        const found = await client.json<{ spec: { holderIdentity?: string } }>('GET', `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${leaseName}`);
        return found.spec.holderIdentity ? found : undefined;
      }, `Lease ${namespace}/${leaseName} to be held`);
      assert.ok(lease.spec.holderIdentity);
      if (await labellerHasFlag('--http-port')) {
        await eventually(async () => (await fetch(`http://127.0.0.1:${httpPort}/readyz`)).ok, '/readyz to answer 200');
        assert.equal((await fetch(`http://127.0.0.1:${httpPort}/healthz`)).status, 200);
      }
      assert.deepEqual(labeller.logs.filter((l) => /\b403\b|forbidden/i.test(`${l.msg} ${String(l['error'] ?? '')}`)), []);
    } finally {
      const exit = await labeller.stop();
      assert.equal(exit.code, 0, exit.stderr);
    }
  });

  test('namespaced mode: a Role in the watched namespace is enough with --namespace; all namespaces are forbidden', async (t) => {
    const watched = await createNamespace('chart-watched');
    const other = await createNamespace('chart-other');
    const { manifests, kubeconfig } = await installRbac('chart-ns', { labels: LABELS, watchNamespaces: [watched], kinds: [{ resource: 'cm' }] });
    assert.deepEqual(manifests.filter((m) => m.kind.startsWith('Cluster')), [], 'no cluster-wide RBAC');
    assert.deepEqual(manifests.filter((m) => m.kind === 'Role' && m.metadata.namespace === watched).map((r) => rulesOf(r)), [[grant('', 'configmaps')]]);
    await createConfigMap(watched, 'app-config');
    await createConfigMap(other, 'app-config');

    const labeller = new Labeller(await localArgs(t, manifests, { leaderElection: false }), { kubeconfig });
    try {
      await eventually(() => labelled(`/api/v1/namespaces/${watched}/configmaps/app-config`, { 'example.com/namespace': watched }), 'the watched namespace\'s config map to be labelled');
    } finally {
      const exit = await labeller.stop();
      assert.equal(exit.code, 0, exit.stderr);
    }
    assert.deepEqual(await labelsOf(`/api/v1/namespaces/${other}/configmaps/app-config`), {});

    const configmaps = { resource: 'configmaps' };
    await assertAccess(
      kubeconfig,
      each(LABELLER_VERBS, { ...configmaps, namespace: watched }),
      [...each(['list', 'watch'], configmaps), ...each(LABELLER_VERBS, { ...configmaps, namespace: other }), ...each(['create', 'delete'], { ...configmaps, namespace: watched })],
    );
    // Without --namespace, labeller's cluster-wide list is refused.
    const exit = await runLabeller(['--kinds', 'configmaps', '--label', 'a=b', '--once'], { kubeconfig });
    assert.equal(exit.code, 1, exit.stderr);
    assert.match(exit.stderr, /403 Forbidden/);
  });

  test('every rendered object passes the API server\'s validation (server-side dry run, strict fields)', async () => {
    for (const file of VALUE_FILES) {
      const namespace = await createNamespace('chart-dry');
      const watched = await createNamespace('chart-dry-watched');
      const namespaced = file?.endsWith('namespaced.yaml');
      const manifests = await render({ release: namespace, namespace, files: file ? [file] : [], ...(namespaced ? { values: { watchNamespaces: [watched] } } : {}) });
      // The ServiceMonitor needs the Prometheus Operator's CRD: check that it finds the Service instead.
      const monitors = manifests.filter((m) => m.kind === 'ServiceMonitor');
      for (const monitor of monitors) {
        const service = only(manifests, 'Service');
        const spec = monitor['spec'] as { selector: { matchLabels: Record<string, string> }; endpoints: { port: string }[] };
        for (const [key, value] of Object.entries(spec.selector.matchLabels)) assert.equal(service.metadata.labels?.[key], value);
        assert.deepEqual(spec.endpoints.map((e) => e.port), (service['spec'] as { ports: { name: string }[] }).ports.map((p) => p.name));
      }
      const run = await apply(manifests.filter((m) => m.kind !== 'ServiceMonitor'), ['--dry-run=server', '--validate=strict']);
      assert.match(run.stdout, /deployment\.apps\/\S+ created \(server dry run\)/, shortName(file));
    }
  });
});

describe('sidecar example', { skip }, () => {
  test('runs namespace-scoped with only a Role, configured by its LABELLER_* variables, within its memory limit', async (t) => {
    const namespace = await createNamespace('sidecar');
    const docs = loadAll(readFileSync(SIDECAR, 'utf8')) as Manifest[];
    assert.deepEqual(docs.map((d) => d.kind).sort(), ['Deployment', 'Role', 'RoleBinding', 'ServiceAccount']);
    assert.ok(docs.every((d) => d.metadata.namespace === undefined), 'nothing names a namespace: kubectl apply -n chooses it');
    await apply(docs.map((d) => ({ ...d, metadata: { ...d.metadata, namespace } })));
    await createConfigMap(namespace, 'shop-config');
    await create(`/api/v1/namespaces/${namespace}/services`, { apiVersion: 'v1', kind: 'Service', metadata: { name: 'shop' }, spec: { selector: { 'app.kubernetes.io/name': 'shop' }, ports: [{ port: 80, targetPort: 8080 }] } });

    const deployment = only(docs, 'Deployment');
    const pod = podSpec(deployment);
    const sidecar = pod.containers.find((c) => c.name === 'labeller');
    assert.ok(sidecar);
    assert.equal(sidecar.args, undefined, 'no arguments');
    assert.equal(sidecar.command, undefined, 'the image\'s entry point');
    // The container's environment as the kubelet would resolve it; fieldRef metadata.namespace is the pod's namespace.
    const env: Record<string, string> = {};
    for (const variable of sidecar.env ?? []) {
      if (variable.valueFrom?.fieldRef?.fieldPath === 'metadata.namespace') env[variable.name] = namespace;
      else if (variable.value !== undefined) env[variable.name] = variable.value;
      else assert.fail(`unexpected env source for ${variable.name}`);
    }
    assert.ok(Object.keys(env).every((name) => name.startsWith('LABELLER_') || name === 'NODE_OPTIONS'), Object.keys(env).join(', '));
    // Hardened like the chart's container, and Kubernetes waits for labeller's own grace period.
    assert.deepEqual(sidecar['securityContext'].capabilities, { drop: ['ALL'] });
    assert.equal(sidecar['securityContext'].readOnlyRootFilesystem, true);
    assert.equal(sidecar['securityContext'].allowPrivilegeEscalation, false);
    assert.ok(!sidecar['volumeMounts'], 'no writable volume: Node runs the TypeScript sources itself');
    assert.ok(pod.terminationGracePeriodSeconds * 1000 > (parseDuration(env['LABELLER_GRACE_PERIOD'] ?? '30s') ?? Infinity));
    assert.equal(pod.enableServiceLinks, false);
    // A free port instead of the pod's (ports here are shared with other tests); the variables of the test process itself are blanked.
    const httpPort = await freePort();
    env['LABELLER_HTTP_PORT'] = String(httpPort);
    for (const name of Object.keys(process.env)) if (name.startsWith('LABELLER_') && !(name in env)) env[name] = '';

    const kubeconfig = await serviceAccountKubeconfig(namespace, pod.serviceAccountName);
    const labeller = new Labeller([], { kubeconfig, env });
    try {
      const expected = { 'app.kubernetes.io/part-of': 'shop', 'example.com/namespace': namespace };
      for (const path of [`/apis/apps/v1/namespaces/${namespace}/deployments/shop`, `/api/v1/namespaces/${namespace}/services/shop`, `/api/v1/namespaces/${namespace}/configmaps/shop-config`]) {
        await eventually(() => labelled(path, expected), `${path} to be labelled`);
      }
      assert.deepEqual(labeller.logs.filter((l) => /\b403\b|forbidden/i.test(`${l.msg} ${String(l['error'] ?? '')}`)), []);
      if (await labellerHasFlag('--http-port')) {
        assert.equal((await fetch(`http://127.0.0.1:${httpPort}/healthz`)).status, 200, 'the liveness probe\'s endpoint');
      }
      if (await labellerHasFlag('--leader-elect')) {
        // The Role's two lease rules are enough to lead.
        const client = await adminClient();
        const lease = await client.json<{ spec: { holderIdentity?: string } }>('GET', `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${env['LABELLER_LEADER_ELECTION_ID']}`);
        assert.ok(lease.spec.holderIdentity, 'the sidecar holds its Lease');
      }
      // Within the container's memory limit (the Node.js process; the kernel counts a little more).
      const limit = /^(\d+)Mi$/.exec(String(sidecar['resources'].limits.memory));
      const peak = peakRss(labeller.process.pid ?? 0);
      assert.ok(limit);
      if (peak !== undefined) t.diagnostic(`peak RSS ${(peak / 2 ** 20).toFixed(0)} MiB, limit ${limit[1]} MiB`);
      if (peak !== undefined) assert.ok(peak < Number(limit[1]) * 2 ** 20, `peak RSS ${(peak / 2 ** 20).toFixed(0)} MiB over the limit ${limit[1]} MiB`);
    } finally {
      const exit = await labeller.stop();
      assert.equal(exit.code, 0, exit.stderr);
    }
  });
});
