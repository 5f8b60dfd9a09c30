// Protection never in the way (issue 46), on the full control plane: with `protect: deny` on the
// workloads and their pods, the cluster's own controllers create pods from templates that carry
// the protected key with another value (a Deployment's ReplicaSets, a StatefulSet, a Job): none
// of those creates is refused, and each pod carries labeller's value from its create. A rollout
// (kubectl rollout restart), the garbage collector deleting a Deployment's ReplicaSets and pods,
// and a namespace's deletion (finalizers, the namespace controller) go through too: none of them
// touches a protected key.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { fullSkip } from '../cluster/testrun.ts';
import { assertCleanExit } from '../process/crash.ts';
import { Labeller } from '../process/labeller.ts';
import { policiesSkip } from './admission.ts';
import { adminClient, auditEvents, auditSkip, create, eventually, patchLabels } from './cluster.ts';
import { deployment, gone, kubectl, list, type Meta, rolledOut, workloadNamespace } from './workloads.ts';

const TEAM = 'example.com/team';

/** A container kwok pretends to run. */
const containers = [{ name: 'c', image: 'registry.k8s.io/pause:3.10' }];

describe('protection on a full control plane', { skip: (await policiesSkip(fullSkip)) || auditSkip }, () => {
  test(
    "under deny, the cluster's controllers create every pod from templates carrying another value, labelled; rollouts, the garbage collector and a namespace's deletion pass",
    {
      timeout: 300_000,
    },
    async () => {
      const ns = await workloadNamespace('protect-real');
      await patchLabels(`/api/v1/namespaces/${ns}`, { team: 'payments' });
      const fieldManager = `protect-real-${ns.slice(-6)}`;
      const started = Date.now();
      const labeller = new Labeller([
        ...['--kinds', 'deployments,statefulsets,jobs,pods', '--namespace', ns, '--field-manager', fieldManager],
        ...['--label', `${TEAM}={{namespace.labels.team}}`, '--protect', 'deny', '--admission-policies'],
      ]);
      try {
        await labeller.waitForLog(
          (l) => l.msg === 'admission policy applied' && l['kind'] === 'ValidatingAdmissionPolicyBinding',
          60_000,
        );
        // The policies in force: a probe pod created with another value gets labeller's.
        let probes = 0;
        await eventually(async () => {
          const probe = await create<{ metadata: Meta }>(`/api/v1/namespaces/${ns}/pods`, {
            metadata: { name: `probe-${probes++}`, labels: { [TEAM]: 'mine' } },
            spec: { containers },
          });
          return probe.metadata.labels?.[TEAM] === 'payments';
        }, 'the policies in force');

        // Templates carrying the protected key with another value (not in any selector).
        await create(`/apis/apps/v1/namespaces/${ns}/deployments`, deployment('web', 3, { [TEAM]: 'mine' }));
        await create(`/apis/apps/v1/namespaces/${ns}/statefulsets`, {
          metadata: { name: 'db', labels: { [TEAM]: 'mine' } },
          spec: {
            replicas: 2,
            serviceName: 'db',
            selector: { matchLabels: { app: 'db' } },
            template: { metadata: { labels: { app: 'db', [TEAM]: 'mine' } }, spec: { containers } },
          },
        });
        await create(`/apis/batch/v1/namespaces/${ns}/jobs`, {
          metadata: { name: 'once', labels: { [TEAM]: 'mine' } },
          spec: {
            template: {
              metadata: { labels: { app: 'once', [TEAM]: 'mine' } },
              spec: { restartPolicy: 'Never', containers },
            },
          },
        });
        await rolledOut(ns, 'web');
        await kubectl(['rollout', 'restart', '-n', ns, 'deployment/web']);
        await rolledOut(ns, 'web');
        const pods = await eventually(async () => {
          const found = (await list<{ metadata: Meta }>(`/api/v1/namespaces/${ns}/pods`)).filter((p) =>
            !p.metadata.name.startsWith('probe-')
          );
          const apps = new Set(found.map((p) => p.metadata.labels?.['app']));
          return found.length >= 6 && apps.has('web') && apps.has('db') && apps.has('once') && found;
        }, 'the pods of the Deployment, the StatefulSet and the Job');
        for (const pod of pods) assert.equal(pod.metadata.labels?.[TEAM], 'payments', pod.metadata.name);

        // The garbage collector, and a namespace's deletion.
        const admin = await adminClient();
        await admin.json('DELETE', `/apis/apps/v1/namespaces/${ns}/deployments/web`, {
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ propagationPolicy: 'Foreground' }),
        });
        await gone(`/apis/apps/v1/namespaces/${ns}/deployments/web`, 'the Deployment, after its dependents');
        await admin.json('DELETE', `/api/v1/namespaces/${ns}`);
        await gone(`/api/v1/namespaces/${ns}`, 'the namespace', 180_000);

        // Not one request in the namespace refused by an admission policy (a terminating namespace
        // refuses creates of its own: the StatefulSet controller's, until the StatefulSet is gone).
        const refused = auditEvents((e) =>
          e.objectRef?.namespace === ns && e.stage === 'ResponseComplete' &&
          Date.parse(e.requestReceivedTimestamp ?? '') >= started && (e.responseStatus?.code ?? 0) >= 400 &&
          /AdmissionPolicy/.test(e.responseStatus?.message ?? '')
        );
        assert.deepEqual(
          refused.map((e) =>
            `${e.verb} ${e.objectRef?.resource}/${e.objectRef?.name} by ${e.user?.username}: ${e.responseStatus?.message}`
          ),
          [],
        );
        const answered = auditEvents((e) =>
          e.objectRef?.namespace === ns && e.verb === 'create' && e.objectRef.resource === 'pods' &&
          e.stage === 'ResponseComplete' && (e.user?.username ?? '').startsWith('system:serviceaccount:kube-system:')
        );
        assert.ok(
          answered.filter((e) => e.responseStatus?.code === 201).length >= 6,
          'the controllers created the pods',
        );
      } finally {
        assertCleanExit(await labeller.stop());
      }
    },
  );
});
