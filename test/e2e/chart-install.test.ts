// The chart installed for real (`helm install` into the test control plane) under release names
// other than "labeller": every example, and the escape hatches platform teams reach for. The
// objects are read back from the API server and checked against each other: spread constraints,
// the PodDisruptionBudget and the Service select the release's pods, the ServiceMonitor selects
// the Service, the bindings name the pod's ServiceAccount, the ConfigMap is a config labeller
// accepts. (No controller manager runs, so no pod starts: the Deployment is checked as stored.)
// Then `helm test` of a release, for real: Helm creates the chart's test Pods one after the other
// and waits for each to pass; test/e2e/kubelet.ts stands in for the kubelet and runs each Pod's
// command as a local process with the Pod's ServiceAccount token, while the release's labeller runs
// as a process with its ServiceAccount's token (as chart.test.ts runs it) on the metrics Service's
// port. NOTES.txt's commands run too.
import assert from 'node:assert/strict';
import { basename } from 'node:path';
import { after, describe, test } from 'node:test';
import { policySelector } from '../../src/admission/names.ts';
import { parseConfig } from '../../src/config/parse.ts';
import { freePorts } from '../controlplane/controlplane.ts';
import { Labeller, runLabeller } from '../process/labeller.ts';
import {
  adminClient,
  create,
  createCrd,
  createNamespace,
  eventually,
  kubeconfig as adminKubeconfig,
  serviceAccountKubeconfig,
  skip,
} from './cluster.ts';
import { EXAMPLES, install, localArgs, only, render, tempFile, tool } from './helm.ts';
import { Kubelet, type PodRun } from './kubelet.ts';

interface Meta {
  readonly name: string;
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
}
interface Obj {
  readonly metadata: Meta;
  readonly [field: string]: unknown;
}
interface PodTemplate {
  metadata: Meta;
  spec: {
    serviceAccountName: string;
    automountServiceAccountToken?: boolean;
    topologySpreadConstraints?: { labelSelector: { matchLabels: Record<string, string> } }[];
    containers: {
      name: string;
      env?: { name: string; value?: string }[];
      volumeMounts: { name: string; mountPath: string }[];
    }[];
    volumes: { name: string; configMap?: { name: string }; emptyDir?: object }[];
  };
}
interface Deployment extends Obj {
  readonly spec: { revisionHistoryLimit: number; strategy: { type: string }; template: PodTemplate };
}

const INSTANCE = 'app.kubernetes.io/instance';

/** The objects of a release in its namespace (and its cluster-wide RBAC), read from the API server. */
async function released(namespace: string, release: string) {
  const client = await adminClient();
  const selector = { labelSelector: `${INSTANCE}=${release}` };
  const list = async <T extends Obj>(path: string): Promise<T[]> =>
    (await client.json<{ items: T[] }>('GET', path, { query: selector })).items;
  return {
    deployments: await list<Deployment>(`/apis/apps/v1/namespaces/${namespace}/deployments`),
    services: await list<Obj & { spec: { selector: Record<string, string> } }>(
      `/api/v1/namespaces/${namespace}/services`,
    ),
    configMaps: await list<Obj & { data: Record<string, string> }>(`/api/v1/namespaces/${namespace}/configmaps`),
    serviceAccounts: await list<Obj & { automountServiceAccountToken?: boolean }>(
      `/api/v1/namespaces/${namespace}/serviceaccounts`,
    ),
    pdbs: await list<
      Obj & {
        spec: { selector: { matchLabels: Record<string, string> }; minAvailable?: number; maxUnavailable?: number };
      }
    >(`/apis/policy/v1/namespaces/${namespace}/poddisruptionbudgets`),
    monitors: await list<
      Obj & { spec: { selector: { matchLabels: Record<string, string> }; endpoints: Record<string, unknown>[] } }
    >(`/apis/monitoring.coreos.com/v1/namespaces/${namespace}/servicemonitors`).catch(() => []),
    bindings: [
      ...(await list<Obj & { subjects: { kind: string; name: string; namespace: string }[] }>(
        '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
      )),
      ...(await list<Obj & { subjects: { kind: string; name: string; namespace: string }[] }>(
        '/apis/rbac.authorization.k8s.io/v1/rolebindings',
      )),
    ],
  };
}

