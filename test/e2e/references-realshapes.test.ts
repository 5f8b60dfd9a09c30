// Relations by reference on a full control plane (issue 48), with objects the cluster's own
// controllers make and bind: a Deployment's pods, placed by kube-scheduler on kwok's nodes, carry
// their node's zone and follow a node relabel with one PATCH per pod on that node and none
// elsewhere; a pod the scheduler can place only later gets its node's labels then; a PV bound to
// its claim by kube-controller-manager's binder carries the claim's team, and follows it. In the
// other direction, a PVC carries the app of the pods mounting it, and loses it when they go; a
// Deployment carries the name of the HPA scaling it, which moves when the HPA is retargeted.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { byLabeller } from '../cluster/audit.ts';
import { fullSkip } from '../cluster/testrun.ts';
import { Labeller, runLabeller } from '../process/labeller.ts';
import { sleep } from '../process/sleep.ts';
import { adminClient, auditSkip, auditTail, configFile, create, eventually, labelsOf, patchLabels } from './cluster.ts';
import { deployment, list, type Meta, pod, pods, rolledOut, workloadNamespace } from './workloads.ts';

const FIELD_MANAGER = 'labeller-references-e2e';
const SUFFIX = randomBytes(3).toString('hex');
// The cluster and its nodes are shared with other test files: the node labels are this file's own.
const CASE = { 'e2e.labeller/case': `references-${SUFFIX}` };
const NODE_ZONE = `e2e.labeller/zone-${SUFFIX}`;
const NODE_POOL = `e2e.labeller/pool-${SUFFIX}`;
const ZONE = 'example.com/zone';
const NODE = 'example.com/node';
const TEAM = 'example.com/team';
const APP = 'example.com/app';
const SCALER = 'example.com/autoscaler';
const NODES = ['kwok-node-0', 'kwok-node-1', 'kwok-node-2'];
const CONFIG = `
kinds:
  - resource: pods
    labels:
      ${ZONE}: "{{node.labels.${NODE_ZONE}}}"
      ${NODE}: "{{node.name}}"
  - resource: persistentvolumes
    labels:
      ${TEAM}: "{{claim.labels.team}}"
  - resource: persistentvolumeclaims
    labels:
      ${APP}: "{{mountedBy.labels.app}}"
  - resource: deployments
    labels:
      ${SCALER}: "{{scaler.name}}"
`;

/** A JSON merge patch, as another writer would send it. */
async function merge(path: string, patch: object): Promise<void> {
  await (await adminClient()).json('PATCH', path, {
    headers: { 'content-type': 'application/merge-patch+json' },
    body: JSON.stringify(patch),
  });
}

interface Volume {
  readonly metadata: Meta;
  readonly spec: { readonly claimRef?: { readonly name: string; readonly namespace: string } };
}

