// A Deployment as a real cluster runs it (issue 22): the deployment controller makes a
// ReplicaSet, the ReplicaSet controller its pods, the scheduler binds them to kwok's nodes, which
// make them Running and Ready. Labels from `root.*` and `owner.*` follow each step: the first
// rollout, then `kubectl rollout restart` (a new ReplicaSet, every pod replaced, the old ones
// deleted as a kubelet lets them go). Every pod carries its Deployment and its own ReplicaSet,
// every ReplicaSet its Deployment, with one PATCH per new object and no GET or LIST beyond
// labeller's own caches.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type AuditEvent, byLabeller } from '../cluster/audit.ts';
import { figure } from '../process/figures.ts';
import { Labeller } from '../process/labeller.ts';
import { fullSkip } from '../cluster/testrun.ts';
import { auditSkip, auditTail, configFile, create, eventually } from './cluster.ts';
import {
  controllerOf,
  deployment,
  isReady,
  kubectl,
  list,
  type Meta,
  pods,
  rolledOut,
  workloadNamespace,
} from './workloads.ts';

const FIELD_MANAGER = 'labeller-rollout-e2e';
const WORKLOAD = 'example.com/workload';
const OWNER = 'example.com/owner';
const CONFIG = `
kinds:
  - resource: replicasets
    labels:
      ${WORKLOAD}: "{{root.kind}}.{{root.name}}"
  - resource: pods
    labels:
      ${WORKLOAD}: "{{root.kind}}.{{root.name}}"
      ${OWNER}: "{{owner.name}}"
`;
const REPLICAS = 3;

interface ReplicaSet {
  readonly metadata: Meta;
  readonly spec: { readonly replicas: number };
}

/**
 * Waits until `web` has exactly its REPLICAS pods, all Ready, all of its one scaled-up ReplicaSet,
 * none left terminating, and every pod and ReplicaSet carries the labels; returns their names.
 */
async function settled(ns: string): Promise<{ replicaSet: string; replicaSets: string[]; pods: string[] }> {
  return await eventually(
    async () => {
      const replicaSets = await list<ReplicaSet>(`/apis/apps/v1/namespaces/${ns}/replicasets`);
      const current = replicaSets.filter((rs) => rs.spec.replicas > 0);
      const all = await pods(ns);
      if (current.length !== 1 || all.length !== REPLICAS || !all.every(isReady)) return false;
      const replicaSet = current[0]!.metadata.name;
      const right =
        all.every((p) =>
          controllerOf(p) === replicaSet && p.metadata.labels?.[WORKLOAD] === 'Deployment.web' &&
          p.metadata.labels[OWNER] === replicaSet
        ) && replicaSets.every((rs) => rs.metadata.labels?.[WORKLOAD] === 'Deployment.web');
      return right && {
        replicaSet,
        replicaSets: replicaSets.map((rs) => rs.metadata.name),
        pods: all.map((p) => p.metadata.name),
      };
    },
    `the ${REPLICAS} pods of web Ready and labelled, the old ones gone`,
    120_000,
    250,
  );
}

describe('a Deployment rolled out and restarted on a full cluster', { skip: fullSkip || auditSkip }, () => {
  test('the new ReplicaSet and its new pods carry the Deployment (root.*) and their ReplicaSet (owner.*) after each step; labeller patches the new objects only, never fails one, and reads only through its caches', async (t) => {
    const ns = await workloadNamespace('rollout');
    const requests = auditTail((e) =>
      byLabeller(e) && e.objectRef?.namespace === ns &&
      (e.verb !== 'patch' || e.requestURI.includes(`fieldManager=${FIELD_MANAGER}`))
    );
    /** Checks the PATCHes of one step: each of `objects` at least once, nothing else, none failed. */
    const checkPatches = (step: string, events: readonly AuditEvent[], objects: readonly string[]): void => {
      const patches = events.filter((e) => e.verb === 'patch');
      assert.deepEqual(
        [...new Set(patches.map((e) => e.objectRef?.name))].toSorted(),
        objects.toSorted(),
        `${step}: the new objects patched, nothing else (nothing on its way out)`,
      );
      assert.deepEqual(
        patches.filter((e) => (e.responseStatus?.code ?? 0) >= 300).map((e) =>
          `${e.requestURI} ${e.responseStatus?.code}`
        ),
        [],
        `${step}: no PATCH failed`,
      );
      // A pod changes right after its creation (bound, then Running and Ready): a reconcile that
      // reads the cache before labeller's own PATCH has come back through the watch applies again.
      figure(t, `rollout ${step}: ${patches.length} PATCHes for ${objects.length} new objects`);
    };
    const labeller = new Labeller([
      '--config',
      configFile(CONFIG),
      '--namespace',
      ns,
      '--field-manager',
      FIELD_MANAGER,
    ]);
    try {
      await create(`/apis/apps/v1/namespaces/${ns}/deployments`, deployment('web', REPLICAS));
      await rolledOut(ns, 'web');
      const first = await settled(ns);
      let events = requests();
      const reads = events.filter((e) => e.verb === 'get' || e.verb === 'list').map((e) =>
        `${e.verb} ${e.objectRef?.resource}`
      );
      assert.deepEqual(
        reads,
        [...new Set(reads.filter((r) => r.startsWith('list ')))],
        "no GET, and at most one LIST per resource: what fills a cache (labelled kinds', owners')",
      );
      checkPatches('first rollout', events, [first.replicaSet, ...first.pods]);

      // `kubectl rollout restart`: a new pod template, so a new ReplicaSet and new pods.
      await kubectl(['rollout', 'restart', '-n', ns, 'deployment/web']);
      await rolledOut(ns, 'web');
      const second = await settled(ns);
      assert.notEqual(second.replicaSet, first.replicaSet, 'a new ReplicaSet');
      assert.deepEqual(second.replicaSets.toSorted(), [first.replicaSet, second.replicaSet].toSorted());
      assert.ok(second.pods.every((p) => !first.pods.includes(p)), 'every pod replaced');
      events = requests();
      assert.deepEqual(
        events.filter((e) => e.verb === 'get' || e.verb === 'list').map((e) => `${e.verb} ${e.requestURI}`),
        [],
        'no GET or LIST: owners come from the caches',
      );
      checkPatches('restart', events, [second.replicaSet, ...second.pods]);
      labeller.assertRunning();
    } finally {
      assert.equal((await labeller.stop()).code, 0);
    }
  });
});
