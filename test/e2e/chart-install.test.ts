// The chart installed for real (`helm install` into the test control plane) under release names
// other than "labeller": every example, and the escape hatches platform teams reach for. The
// objects are read back from the API server and checked against each other: spread constraints,
// the PodDisruptionBudget and the Service select the release's pods, the ServiceMonitor selects
// the Service, the bindings name the pod's ServiceAccount, the ConfigMap is a config labeller
// accepts. (No controller manager runs, so no pod starts: the Deployment is checked as stored.)
import assert from 'node:assert/strict';
import { basename } from 'node:path';
import { describe, test } from 'node:test';
import { parseConfig } from '../../src/config/parse.ts';
import { adminClient, create, createCrd, createNamespace, skip } from './cluster.ts';
import { EXAMPLES, install } from './helm.ts';

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