describe('references: labels from the objects a field names', { skip: fullSkip || auditSkip }, () => {
  test("pods carry their node's zone and follow a relabel of exactly that node; a pod placed later gets it then; a PV carries its claim's team once bound", async () => {
    const ns = await workloadNamespace('references');
    const zones: Record<string, string> = { 'kwok-node-0': 'zone-a', 'kwok-node-1': 'zone-b', 'kwok-node-2': 'zone-c' };
    for (const node of NODES) await patchLabels(`/api/v1/nodes/${node}`, { [NODE_ZONE]: zones[node]! });
    await create(`/apis/apps/v1/namespaces/${ns}/deployments`, deployment('web', 6, CASE));
    // Pending until a node carries the pool label: the scheduler places it once one does.
    await create(
      `/api/v1/namespaces/${ns}/pods`,
      pod('late', CASE, { spec: { nodeSelector: { [NODE_POOL]: 'late' } } }),
    );
    await create(`/api/v1/namespaces/${ns}/persistentvolumeclaims`, {
      metadata: { name: 'data', labels: { ...CASE, team: 'payments' } },
      spec: { accessModes: ['ReadWriteOnce'], storageClassName: '', resources: { requests: { storage: '1Gi' } } },
    });
    const volume = `references-${SUFFIX}`;
    await create('/api/v1/persistentvolumes', {
      metadata: { name: volume, labels: CASE },
      spec: {
        capacity: { storage: '1Gi' },
        accessModes: ['ReadWriteOnce'],
        storageClassName: '',
        persistentVolumeReclaimPolicy: 'Retain',
        hostPath: { path: `/tmp/${volume}` },
        // Bound by kube-controller-manager's binder to this claim, and no other test's.
        claimRef: { namespace: ns, name: 'data' },
      },
    });
    // Two pods mounting the claim: the storage is the app's.
    await create(`/apis/apps/v1/namespaces/${ns}/deployments`, {
      metadata: { name: 'db', labels: { app: 'db', ...CASE } },
      spec: {
        replicas: 2,
        selector: { matchLabels: { app: 'db' } },
        template: {
          metadata: { labels: { app: 'db', ...CASE } },
          spec: {
            containers: [{ name: 'db', image: 'registry.k8s.io/pause:3.10' }],
            volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'data' } }],
          },
        },
      },
    });
    await create(`/apis/autoscaling/v2/namespaces/${ns}/horizontalpodautoscalers`, {
      metadata: { name: 'web-hpa' },
      spec: {
        scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web' },
        minReplicas: 6,
        maxReplicas: 6,
        metrics: [{
          type: 'Resource',
          resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: 80 } },
        }],
      },
    });
    await rolledOut(ns, 'web');
    await rolledOut(ns, 'db');
    const [selector] = Object.entries(CASE).map(([k, v]) => `${k}=${v}`);
    const labeller = new Labeller([
      '--config',
      configFile(CONFIG),
      '--selector',
      selector!,
      '--field-manager',
      FIELD_MANAGER,
    ]);
    try {
      const web = () => pods(ns, 'app=web');
      const placed = async () =>
        (await web()).every((p) =>
          p.spec.nodeName !== undefined && p.metadata.labels?.[ZONE] === zones[p.spec.nodeName] &&
          p.metadata.labels?.[NODE] === p.spec.nodeName
        );
      await eventually(placed, "every pod of the Deployment carries its node's zone and name", 60_000, 250);
      const late = async () => (await labelsOf(`/api/v1/namespaces/${ns}/pods/late`));
      assert.equal((await late())[ZONE], undefined, 'a pod on no node has no zone');
      await eventually(
        async () => (await labelsOf(`/api/v1/persistentvolumes/${volume}`))[TEAM] === 'payments',
        "the PV carries its claim's team once the binder bound them",
        60_000,
        250,
      );
      const bound = (await list<Volume>('/api/v1/persistentvolumes', selector)).find((v) => v.metadata.name === volume);
      assert.equal(bound?.spec.claimRef?.name, 'data');

      // A relabel of one node: exactly its pods are PATCHed, once each.
      // Every pod on it, the Deployments' both.
      const onNode0 = (await pods(ns)).filter((p) => p.spec.nodeName === 'kwok-node-0').map((p) => p.metadata.name);
      const patches = auditTail((e) =>
        byLabeller(e) && e.verb === 'patch' && e.objectRef?.resource === 'pods' && e.objectRef.namespace === ns &&
        e.requestURI.includes(`fieldManager=${FIELD_MANAGER}`)
      );
      zones['kwok-node-0'] = 'zone-a2';
      await patchLabels('/api/v1/nodes/kwok-node-0', { [NODE_ZONE]: 'zone-a2' });
      await eventually(placed, 'the pods on the relabelled node carry its new zone', 30_000, 250);
      // Anything late would show by now.
      await sleep(2000);
      const patched = patches().map((e) => e.objectRef?.name ?? '').sort();
      assert.deepEqual(patched, [...onNode0].sort(), 'one PATCH per pod on the relabelled node, none elsewhere');

      // explain names the reference it followed and the value it read.
      const [sample] = onNode0;
      const config = configFile(CONFIG);
      const explained = await runLabeller([
        'explain',
        `pod/${sample}`,
        '-n',
        ns,
        '--config',
        config,
        '--field-manager',
        FIELD_MANAGER,
      ]);
      assert.equal(explained.code, 0, explained.stderr);
      assert.match(
        explained.stdout,
        new RegExp(
          `node Node kwok-node-0 \\(named by the object's spec\\.nodeName\\): labels\\.${
            NODE_ZONE.replaceAll('.', '\\.')
          } = "zone-a2"`,
        ),
      );

      // The pod placed later: its node's labels once the scheduler has set spec.nodeName.
      await patchLabels('/api/v1/nodes/kwok-node-2', { [NODE_POOL]: 'late' });
      await eventually(
        async () => (await late())[ZONE] === 'zone-c' && (await late())[NODE] === 'kwok-node-2',
        'the pod placed later carries its node zone',
        60_000,
        250,
      );

      // The pods mounting the claim agree on their app: the claim carries it.
      const claim = `/api/v1/namespaces/${ns}/persistentvolumeclaims/data`;
      await eventually(
        async () => (await labelsOf(claim))[APP] === 'db',
        "the claim carries its pods' app",
        30_000,
        250,
      );
      // The HPA scaling web: web carries its name; retargeted to db, the name moves.
      const deploymentPath = (name: string) => `/apis/apps/v1/namespaces/${ns}/deployments/${name}`;
      await eventually(
        async () => (await labelsOf(deploymentPath('web')))[SCALER] === 'web-hpa',
        'the Deployment carries the name of the HPA scaling it',
        30_000,
        250,
      );
      assert.equal((await labelsOf(deploymentPath('db')))[SCALER], undefined);
      await merge(`/apis/autoscaling/v2/namespaces/${ns}/horizontalpodautoscalers/web-hpa`, {
        spec: { scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'db' } },
      });
      await eventually(
        async () =>
          (await labelsOf(deploymentPath('db')))[SCALER] === 'web-hpa' &&
          (await labelsOf(deploymentPath('web')))[SCALER] === undefined,
        'the label moves with the HPA retargeted',
        30_000,
        250,
      );
      // The pods mounting the claim go: so does their app. The Deployment is deleted (the garbage
      // collector takes its pods), not scaled to none: web-hpa now scales db, to its minReplicas of
      // 6, and an HPA sync that read db at 2 replicas before a scale to 0 wrote 6 after it.
      await (await adminClient()).json('DELETE', deploymentPath('db'));
      await eventually(
        async () => (await labelsOf(claim))[APP] === undefined,
        'the claim loses the app once no pod mounts it',
        60_000,
        250,
      );

      // The claim's team changes: its PV follows.
      await patchLabels(`/api/v1/namespaces/${ns}/persistentvolumeclaims/data`, { team: 'search' });
      await eventually(
        async () => (await labelsOf(`/api/v1/persistentvolumes/${volume}`))[TEAM] === 'search',
        "the PV follows its claim's team",
        30_000,
        250,
      );
      // (The test run's own LABELLER_K8S_VERSION reaches labeller's environment, which says it names no option.)
      const problems = labeller.since(0, (l) => l.level === 'error' || l.level === 'warn');
      assert.deepEqual(problems.filter((l) => l['name'] !== 'LABELLER_K8S_VERSION').map((l) => l.msg), []);
    } finally {
      await labeller.stop();
      for (const node of NODES) await patchLabels(`/api/v1/nodes/${node}`, { [NODE_ZONE]: null, [NODE_POOL]: null });
      await (await adminClient()).request('DELETE', `/api/v1/persistentvolumes/${volume}`);
    }
  });
});
