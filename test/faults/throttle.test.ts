// Throttling by the API server itself: API Priority and Fairness puts labeller's ServiceAccount
// in a priority level with the smallest share there is (nominalConcurrencyShares 1, nothing
// borrowed, excess rejected), so a burst of patches meets real 429s with `Retry-After: 1`.
// labeller must honour Retry-After and converge without a retry storm; the audit log counts.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertCleanExit } from '../process/crash.ts';
import { auditEvents, receivedAt } from '../cluster/audit.ts';
import { Cluster } from '../cluster/cluster.ts';
import { eventually } from '../process/eventually.ts';
import { figure } from '../process/figures.ts';
import { sharedKubeconfig, skip } from '../cluster/testrun.ts';
import { Labeller } from '../process/labeller.ts';
import { sleep } from '../process/sleep.ts';

const auditSkip = skip ||
  (process.env['E2E_AUDIT_LOG'] ? false : "needs the audit log of the project's own control plane");
const OBJECTS = 300;

describe('throttled by API Priority and Fairness', { skip: auditSkip }, () => {
  let cluster: Cluster;
  before(async () => {
    cluster = await Cluster.connect(sharedKubeconfig());
  });
  after(() => cluster?.close());

  /** A priority level with one nominal share that rejects what does not fit, for the given ServiceAccounts. */
  async function tinyShare(name: string, namespace: string, serviceAccounts: readonly string[]): Promise<void> {
    const fc = '/apis/flowcontrol.apiserver.k8s.io/v1';
    await cluster.post(`${fc}/prioritylevelconfigurations`, {
      metadata: { name },
      spec: {
        type: 'Limited',
        limited: {
          nominalConcurrencyShares: 1,
          lendablePercent: 0,
          borrowingLimitPercent: 0,
          limitResponse: { type: 'Reject' },
        },
      },
    });
    cluster.onClose(() => cluster.delete(`${fc}/prioritylevelconfigurations/${name}`));
    await cluster.post(`${fc}/flowschemas`, {
      metadata: { name },
      spec: {
        priorityLevelConfiguration: { name },
        matchingPrecedence: 500,
        distinguisherMethod: { type: 'ByUser' },
        rules: [{
          subjects: serviceAccounts.map((sa) => ({ kind: 'ServiceAccount', serviceAccount: { name: sa, namespace } })),
          resourceRules: [{ verbs: ['*'], apiGroups: ['*'], resources: ['*'], clusterScope: true, namespaces: ['*'] }],
          nonResourceRules: [{ verbs: ['*'], nonResourceURLs: ['*'] }],
        }],
      },
    });
    cluster.onClose(() => cluster.delete(`${fc}/flowschemas/${name}`));
    // The API server picks the new configuration up within a second or so.
    await eventually(
      async () => {
        const fs = await cluster.get<{ status?: { conditions?: { type: string; status: string }[] } }>(
          `${fc}/flowschemas/${name}`,
        );
        return fs.status?.conditions?.some((c) => c.type === 'Dangling' && c.status === 'False');
      },
      'the FlowSchema to be active',
      10_000,
    );
    await sleep(1000);
  }

  test(`${OBJECTS} objects, 16 workers, a priority level of 1 share: 429s honoured (Retry-After), converges, no retry storm`, async (t) => {
    const ns = await cluster.namespace('throttled');
    const cms = `/api/v1/namespaces/${ns}/configmaps`;
    const names = Array.from({ length: OBJECTS }, (_, i) => `cm-${String(i).padStart(3, '0')}`);
    await cluster.createMany(cms, names, (name) => ({ metadata: { name } }));
    const sa = await cluster.serviceAccount(ns, 'labeller', [{
      apiGroups: [''],
      resources: ['configmaps'],
      verbs: ['get', 'list', 'watch', 'patch'],
    }]);
    await tinyShare(ns, ns, ['labeller']);
    const started = Date.now();
    const labeller = new Labeller([
      '--kinds',
      'configmaps',
      '--label',
      'team=platform',
      '--label',
      'example.com/name={{name}}',
      '--namespace',
      ns,
      '--concurrency',
      '16',
    ], { kubeconfig: sa.kubeconfig });
    let converged = 0;
    try {
      await eventually(
        async () => [...(await cluster.labelsByName(cms)).values()].every((l) => l['team'] === 'platform'),
        'every object to be labelled',
        90_000,
        250,
      );
      converged = Date.now();
      await sleep(2000);
    } finally {
      const exit = await labeller.stop();
      labeller.kill();
      assertCleanExit(exit);
    }

    const mine = auditEvents(
      process.env['E2E_AUDIT_LOG']!,
      (e) => e.user?.username === sa.username && receivedAt(e) >= started - 1000,
    );
    const patches = mine.filter((e) => e.verb === 'patch');
    const throttled = mine.filter((e) => e.responseStatus?.code === 429);
    // Retry-After: 1 means the same object comes back no sooner than a second later.
    const byObject = new Map<string, number[]>();
    for (const e of patches) {
      byObject.set(e.objectRef?.name ?? '', [...(byObject.get(e.objectRef?.name ?? '') ?? []), receivedAt(e)]);
    }
    const early: string[] = [];
    for (const e of patches.filter((p) => p.responseStatus?.code === 429)) {
      const at = receivedAt(e);
      const next = (byObject.get(e.objectRef?.name ?? '') ?? []).filter((x) => x > at).sort((a, b) => a - b)[0];
      if (next !== undefined && next - at < 900) early.push(`${e.objectRef?.name} after ${next - at} ms`);
    }
    const seconds = (converged - started) / 1000;
    const perSecond = new Map<number, number>();
    for (const e of mine) {
      perSecond.set(
        Math.floor((receivedAt(e) - started) / 1000),
        (perSecond.get(Math.floor((receivedAt(e) - started) / 1000)) ?? 0) + 1,
      );
    }
    figure(
      t,
      `throttling: ${OBJECTS} objects labelled in ${
        seconds.toFixed(1)
      } s; ${mine.length} requests reached the API server (${patches.length} PATCH, ${throttled.length} answered 429), ` +
        `busiest second ${Math.max(...perSecond.values())} requests; retried sooner than Retry-After: ${early.length}`,
    );
    assert.ok(throttled.length > 0, 'the priority level did throttle labeller (else this test proves nothing)');
    assert.deepEqual(early.slice(0, 10), [], 'no object retried sooner than Retry-After after a 429');
    // No storm: each object needs one successful patch; the 429s must stay within a small
    // multiple of that rather than growing with every second of throttling.
    assert.ok(patches.length <= OBJECTS * 4, `${patches.length} PATCH requests for ${OBJECTS} objects`);
    assert.ok(labeller.counts.applied >= OBJECTS, 'every object was patched once (the `objects written` lines add up)');
  });
});
