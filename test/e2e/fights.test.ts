// A fight over a key against the real API server: a GitOps tool with self-heal (field manager
// `argocd-controller`) server-side applies its own value of `team` with force every second, and
// labeller runs with `conflicts: force`. labeller retakes the key a few times, then yields it
// (LabelFight Event naming the manager and the key, labeller_fights_total, one log line) and backs
// off, instead of writing in turns for ever. A GitOps re-apply that does not carry labeller's key
// leaves it alone.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { FIGHT_RETAKES } from '../../src/labelling/fights.ts';
import { byLabeller } from '../cluster/audit.ts';
import { assertCleanExit } from '../process/crash.ts';
import { figure } from '../process/figures.ts';
import { Labeller } from '../process/labeller.ts';
import { sleep } from '../process/sleep.ts';
import { freePorts } from '../controlplane/controlplane.ts';
import { scrape } from '../process/metrics.ts';
import {
  adminClient,
  type AuditEvent,
  auditSkip,
  auditTail,
  createNamespace,
  eventually,
  labelsOf,
  serviceAccountKubeconfig,
  skip,
} from './cluster.ts';
import { tool } from './helm.ts';

const OBJECTS = ['a', 'b', 'c'];

/** Server-side applies `labels` on a ConfigMap as `manager`, with force, as Argo CD's self-heal does. */
async function gitopsApply(ns: string, name: string, manager: string, labels: Record<string, string>): Promise<void> {
  const client = await adminClient();
  await client.json('PATCH', `/api/v1/namespaces/${ns}/configmaps/${name}`, {
    query: { fieldManager: manager, force: true },
    headers: { 'content-type': 'application/apply-patch+yaml' },
    body: JSON.stringify({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name, namespace: ns, labels },
      data: { k: 'v' },
    }),
  });
}