// ha.yaml and the hatches have a ServiceMonitor: the Prometheus Operator's CRD, in its simplest form.
let monitorCrd: Promise<void> | undefined;
const serviceMonitorCrd = (): Promise<
  void
> => (monitorCrd ??= createCrd('monitoring.coreos.com', 'servicemonitors', 'ServiceMonitor'));

/** Whether a selector's labels are all on `labels`. */
function selects(selector: Record<string, string>, labels: Record<string, string> | undefined): boolean {
  return Object.entries(selector).every(([key, value]) => labels?.[key] === value);
}

describe('chart: helm install', { skip }, () => {
  test('every example installs under another release name, and its objects select each other', async () => {
    await serviceMonitorCrd();
    for (const [i, file] of EXAMPLES.entries()) {
      const what = basename(file);
      const namespace = await createNamespace('chart-install');
      const release = `platform-${i}`;
      const watched = [await createNamespace('chart-install-a'), await createNamespace('chart-install-b')];
      await install({
        release,
        namespace,
        files: [file],
        ...(what === 'namespaced.yaml' ? { values: { watchNamespaces: watched } } : {}),
      });
      const objects = await released(namespace, release);

      const [deployment, ...more] = objects.deployments;
      assert.ok(deployment && more.length === 0, `${what}: one Deployment`);
      const pod = deployment.spec.template;
      assert.equal(pod.metadata.labels?.[INSTANCE], release);
      for (const constraint of pod.spec.topologySpreadConstraints ?? []) {
        assert.ok(
          selects(constraint.labelSelector.matchLabels, pod.metadata.labels),
          `${what}: a spread constraint selects no pod of ${release}: ${JSON.stringify(constraint.labelSelector)}`,
        );
      }
      for (const pdb of objects.pdbs) {
        assert.ok(
          selects(pdb.spec.selector.matchLabels, pod.metadata.labels),
          `${what}: the PodDisruptionBudget selects the pods`,
        );
      }
      for (const service of objects.services) {
        assert.ok(selects(service.spec.selector, pod.metadata.labels), `${what}: the Service selects the pods`);
      }
      for (const monitor of objects.monitors) {
        assert.ok(
          objects.services.some((s) => selects(monitor.spec.selector.matchLabels, s.metadata.labels)),
          `${what}: the ServiceMonitor selects the Service`,
        );
      }
      if (what === 'ha.yaml') {
        assert.equal(pod.spec.topologySpreadConstraints?.length, 2);
        assert.equal(objects.pdbs.length, 1);
        assert.equal(objects.monitors.length, 1);
      }
      assert.ok(objects.bindings.length > 0, `${what}: RBAC bindings`);
      for (const binding of objects.bindings) {
        assert.deepEqual(
          binding.subjects,
          [{ kind: 'ServiceAccount', name: pod.spec.serviceAccountName, namespace }],
          `${what}: ${binding.metadata.name} binds the pod's ServiceAccount`,
        );
      }
      const configVolume = pod.spec.volumes.find((v) => v.name === 'config');
      const configMap = objects.configMaps.find((c) => c.metadata.name === configVolume?.configMap?.name);
      assert.ok(configMap, `${what}: the pod mounts the release's ConfigMap`);
      const config = parseConfig(configMap.data['kinds.yaml'] ?? '', 'kinds.yaml');
      assert.ok((config.kinds?.length ?? 0) > 0, `${what}: the ConfigMap is a config labeller accepts`);
    }
  });

  test('the escape hatches reach the objects: env, volumes, existing ConfigMap, strategy, labels, annotations, token, ServiceMonitor, PDB', async () => {
    const namespace = await createNamespace('chart-hatches');
    const release = 'hatches';
    await serviceMonitorCrd();
    await create(`/api/v1/namespaces/${namespace}/configmaps`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'platform-kinds' },
      data: { 'kinds.yaml': 'kinds: [{resource: deployments, labels: {team: platform}}]\n' },
    });
    const relabel = [{ sourceLabels: ['__meta_kubernetes_pod_node_name'], targetLabel: 'node' }];
    await install({
      release,
      namespace,
      values: {
        kinds: [{ resource: 'deployments', labels: { team: 'platform' } }],
        existingConfigMap: 'platform-kinds',
        env: [{ name: 'NODE_OPTIONS', value: '--max-old-space-size=64' }],
        extraEnv: [{ name: 'LABELLER_LOG_LEVEL', value: 'debug' }],
        extraVolumes: [{ name: 'scratch', emptyDir: {} }],
        extraVolumeMounts: [{ name: 'scratch', mountPath: '/scratch' }],
        revisionHistoryLimit: 3,
        strategy: { type: 'Recreate' },
        commonLabels: { 'example.com/team': 'platform' },
        deploymentAnnotations: { 'example.com/owner': 'platform' },
        serviceAccount: { automountServiceAccountToken: false },
        metrics: {
          serviceMonitor: { enabled: true, interval: '15s', relabelings: relabel, metricRelabelings: relabel },
        },
        podDisruptionBudget: { enabled: true, minAvailable: 1 },
      },
    });
    const objects = await released(namespace, release);
    const deployment = objects.deployments[0]!;
    const pod = deployment.spec.template;
    const container = pod.spec.containers.find((c) => c.name === 'labeller')!;
    // After the downward-API variables Events need.
    assert.deepEqual(container.env?.map((e) => e.name).slice(0, 3), ['POD_NAME', 'POD_NAMESPACE', 'POD_UID']);
    assert.deepEqual(container.env?.slice(3), [{ name: 'NODE_OPTIONS', value: '--max-old-space-size=64' }, {
      name: 'LABELLER_LOG_LEVEL',
      value: 'debug',
    }]);
    assert.ok(pod.spec.volumes.some((v) => v.name === 'scratch' && v.emptyDir));
    assert.ok(container.volumeMounts.some((m) => m.name === 'scratch' && m.mountPath === '/scratch'));
    assert.equal(pod.spec.volumes.find((v) => v.name === 'config')?.configMap?.name, 'platform-kinds');
    assert.equal(objects.configMaps.length, 0, 'no ConfigMap rendered with existingConfigMap');
    assert.equal(deployment.spec.revisionHistoryLimit, 3);
    assert.equal(deployment.spec.strategy.type, 'Recreate');
    assert.equal(deployment.metadata.annotations?.['example.com/owner'], 'platform');
    assert.equal(pod.spec.automountServiceAccountToken, false);
    assert.equal(objects.serviceAccounts[0]?.automountServiceAccountToken, false);
    assert.deepEqual(objects.pdbs.map((p) => [p.spec.minAvailable, p.spec.maxUnavailable]), [[1, undefined]]);
    const endpoint = objects.monitors[0]?.spec.endpoints[0];
    assert.equal(endpoint?.['interval'], '15s');
    assert.deepEqual(endpoint?.['relabelings'], relabel);
    assert.deepEqual(endpoint?.['metricRelabelings'], relabel);
    const all: Obj[] = [
      ...objects.deployments,
      ...objects.services,
      ...objects.serviceAccounts,
      ...objects.pdbs,
      ...objects.monitors,
      ...objects.bindings,
    ];
    for (const object of all) {
      assert.equal(object.metadata.labels?.['example.com/team'], 'platform', `commonLabels on ${object.metadata.name}`);
    }
    assert.equal(pod.metadata.labels?.['example.com/team'], 'platform', 'commonLabels on the pods');
  });
});

