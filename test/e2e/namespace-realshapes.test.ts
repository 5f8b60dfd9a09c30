// A namespace deleted with labelled objects in it, finalized by the namespace controller as in a
// real cluster (issue 22): its Deployment, ReplicaSet, Pods (deleted gracefully; kwok lets them
// go as a kubelet would) and ConfigMaps are removed, then the namespace itself. A cluster-wide
// labeller that labelled all of them from `namespace.*` and `root.*` logs no error, sends no
// PATCH into the namespace while it goes, and goes on.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { byLabeller } from '../cluster/audit.ts';
import { Labeller } from '../process/labeller.ts';
import { fullSkip } from '../cluster/testrun.ts';
import { adminClient, auditSkip, auditTail, configFile, create, eventually, patchLabels } from './cluster.ts';
import { deployment, gone, isReady, list, type Meta, pod, pods, rolledOut, workloadNamespace } from './workloads.ts';

const FIELD_MANAGER = 'labeller-nsdelete-e2e';
// The cluster is shared with other test files: this file's labeller selects only its own objects.
const CASE = { 'e2e.labeller/case': `nsdelete-${randomBytes(3).toString('hex')}` };
const TEAM = 'example.com/team';
const WORKLOAD = 'example.com/workload';
const CONFIG = `
labels:
  ${TEAM}: "{{namespace.labels.team}}"
kinds:
  - resource: configmaps
  - resource: deployments
  - resource: replicasets
    labels:
      ${WORKLOAD}: "{{root.kind}}.{{root.name}}"
  - resource: pods
    labels:
      ${WORKLOAD}: "{{root.kind}}.{{root.name}}"
`;

describe('a namespace deleted with labelled objects in it', { skip: fullSkip || auditSkip }, () => {
  test('the namespace controller removes everything and then the namespace; labeller logs no error and sends no PATCH into it meanwhile', async () => {
    const ns = await workloadNamespace('nsdelete');
    await patchLabels(`/api/v1/namespaces/${ns}`, { team: 'payments' });
    await create(`/apis/apps/v1/namespaces/${ns}/deployments`, deployment('web', 3, CASE));
    await create(`/api/v1/namespaces/${ns}/pods`, pod('solo', CASE));
    for (const name of ['a', 'b', 'c']) {
      await create(`/api/v1/namespaces/${ns}/configmaps`, { metadata: { name, labels: CASE } });
    }
    await rolledOut(ns, 'web');
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
      const collections = [
        `/api/v1/namespaces/${ns}/configmaps`,
        `/apis/apps/v1/namespaces/${ns}/deployments`,
        `/apis/apps/v1/namespaces/${ns}/replicasets`,
        `/api/v1/namespaces/${ns}/pods`,
      ];
      await eventually(
        async () => {
          const all = (await Promise.all(collections.map((c) => list<{ metadata: Meta }>(c, selector)))).flat();
          const running = await pods(ns);
          return all.length === 3 + 1 + 1 + 4 && running.every(isReady) &&
            all.every((o) => o.metadata.labels?.[TEAM] === 'payments') &&
            running.every((p) =>
              p.metadata.labels?.[WORKLOAD] === (p.metadata.name === 'solo' ? 'Pod.solo' : 'Deployment.web')
            );
        },
        'every object labelled',
        60_000,
        250,
      );

      const intoNamespace = auditTail((e) =>
        byLabeller(e) && e.objectRef?.namespace === ns && e.verb === 'patch' &&
        e.requestURI.includes(`fieldManager=${FIELD_MANAGER}`)
      );
      await (await adminClient()).request('DELETE', `/api/v1/namespaces/${ns}`);
      await gone(`/api/v1/namespaces/${ns}`, `namespace ${ns} finalized and removed`);
      assert.deepEqual(
        intoNamespace().map((e) => `${e.requestURI} ${e.responseStatus?.code}`),
        [],
        'no PATCH to objects being deleted',
      );
      labeller.assertRunning();
      assert.equal(labeller.counts.error, 0, `no error logged:\n${labeller.stderr.slice(-3000)}`);
    } finally {
      assert.equal((await labeller.stop()).code, 0);
    }
  });
});