describe('fights over a key', { skip }, () => {
  test(
    'a GitOps tool forcing its value every second: labeller retakes a few times, then yields with a LabelFight Event, and writes boundedly',
    { skip: auditSkip, timeout: 180_000 },
    async (t) => {
      const ns = await createNamespace('fights');
      for (const name of OBJECTS) await gitopsApply(ns, name, 'argocd-controller', { app: name });
      const patches = auditTail((e: AuditEvent) =>
        byLabeller(e) && e.verb === 'patch' && e.objectRef?.resource === 'configmaps' && e.objectRef.namespace === ns
      );
      const labeller = new Labeller(
        ['--kinds', 'configmaps', '--label', 'team=payments', '--namespace', ns, '--conflicts', 'force'],
        { env: { POD_NAME: 'labeller-e2e' } },
      );
      try {
        await eventually(
          async () =>
            (await Promise.all(OBJECTS.map((n) => labelsOf(`/api/v1/namespaces/${ns}/configmaps/${n}`))))
              .every((labels) => labels['team'] === 'payments'),
          'labelled',
        );
        // Self-heal: the GitOps tool takes team back every second for 30 s.
        const stop = Date.now() + 30_000;
        while (Date.now() < stop) {
          await Promise.all(OBJECTS.map((n) => gitopsApply(ns, n, 'argocd-controller', { app: n, team: 'ops' })));
          await sleep(1000);
        }
        // Writes: the dry runs that ask who holds the key write nothing.
        const writes = patches().filter((e) =>
          e.responseStatus?.code === 200 && !e.requestURI.includes('dryRun=')
        ).length;
        const client = await adminClient();
        const events = await client.json<{ items: { reason: string; note: string; regarding: { name: string } }[] }>(
          'GET',
          `/apis/events.k8s.io/v1/namespaces/${ns}/events`,
        );
        const fights = events.items.filter((e) => e.reason === 'LabelFight');
        figure(
          t,
          `fight: ${writes} PATCHes from labeller over ${OBJECTS.length} objects in 30 s of self-heal (before: about 25 per object)`,
        );
        // Per object: the first label, FIGHT_RETAKES retakes.
        assert.ok(writes <= OBJECTS.length * (FIGHT_RETAKES + 2), `labeller wrote ${writes} times`);
        assert.deepEqual(fights.map((e) => e.regarding.name).sort(), OBJECTS, 'one LabelFight per object');
        assert.match(
          fights[0]!.note,
          /^label team was taken back by field manager "argocd-controller" each time labeller set it/,
        );
        assert.ok(
          labeller.logs.some((l) =>
            /taken back by a manager labeller yields to/.test(l.msg) && l['manager'] === 'argocd-controller'
          ),
        );
        for (const name of OBJECTS) {
          assert.equal((await labelsOf(`/api/v1/namespaces/${ns}/configmaps/${name}`))['team'], 'ops', 'yielded');
        }
      } finally {
        assertCleanExit(await labeller.stop());
      }
    },
  );

  test("a GitOps re-apply that does not carry labeller's key leaves it in place", async () => {
    const ns = await createNamespace('fights-gitops');
    await gitopsApply(ns, 'web', 'argocd-controller', { app: 'web' });
    const labeller = new Labeller(['--kinds', 'configmaps', '--label', 'team=payments', '--namespace', ns]);
    try {
      await eventually(
        async () => (await labelsOf(`/api/v1/namespaces/${ns}/configmaps/web`))['team'] === 'payments',
        'labelled',
      );
      for (let i = 0; i < 5; i++) await gitopsApply(ns, 'web', 'argocd-controller', { app: 'web', tier: String(i) });
      await sleep(2000);
      assert.deepEqual(await labelsOf(`/api/v1/namespaces/${ns}/configmaps/web`), {
        app: 'web',
        team: 'payments',
        tier: '4',
      });
    } finally {
      assertCleanExit(await labeller.stop());
    }
  });
  test(
    "a tenant flipping labeller's key every 3 s cannot wear it down: put back each time, a LabelRetaken Event and labeller_retakes_total naming kubectl-label, writes bounded",
    { skip: auditSkip, timeout: 180_000 },
    async (t) => {
      const ns = await createNamespace('fights-tenant');
      const client = await adminClient();
      await client.json('POST', `/api/v1/namespaces/${ns}/configmaps`, {
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ metadata: { name: 'cc' }, data: { k: 'v' } }),
      });
      const tenant = await serviceAccountKubeconfig(ns, 'tenant', [
        { apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'patch', 'update'] },
      ]);
      const patches = auditTail((e: AuditEvent) =>
        byLabeller(e) && e.verb === 'patch' && e.objectRef?.resource === 'configmaps' && e.objectRef.namespace === ns &&
        e.responseStatus?.code === 200 && !e.requestURI.includes('dryRun=')
      );
      const [port] = await freePorts(1);
      const labeller = new Labeller(
        ['--kinds', 'configmaps', '--label', 'cc=cc-1', '--namespace', ns, '--http-port', String(port)],
        { env: { POD_NAME: 'labeller-e2e' } },
      );
      try {
        const path = `/api/v1/namespaces/${ns}/configmaps/cc`;
        await eventually(async () => (await labelsOf(path))['cc'] === 'cc-1', 'labelled');
        // The case: kubectl label --overwrite every 3 s, sampled every second for 40 s.
        let samples = 0;
        let ours = 0;
        let flips = 0;
        const stop = Date.now() + 40_000;
        while (Date.now() < stop) {
          if (samples % 3 === 0) {
            const run = await tool('kubectl', [
              '--kubeconfig',
              tenant,
              'label',
              '-n',
              ns,
              'configmap/cc',
              `cc=nobody-${flips++}`,
              '--overwrite',
            ]);
            assert.equal(run.code, 0, run.stderr);
          }
          await sleep(1000);
          samples++;
          if ((await labelsOf(path))['cc'] === 'cc-1') ours++;
        }
        const writes = patches().length;
        figure(
          t,
          `tenant flipping every 3 s: labeller's value in ${ours} of ${samples} samples (before: 9 of 40), ${writes} PATCHes for ${flips} flips`,
        );
        assert.ok(ours >= samples - 3, `labeller's value in only ${ours} of ${samples} samples`);
        assert.ok(writes <= flips + 1, `${writes} writes for ${flips} flips: one per flip at most, and the first`);
        const events = await client.json<{ items: { reason: string; note: string }[] }>(
          'GET',
          `/apis/events.k8s.io/v1/namespaces/${ns}/events`,
        );
        const retaken = events.items.find((e) => e.reason === 'LabelRetaken');
        assert.match(
          retaken?.note ?? '',
          /^label cc was changed by field manager "kubectl-label"; labeller put its value back/,
        );
        assert.ok(
          (await scrape(port!, 'labeller_retakes_total', { field: 'labels', manager: 'kubectl-label' }) ?? 0) >=
            flips - 1,
        );
        assert.equal(labeller.logs.filter((l) => /yields to/.test(l.msg)).length, 0, 'never yielded');
      } finally {
        assertCleanExit(await labeller.stop());
      }
    },
  );
});