const POLICIES = 'admissionregistration.k8s.io/v1';
/** What each test Pod said, for a failure's message. */
const said = (runs: readonly PodRun[]) =>
  runs.map((r) => `--- ${r.pod} (exit ${r.exit.code})\n${r.exit.stdout}${r.exit.stderr}`).join('\n');
/** A command line of NOTES.txt split as a shell would (single quotes only). */
const words = (line: string) => [...line.matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2]!);

describe('chart: helm test', { skip }, () => {
  test("helm test passes: labeller status's preflight as the release's ServiceAccount, /readyz through the metrics Service, a dry-run create labelled by the admission policies; and fails when a grant is missing", async () => {
    const namespace = await createNamespace('chart-test');
    const release = namespace;
    const [port = 0] = await freePorts(1);
    // Cluster-wide, as the defaults are; the selector keeps it to this test's objects.
    const own = { 'e2e.labeller/chart': release };
    const values = {
      labels: { 'example.com/managed': 'labeller', 'example.com/namespace': '{{namespace}}', team: '{{labels.team}}' },
      kinds: [{ resource: 'configmaps' }],
      selector: `e2e.labeller/chart=${release}`,
      admissionPolicies: { enabled: true },
      // The Service's port is the pod's: here both are where the local labeller listens.
      httpPort: port,
      metrics: { service: { port } },
    };
    await install({ release, namespace, values });
    const client = await adminClient();
    after(async () => {
      for (const resource of ['mutatingadmissionpolicybindings', 'mutatingadmissionpolicies']) {
        await client.json('DELETE', `/apis/${POLICIES}/${resource}`, {
          query: { labelSelector: policySelector(release) },
        }).catch(() => {});
      }
    });
    const group = await client.json<{ resources: { name: string }[] }>('GET', `/apis/${POLICIES}`)
      .catch(() => ({ resources: [] }));
    const served = group.resources.some((r) => r.name === 'mutatingadmissionpolicies');

    const manifests = await render({ release, namespace, values });
    const deployment = only(manifests, 'Deployment');
    const fullname = deployment.metadata.name;
    const account = (deployment['spec'] as { template: { spec: { serviceAccountName: string } } }).template.spec
      .serviceAccountName;
    const tests = manifests.filter((m) => m.kind === 'Pod').map((m) => m.metadata.name);
    assert.deepEqual(tests, [`${fullname}-test-admission`, `${fullname}-test-rbac`, `${fullname}-test-readyz`].sort());
    const labeller = new Labeller(localArgs(manifests, { leaderElection: true, httpPort: port }), {
      kubeconfig: await serviceAccountKubeconfig(namespace, account),
    });
    const kubelet = new Kubelet(namespace, (pod) => pod.metadata.annotations?.['helm.sh/hook'] === 'test');
    const helmTest = () =>
      tool('helm', ['test', release, '-n', namespace, '--kubeconfig', adminKubeconfig(), '--timeout', '4m']);
    try {
      const passed = await helmTest();
      assert.equal(passed.code, 0, `${passed.stdout}${passed.stderr}\n${said(kubelet.runs)}`);
      assert.deepEqual(kubelet.errors, []);
      // In weight order, each with its own identity: the release's, none, the test's own.
      assert.deepEqual(kubelet.runs.map((r) => [r.pod, r.serviceAccount, r.exit.code]), [
        [`${fullname}-test-rbac`, account, 0],
        [`${fullname}-test-readyz`, undefined, 0],
        [`${fullname}-test-admission`, `${fullname}-test`, 0],
      ]);
      for (const name of tests) {
        assert.match(passed.stdout, new RegExp(`TEST SUITE:\\s+${name}\\n(.*\\n)*?Phase:\\s+Succeeded`));
      }
      const [rbac, readyz, admission] = kubelet.runs.map((r) => r.exit.stdout);
      assert.match(rbac!, new RegExp(`permissions: system:serviceaccount:${namespace}:${account} has all \\d+ rights`));
      assert.match(rbac!, /^configmaps +/m);
      assert.match(readyz!, new RegExp(`GET http://${fullname}-metrics\\.${namespace}\\.svc:${port}/readyz: 200\\nok`));
      assert.match(
        admission!,
        served
          ? new RegExp(
            `ConfigMap ${namespace}/labeller-helm-test-probe: labels e2e.labeller/chart=${release}, example.com/managed=labeller, example.com/namespace=${namespace};`,
          )
          : /does not serve MutatingAdmissionPolicies/,
      );
      // Passed, the test Pods are gone (hook-succeeded); the release's objects stay.
      await eventually(async () => {
        const { items } = await client.json<{ items: unknown[] }>('GET', `/api/v1/namespaces/${namespace}/pods`);
        return items.length === 0;
      }, 'the passed test Pods deleted');

      // NOTES.txt's commands are labeller's: status with the release's scope, as its ServiceAccount, passes the preflight; explain explains.
      const notes = (await tool('helm', ['get', 'notes', release, '-n', namespace, '--kubeconfig', adminKubeconfig()]))
        .stdout;
      assert.match(notes, new RegExp(`^ +helm test ${release} -n ${namespace} --logs$`, 'm'));
      assert.match(notes, new RegExp(`^ +kubectl -n ${namespace} port-forward svc/${fullname}-metrics ${port}$`, 'm'));
      const extract = /^ +kubectl -n \S+ get configmap (\S+) -o jsonpath=/m.exec(notes);
      assert.equal(extract?.[1], fullname);
      const configMap = only(manifests, 'ConfigMap', fullname)['data'] as Record<string, string>;
      const kinds = tempFile('kinds.yaml', configMap['kinds.yaml'] ?? '');
      const command = (name: string) => {
        const line = new RegExp(`^ +kubectl labeller ${name} (.*)$`, 'm').exec(notes)?.[1];
        assert.ok(line, `NOTES.txt shows labeller ${name}: ${notes}`);
        return words(line).map((word) => (word === 'kinds.yaml' ? kinds : word));
      };
      const status = await runLabeller(['status', ...command('status')], { kubeconfig: adminKubeconfig() });
      assert.equal(status.code, 0, status.stderr);
      assert.match(status.stdout, new RegExp(`permissions: system:serviceaccount:${namespace}:${account} has all`));
      await create(`/api/v1/namespaces/${namespace}/configmaps`, {
        metadata: { name: 'web', labels: { ...own, team: 'a' } },
      });
      const explainArgs = command('explain').map((word) =>
        word === '<kind>/<name>' ? 'configmap/web' : word === '<namespace>' ? namespace : word
      );
      const explained = await runLabeller(['explain', ...explainArgs], { kubeconfig: adminKubeconfig() });
      assert.equal(explained.code, 0, explained.stderr);
      assert.match(explained.stdout, /^team +a +/m);

      // Stopped before its RBAC is cut (it would lose its Lease), labeller exits cleanly.
      const stopped = await labeller.stop();
      assert.equal(stopped.code, 0, stopped.stderr);

      // A grant missing: the first test fails (labeller status exits 3, naming it), the others do not run.
      await client.json(
        'DELETE',
        `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/rolebindings/${fullname}-leader-election`,
      );
      const before = kubelet.runs.length;
      const failed = await helmTest();
      assert.notEqual(failed.code, 0, failed.stdout);
      assert.match(failed.stderr, new RegExp(`${fullname}-test-rbac`));
      const runs = kubelet.runs.slice(before);
      assert.deepEqual(runs.map((r) => [r.pod, r.exit.code]), [[`${fullname}-test-rbac`, 3]], said(runs));
      assert.match(runs[0]!.exit.stdout, /lacks \d+ of the \d+ rights labeller needs/);
      assert.match(runs[0]!.exit.stdout, /leader election/);
      // A failed test Pod stays, for kubectl logs.
      const pod = await client.json<{ status: { phase: string } }>(
        'GET',
        `/api/v1/namespaces/${namespace}/pods/${fullname}-test-rbac`,
      );
      assert.equal(pod.status.phase, 'Failed');
    } finally {
      await kubelet.stop();
      labeller.kill();
    }
  });

  test('namespaced mode: helm test passes with the Role alone; the field-manager guard looks for other configs in its own namespace', async () => {
    // Namespaced mode grants nothing cluster-wide: with every kind watched in named namespaces the
    // preflight asks for the guard's list of Leases in labeller's own namespace only.
    const namespace = await createNamespace('chart-test-ns');
    const release = namespace;
    // No controller runs here, so no /readyz test: the RBAC test alone.
    const values = {
      labels: { team: 'a' },
      kinds: [{ resource: 'configmaps' }],
      watchNamespaces: [namespace],
      metrics: { service: { enabled: false } },
    };
    await install({ release, namespace, values });
    const kubelet = new Kubelet(namespace, (pod) => pod.metadata.annotations?.['helm.sh/hook'] === 'test');
    try {
      const run = await tool('helm', ['test', release, '-n', namespace, '--kubeconfig', adminKubeconfig()]);
      assert.deepEqual(kubelet.errors, []);
      const [rbac, ...more] = kubelet.runs;
      assert.equal(more.length, 0);
      assert.deepEqual([rbac?.pod, rbac?.exit.code], [`${release}-labeller-test-rbac`, 0], rbac?.exit.stdout);
      assert.ok(!/^MISSING/m.test(rbac!.exit.stdout), rbac!.exit.stdout);
      assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
    } finally {
      await kubelet.stop();
    }
  });
});
