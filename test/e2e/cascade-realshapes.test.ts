// Cascading deletion of a labelled Deployment by the garbage collector, as in a real cluster
// (issue 22), with both propagation policies:
//  - Background: the Deployment goes at once, then the collector deletes its ReplicaSet and that
//    one's pods. Meanwhile labeller may take the `root.*` and `owner.*` labels off what is still
//    there (the absent-value rule), but no PATCH may race the collector and lose: none may come
//    after its object went (refused, 409, by the uid labeller sends along; without that uid, a
//    server-side apply would create the object again).
//  - Foreground: the Deployment stays, marked for deletion, until the collector has deleted its
//    ReplicaSet and pods; nothing labeller reads changes, so it sends no PATCH at all.
// Either way, everything goes away and stays away.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { byLabeller } from '../cluster/audit.ts';
import { figure } from '../process/figures.ts';
import { Labeller } from '../process/labeller.ts';
import { sleep } from '../process/sleep.ts';
import { fullSkip } from '../cluster/testrun.ts';
import { adminClient, auditSkip, auditTail, configFile, create, eventually } from './cluster.ts';
import { deployment, isReady, list, type Meta, pods, rolledOut, workloadNamespace } from './workloads.ts';

const FIELD_MANAGER = 'labeller-cascade-e2e';
const WORKLOAD = 'example.com/workload';
const CONFIG = `
kinds:
  - resource: deployments
    labels:
      example.com/tier: web
  - resource: replicasets
    labels:
      ${WORKLOAD}: "{{root.kind}}.{{root.name}}"
  - resource: pods
    labels:
      ${WORKLOAD}: "{{root.kind}}.{{root.name}}"
      example.com/owner: "{{owner.name}}"
`;

/** What is left of the workload in `ns`: the Deployment (if still there), ReplicaSets and pods. */
async function remaining(ns: string): Promise<string[]> {
  const apps = `/apis/apps/v1/namespaces/${ns}`;
  const objects = [
    ...(await list<{ metadata: Meta }>(`${apps}/deployments`)).map((o) => `deployment ${o.metadata.name}`),
    ...(await list<{ metadata: Meta }>(`${apps}/replicasets`)).map((o) => `replicaset ${o.metadata.name}`),
    ...(await pods(ns)).map((o) => `pod ${o.metadata.name}`),
  ];
  return objects;
}

for (const policy of ['Background', 'Foreground'] as const) {
  describe(`cascading deletion of a Deployment (${policy})`, { skip: fullSkip || auditSkip }, () => {
    const none = policy === 'Foreground' ? ', and there are none' : '';
    test(`the garbage collector removes the ReplicaSet and pods; no PATCH of labeller's recreates or fails${none}`, async (t) => {
      const ns = await workloadNamespace(`cascade-${policy.toLowerCase()}`);
      const labeller = new Labeller([
        '--config',
        configFile(CONFIG),
        '--namespace',
        ns,
        '--field-manager',
        FIELD_MANAGER,
      ]);
      try {
        await create(`/apis/apps/v1/namespaces/${ns}/deployments`, deployment('web', 3));
        await rolledOut(ns, 'web');
        await eventually(
          async () => {
            const all = await pods(ns);
            const replicaSets = await list<{ metadata: Meta }>(`/apis/apps/v1/namespaces/${ns}/replicasets`);
            return all.length === 3 && all.every(isReady) &&
              [...all, ...replicaSets].every((o) => o.metadata.labels?.[WORKLOAD] === 'Deployment.web');
          },
          'the pods and ReplicaSet of web labelled',
          60_000,
          250,
        );

        const patches = auditTail((e) =>
          byLabeller(e) && e.objectRef?.namespace === ns && e.verb === 'patch' &&
          e.requestURI.includes(`fieldManager=${FIELD_MANAGER}`)
        );
        await (await adminClient()).request('DELETE', `/apis/apps/v1/namespaces/${ns}/deployments/web`, {
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy: policy }),
        });
        await eventually(
          async () => (await remaining(ns)).length === 0,
          'the Deployment, its ReplicaSet and its pods to be gone',
          120_000,
          250,
        );
        // A late PATCH of a server-side apply would create the object again: give one time to land.
        await sleep(2000);
        assert.deepEqual(await remaining(ns), [], 'nothing came back');
        const sent = patches().map((e) => `${e.objectRef?.resource}/${e.objectRef?.name} ${e.responseStatus?.code}`);
        figure(
          t,
          `cascade ${policy}: ${sent.length} PATCHes while the collector deleted 5 objects: ${sent.join(', ')}`,
        );
        assert.deepEqual(
          sent.filter((p) => !p.endsWith(' 200')),
          [],
          'no PATCH created an object (201) or failed (409: its object had gone)',
        );
        if (policy === 'Foreground') assert.deepEqual(sent, [], 'no PATCH: nothing labeller reads changed');
        labeller.assertRunning();
        assert.equal(labeller.counts.error, 0, `no error logged:\n${labeller.stderr.slice(-3000)}`);
      } finally {
        assert.equal((await labeller.stop()).code, 0);
      }
    });
  });
}
