// Every-kind mode (`resource: "*"`, `--kinds '*'`) against the real API server: objects of every
// built-in kind labelled, a CRD installed after start picked up and its controller stopped when
// it is deleted, default and configured exclusions left alone, an explicit entry winning over the
// every-kind entry, a kind whose patch is not granted skipped and reported (log, /readyz,
// labeller_kinds_skipped) while the others are labelled and started once granted; the same path
// for --once and status over cluster-scoped kinds. Each labeller has a field manager of its own
// and is limited to its namespace (or a selector), as other test files run beside it.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { freePorts } from '../controlplane/controlplane.ts';
import { assertCleanExit } from '../process/crash.ts';
import { Cluster } from '../cluster/cluster.ts';
import { eventually } from '../process/eventually.ts';
import { figure } from '../process/figures.ts';
import { Labeller, runLabeller, watchFailed } from '../process/labeller.ts';
import { scrape } from '../process/metrics.ts';
import { sleep } from '../process/sleep.ts';
import { sharedKubeconfig, skip } from '../cluster/testrun.ts';
import { configFile } from './cluster.ts';

const TEAM = 'example.com/team';
const EVERY = 'example.com/every';

/** Objects of built-in kinds in `ns`: each collection path and the object to create there. */
function builtins(ns: string): [kind: string, path: string, body: object][] {
  const labels = { app: 'web' };
  const pod = { metadata: { labels }, spec: { containers: [{ name: 'c', image: 'example.com/web:1' }] } };
  const core = `/api/v1/namespaces/${ns}`;
  const apps = `/apis/apps/v1/namespaces/${ns}`;
  const batch = `/apis/batch/v1/namespaces/${ns}`;
  const rbac = `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}`;
  const workload = { selector: { matchLabels: labels }, template: pod };
  return [
    ['ConfigMap', `${core}/configmaps`, { metadata: { name: 'cm' } }],
    ['Service', `${core}/services`, { metadata: { name: 'svc' }, spec: { ports: [{ port: 80 }], selector: labels } }],
    ['ServiceAccount', `${core}/serviceaccounts`, { metadata: { name: 'sa' } }],
    ['Pod', `${core}/pods`, { metadata: { name: 'pod', labels }, spec: pod.spec }],
    [
      'PersistentVolumeClaim',
      `${core}/persistentvolumeclaims`,
      {
        metadata: { name: 'pvc' },
        spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
      },
    ],
    ['Deployment', `${apps}/deployments`, { metadata: { name: 'deploy' }, spec: workload }],
    ['StatefulSet', `${apps}/statefulsets`, { metadata: { name: 'sts' }, spec: { ...workload, serviceName: 'svc' } }],
    ['DaemonSet', `${apps}/daemonsets`, { metadata: { name: 'ds' }, spec: workload }],
    [
      'Job',
      `${batch}/jobs`,
      { metadata: { name: 'job' }, spec: { template: { spec: { ...pod.spec, restartPolicy: 'Never' } } } },
    ],
    [
      'CronJob',
      `${batch}/cronjobs`,
      {
        metadata: { name: 'cron' },
        spec: {
          schedule: '0 0 1 1 *',
          jobTemplate: { spec: { template: { spec: { ...pod.spec, restartPolicy: 'Never' } } } },
        },
      },
    ],
    ['Role', `${rbac}/roles`, { metadata: { name: 'role' }, rules: [] }],
    [
      'RoleBinding',
      `${rbac}/rolebindings`,
      {
        metadata: { name: 'binding' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'role' },
        subjects: [{ kind: 'ServiceAccount', name: 'sa', namespace: ns }],
      },
    ],
    [
      'NetworkPolicy',
      `/apis/networking.k8s.io/v1/namespaces/${ns}/networkpolicies`,
      { metadata: { name: 'netpol' }, spec: { podSelector: {} } },
    ],
    [
      'PodDisruptionBudget',
      `/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets`,
      { metadata: { name: 'pdb' }, spec: { maxUnavailable: 1, selector: { matchLabels: labels } } },
    ],
    [
      'HorizontalPodAutoscaler',
      `/apis/autoscaling/v2/namespaces/${ns}/horizontalpodautoscalers`,
      {
        metadata: { name: 'hpa' },
        spec: { scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'deploy' }, maxReplicas: 2 },
      },
    ],
    // Last: its admission would refuse pods until the quota controller (not running here) counts them.
    ['ResourceQuota', `${core}/resourcequotas`, { metadata: { name: 'quota' }, spec: { hard: { pods: '10' } } }],
  ];
}

