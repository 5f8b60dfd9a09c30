// Pods whose controller labeller may not read, under the chart's RBAC (on a full cluster
// as the test control plane gives it): the docs' example `example.com/workload: "{{root.kind}}.{{root.name}}"`
// on pods meets a mirror pod (owned by its Node, as the kubelet makes one for each static pod:
// every kubeadm and kind cluster has them) and a pod owned by a custom resource the chart does not
// grant. Neither may hold up the others: a plain pod and a Deployment's pods get their label, the
// two are left as they are (no PATCH, nothing stripped), /readyz and /metrics answer 200.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { freePorts } from '../controlplane/controlplane.ts';
import { byLabeller } from '../cluster/audit.ts';
import { Labeller } from '../process/labeller.ts';
import { fullSkip } from '../cluster/testrun.ts';
import {
  adminClient,
  auditEvents,
  auditSkip,
  create,
  createCrd,
  createNamespace,
  eventually,
  serviceAccountKubeconfig,
} from './cluster.ts';
import { install, localArgs, only, render } from './helm.ts';
import { deployment, isReady, type Meta, type Pod, pod, pods, rolledOut, workloadNamespace } from './workloads.ts';

const WORKLOAD = 'example.com/workload';
const GROUP = 'owners.e2e.example.com';
// The cluster is shared with other test files: this release's labeller selects only its own objects.
const CASE = { 'e2e.labeller/case': `owners-${randomBytes(3).toString('hex')}` };

describe('pods owned by kinds the chart does not grant', { skip: fullSkip || auditSkip }, () => {
  test('a mirror pod (owned by a Node) and a pod owned by a custom resource hold up no other pod, are left alone, and labeller stays ready', async () => {
    const namespace = await createNamespace('owners-rel');
    const target = await workloadNamespace('owners-target');
    const [selector] = Object.entries(CASE).map(([k, v]) => `${k}=${v}`);
    const values = {
      selector,
      kinds: [{ resource: 'pods', labels: { [WORKLOAD]: '{{root.kind}}.{{root.name}}' } }],
    };
    const manifests = await render({ release: namespace, namespace, values });
    await install({ release: namespace, namespace, values });
    const kubeconfig = await serviceAccountKubeconfig(namespace, only(manifests, 'ServiceAccount').metadata.name);

    // The pods, as they are before labeller starts (as when it is installed into a running cluster).
    const admin = await adminClient();
    const { items: [node] } = await admin.json<{ items: { metadata: Meta }[] }>('GET', '/api/v1/nodes');
    assert.ok(node, 'a node');
    const mirror = `etcd-${node.metadata.name}`;
    await create(
      `/api/v1/namespaces/${target}/pods`,
      pod(mirror, { ...CASE, component: 'etcd', tier: 'control-plane' }, {
        metadata: {
          annotations: {
            'kubernetes.io/config.hash': 'e2e',
            'kubernetes.io/config.mirror': 'e2e',
            'kubernetes.io/config.source': 'file',
          },
          ownerReferences: [{
            apiVersion: 'v1',
            kind: 'Node',
            name: node.metadata.name,
            uid: node.metadata.uid,
            controller: true,
          }],
        },
        spec: { nodeName: node.metadata.name },
      }),
    );
    await createCrd(GROUP, 'gadgets', 'Gadget');
    const gadget = await create<{ metadata: Meta }>(`/apis/${GROUP}/v1/namespaces/${target}/gadgets`, {
      apiVersion: `${GROUP}/v1`,
      kind: 'Gadget',
      metadata: { name: 'g1' },
    });
    await create(
      `/api/v1/namespaces/${target}/pods`,
      pod('gadget-worker', { ...CASE, app: 'gadget' }, {
        metadata: {
          ownerReferences: [{
            apiVersion: `${GROUP}/v1`,
            kind: 'Gadget',
            name: 'g1',
            uid: gadget.metadata.uid,
            controller: true,
          }],
        },
      }),
    );
    await create(`/api/v1/namespaces/${target}/pods`, pod('solo', CASE));
    await create(`/apis/apps/v1/namespaces/${target}/deployments`, deployment('web', 2, CASE));
    await rolledOut(target, 'web');
    const before = new Map((await pods(target)).map((p) => [p.metadata.name, p.metadata.labels ?? {}]));
    const unreadable = [mirror, 'gadget-worker'];

    const [port = 0] = await freePorts(1);
    const labeller = new Labeller(localArgs(manifests, { leaderElection: true, httpPort: port }), { kubeconfig });
    try {
      const expected = (p: Pod) => p.metadata.name === 'solo' ? 'Pod.solo' : 'Deployment.web';
      await eventually(
        async () => {
          const labelled = (await pods(target, selector)).filter((p) => !unreadable.includes(p.metadata.name));
          return labelled.length === 3 && labelled.every(isReady) &&
            labelled.every((p) => p.metadata.labels?.[WORKLOAD] === expected(p));
        },
        'the plain pod and the pods of web labelled',
        60_000,
        250,
      );
      await eventually(
        async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200,
        '/readyz to answer 200',
      );
      assert.equal((await fetch(`http://127.0.0.1:${port}/metrics`)).status, 200, '/metrics answers 200');

      const after = new Map((await pods(target)).map((p) => [p.metadata.name, p.metadata.labels ?? {}]));
      for (const name of unreadable) {
        assert.deepEqual(after.get(name), before.get(name), `${name}: nothing added or stripped`);
      }
      assert.deepEqual(
        auditEvents((e) =>
          byLabeller(e) && e.verb === 'patch' && e.objectRef?.namespace === target &&
          unreadable.includes(e.objectRef.name ?? '')
        ).map((e) => `${e.requestURI} ${e.responseStatus?.code}`),
        [],
        'no PATCH to the pods whose controller labeller may not read',
      );
      labeller.assertRunning();
    } finally {
      const exit = await labeller.stop();
      assert.equal(exit.code, 0, exit.stderr);
    }
  });
});