const objectPath = (path: string, body: object) => `${path}/${(body as { metadata: { name: string } }).metadata.name}`;

describe('every-kind mode', { skip }, () => {
  let cluster: Cluster;
  before(async () => {
    cluster = await Cluster.connect(sharedKubeconfig());
  });
  after(() => cluster?.close());

  test('labels every built-in kind of its namespace, picks up a CRD installed later and stops it when deleted, honours exclusions and explicit entries', async (t) => {
    const ns = await cluster.namespace('everykind');
    const objects = builtins(ns);
    for (const [, path, body] of objects) await cluster.post(path, body);
    // Left out by default (high churn, system-managed), by the entry's exclude, and by --exclude-kinds.
    const lease = `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`;
    await cluster.post(lease, { metadata: { name: 'lease' }, spec: { holderIdentity: 'someone' } });
    await cluster.post(`/api/v1/namespaces/${ns}/endpoints`, { metadata: { name: 'ep' } });
    await cluster.post(`/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`, {
      metadata: { name: 'slice' },
      addressType: 'IPv4',
      endpoints: [],
    });
    await cluster.post(`/api/v1/namespaces/${ns}/limitranges`, {
      metadata: { name: 'limits' },
      spec: { limits: [{ type: 'Container', max: { cpu: '1' } }] },
    });
    await cluster.post(`/apis/apps/v1/namespaces/${ns}/controllerrevisions`, {
      metadata: { name: 'revision' },
      revision: 1,
      data: { spec: {} },
    });
    const secrets = `/api/v1/namespaces/${ns}/secrets`;
    await cluster.post(secrets, { metadata: { name: 'secret' }, stringData: { k: 'v' } });
    const config = configFile(`
labels:
  ${TEAM}: platform
kinds:
  - resource: "*"
    exclude: [limits]
    labels:
      ${EVERY}: "yes"
  - resource: secrets          # an explicit entry replaces the every-kind entry for its kind
    labels:
      example.com/tier: secret
`);
    const labeller = new Labeller([
      '--config',
      config,
      '--namespace',
      ns,
      '--exclude-kinds',
      'controllerrevisions.apps',
      '--field-manager',
      `everykind-${ns}`,
    ]);
    try {
      const started = Date.now();
      for (const [kind, path, body] of objects) {
        await eventually(
          async () => (await cluster.labelsOf(objectPath(path, body)))[EVERY] === 'yes',
          `the ${kind} to be labelled`,
          60_000,
        );
      }
      figure(
        t,
        `every-kind: ${objects.length} built-in kinds labelled in ${((Date.now() - started) / 1000).toFixed(1)} s`,
      );
      const secret = await cluster.labelsOf(`${secrets}/secret`);
      assert.deepEqual([secret[TEAM], secret['example.com/tier'], secret[EVERY]], ['platform', 'secret', undefined]);
      const starting = await labeller.waitForLog((l) => l.msg === 'starting');
      const kinds = starting['kinds'] as string[];
      for (const left of ['leases.coordination.k8s.io', 'endpoints', 'limitranges', 'controllerrevisions.apps']) {
        assert.ok(!kinds.includes(left), `${left} not watched: ${kinds.join(', ')}`);
      }
      assert.ok(kinds.includes('secrets') && kinds.includes('configmaps'));
      for (
        const path of [
          `${lease}/lease`,
          `/api/v1/namespaces/${ns}/endpoints/ep`,
          `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices/slice`,
          `/api/v1/namespaces/${ns}/limitranges/limits`,
          `/apis/apps/v1/namespaces/${ns}/controllerrevisions/revision`,
        ]
      ) {
        assert.deepEqual(await cluster.labelsOf(path), {}, `${path} left alone`);
      }

      // A CRD installed after start: discovery, refreshed while the every-kind entry is in force, serves it.
      const group = `${ns}.example.com`;
      const served = labeller.logs.length;
      const installed = Date.now();
      await cluster.createCrd(group, 'gadgets', 'Gadget');
      cluster.onClose(() => cluster.delete(`/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.${group}`));
      const gadgets = `/apis/${group}/v1/namespaces/${ns}/gadgets`;
      await cluster.post(gadgets, { apiVersion: `${group}/v1`, kind: 'Gadget', metadata: { name: 'g' } });
      await eventually(
        async () => (await cluster.labelsOf(`${gadgets}/g`))[EVERY] === 'yes',
        'the custom resource to be labelled',
        120_000,
        200,
      );
      const servedLine = await labeller.waitForLog((l) => l.msg === 'kind is served now; watching it', 1000, served);
      assert.equal(servedLine['resource'], `gadgets.${group}`);
      figure(
        t,
        `every-kind: a CRD installed after start labelled ${((Date.now() - installed) / 1000).toFixed(1)} s later`,
      );

      // Deleted: its controller stops (said once), and its watch is not retried for ever.
      const deleting = labeller.logs.length;
      const deletedAt = Date.now();
      await cluster.deleteCrd(group, 'gadgets');
      const stopped = await labeller.waitForLog(
        (l) => l.msg === 'kind no longer served; stopped until it is again',
        120_000,
        deleting,
      );
      assert.equal(stopped['controller'], `gadgets.${group}/${ns}`);
      const stoppedAfter = (Date.now() - deletedAt) / 1000;
      const mark = labeller.logs.length;
      await sleep(5000);
      assert.deepEqual(labeller.since(mark, (l) => watchFailed(l) && l['kind'] === 'Gadget'), []);
      const failures = labeller.since(deleting, (l) => watchFailed(l) && l['kind'] === 'Gadget').length;
      figure(
        t,
        `every-kind: a CRD deleted, its controller stopped ${
          stoppedAfter.toFixed(1)
        } s later, after ${failures} failed watch retries`,
      );
      assert.equal(labeller.counts.error, 0, labeller.stderr.slice(-2000));
      labeller.assertRunning();
    } finally {
      const exit = await labeller.stop();
      labeller.kill();
      assertCleanExit(exit);
    }
  });

  test('a kind whose patch is not granted is skipped and reported once, the others are labelled; granted and reloaded, it starts', async () => {
    const ns = await cluster.namespace('everykind-rbac');
    const cms = `/api/v1/namespaces/${ns}/configmaps`;
    const services = `/api/v1/namespaces/${ns}/services`;
    await cluster.post(cms, { metadata: { name: 'cm' } });
    await cluster.post(services, { metadata: { name: 'svc' }, spec: { ports: [{ port: 80 }] } });
    const leases = { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['*'] };
    const rules = (servicesVerbs: string[]) => [
      { apiGroups: [''], resources: ['configmaps'], verbs: ['list', 'watch', 'patch'] },
      { apiGroups: [''], resources: ['services'], verbs: servicesVerbs },
      leases,
    ];
    const sa = await cluster.serviceAccount(ns, 'labeller', rules(['list', 'watch']));
    const config = configFile(`labels: { ${TEAM}: platform }\nkinds: [{ resource: "*" }]\n`);
    const [port] = await freePorts(1);
    const labeller = new Labeller([
      '--config',
      config,
      '--namespace',
      ns,
      '--field-manager',
      `everykind-${ns}`,
      '--leader-elect-resource-namespace',
      ns,
      '--http-port',
      String(port),
    ], { kubeconfig: sa.kubeconfig });
    try {
      await eventually(
        async () => (await cluster.labelsOf(`${cms}/cm`))[TEAM] === 'platform',
        'the config map labelled',
      );
      const skipped = labeller.since(0, (l) => l.msg === 'kind skipped: labeller may not use it');
      const service = skipped.find((l) => l['kind'] === 'services');
      assert.equal(service?.['missing'], 'patch');
      assert.match(String(service?.['grant']), /\{apiGroups: \[""\], resources: \[services\], verbs: \[patch\]\}/);
      assert.ok(!skipped.some((l) => l['kind'] === 'configmaps'));
      // Kinds it may not even list are skipped too, each said once; none of them is watched.
      const pods = skipped.filter((l) => l['kind'] === 'pods');
      assert.deepEqual(pods.map((l) => l['missing']), ['list,watch,patch']);
      // Secrets are no kind of the every-kind entry's: it leaves them out unless named.
      assert.ok(!skipped.some((l) => l['kind'] === 'secrets'));
      assert.equal(new Set(skipped.map((l) => l['kind'])).size, skipped.length, 'each kind said once');
      assert.deepEqual(labeller.since(0, watchFailed), [], 'no kind skipped was tried');
      const readyz = await fetch(`http://127.0.0.1:${port}/readyz`);
      assert.equal(readyz.status, 200);
      assert.match(await readyz.text(), /services: skipped, labeller may not patch/);
      assert.equal(await scrape(port!, 'labeller_kinds_skipped', { resource: 'services', verbs: 'patch' }), 1);
      assert.equal(await scrape(port!, 'labeller_kinds_skipped', { resource: 'configmaps' }), undefined);
      assert.deepEqual(await cluster.labelsOf(`${services}/svc`), {});

      // Granted, then the config changed: skipped kinds are asked again, services start.
      await cluster.setRules(sa.role, rules(['list', 'watch', 'patch']));
      const mark = labeller.logs.length;
      writeFileSync(config, `labels: { ${TEAM}: platform }\nkinds: [{ resource: "*", exclude: [limitranges] }]\n`);
      await labeller.waitForLog(
        (l) => l.msg === 'kind allowed now; watching it' && l['kind'] === 'services',
        30_000,
        mark,
      );
      await eventually(
        async () => (await cluster.labelsOf(`${services}/svc`))[TEAM] === 'platform',
        'the service labelled once patch is granted',
      );
      assert.equal(await scrape(port!, 'labeller_kinds_skipped', { resource: 'services' }), undefined);
      assert.equal(
        labeller.since(mark, (l) => l.msg === 'kind skipped: labeller may not use it').length,
        0,
        'kinds still skipped are not said again',
      );
    } finally {
      const exit = await labeller.stop();
      labeller.kill();
      assertCleanExit(exit);
    }
  });

  test('cluster scope: --once labels the cluster-scoped objects its selector picks, and status counts every kind it expands to', async () => {
    const ns = await cluster.namespace('everykind-cluster');
    const selector = { 'example.com/everykind-test': ns };
    const made = [
      ['/apis/rbac.authorization.k8s.io/v1/clusterroles', { metadata: { name: `${ns}-role`, labels: selector } }],
      [
        '/apis/scheduling.k8s.io/v1/priorityclasses',
        { metadata: { name: `${ns}-priority`, labels: selector }, value: 1000 },
      ],
      [
        '/apis/storage.k8s.io/v1/storageclasses',
        { metadata: { name: `${ns}-storage`, labels: selector }, provisioner: 'example.com/none' },
      ],
    ] as const;
    for (const [path, body] of made) {
      await cluster.post(path, body);
      cluster.onClose(() => cluster.delete(objectPath(path, body)));
    }
    const config = configFile(`
labels: { ${TEAM}: platform }
kinds:
  - resource: "*"
    scope: cluster
    selector: example.com/everykind-test=${ns}
`);
    const fieldManager = `everykind-${ns}`;
    const once = await runLabeller(['--config', config, '--once', '--field-manager', fieldManager]);
    assert.equal(once.code, 0, once.stderr.slice(-2000));
    assert.match(once.stdout, /^seen 3, patched 3, unchanged 0, conflicts 0, failed 0 \(\d+ controllers\)/);
    for (const [path, body] of made) {
      assert.equal((await cluster.labelsOf(objectPath(path, body)))[TEAM], 'platform', path);
    }
    // Namespaced kinds are not in this scope: the namespace itself is (cluster-scoped), but unselected.
    assert.equal((await cluster.labelsOf(`/api/v1/namespaces/${ns}`))[TEAM], undefined);

    const status = await runLabeller(['status', '--config', config, '-o', 'json', '--field-manager', fieldManager]);
    assert.equal(status.code, 0, status.stderr.slice(-2000));
    const report = JSON.parse(status.stdout) as { kinds: { resource: string; managed: number }[] };
    const resources = report.kinds.map((k) => k.resource);
    for (
      const resource of ['clusterroles.rbac.authorization.k8s.io', 'namespaces', 'priorityclasses.scheduling.k8s.io']
    ) {
      assert.ok(resources.includes(resource), `${resource} counted: ${resources.join(', ')}`);
    }
    assert.ok(!resources.includes('configmaps') && !resources.includes('apiservices.apiregistration.k8s.io'));
    assert.equal(report.kinds.reduce((n, k) => n + k.managed, 0), 3);
  });
});
