// Several replicas with leader election: only the leader writes, a standby takes over within
// about one lease duration when the leader dies, a leader that cannot renew stops and exits,
// and a clean shutdown hands the lease over at once.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  adminClient,
  auditEvents,
  auditSkip,
  create,
  createNamespace,
  eventually,
  labelsOf,
  skip,
  writeKubeconfig,
} from './cluster.ts';
import { Labeller } from '../process/labeller.ts';
import { FaultProxy } from '../cluster/faultproxy.ts';
import { sleep } from '../process/sleep.ts';

// Short timings keep the test quick; the ratios are controller-runtime's (15 s / 10 s / 2 s).
const LEASE_MS = 3000;
const timings = ['--lease-duration', '3s', '--renew-deadline', '2s', '--retry-period', '400ms'];

async function holder(ns: string): Promise<string | undefined> {
  const client = await adminClient();
  const lease = await client.json<{ spec: { holderIdentity?: string } }>(
    'GET',
    `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/labeller`,
  );
  return lease.spec.holderIdentity ?? undefined;
}

function replica(ns: string, extra: { kubeconfig?: string } = {}): Labeller {
  return new Labeller([
    '--kinds',
    'configmaps',
    '--label',
    'team=platform',
    '--namespace',
    ns,
    '--leader-elect',
    '--leader-election-namespace',
    ns,
    ...timings,
  ], extra);
}

const configMap = (name: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name } });

describe('leader election', { skip }, () => {
  test('only the leader patches; when it is killed the standby takes over within a lease duration; no double writes', {
    skip: auditSkip,
  }, async () => {
    const ns = await createNamespace('leader');
    for (let i = 0; i < 10; i++) await create(`/api/v1/namespaces/${ns}/configmaps`, configMap(`before-${i}`));
    const patches = () =>
      auditEvents((e) =>
        e.verb === 'patch' && e.objectRef?.namespace === ns && e.objectRef.resource === 'configmaps' &&
        (e.userAgent ?? '').startsWith('labeller/')
      ).length;

    const first = replica(ns);
    await first.waitForLog((l) => l.msg === 'became leader');
    const second = replica(ns);
    try {
      await second.waitForLog((l) => l.msg === 'initial list complete');
      await eventually(
        async () => (await labelsOf(`/api/v1/namespaces/${ns}/configmaps/before-9`))['team'] === 'platform',
        'the leader to label',
      );
      await eventually(async () => patches() === 10 && 'ten', 'one patch per object');
      assert.ok(
        !second.logs.some((l) => l.msg === 'became leader' || l.msg === 'objects written'),
        'the standby neither leads nor writes',
      );

      first.process.kill('SIGKILL');
      const killed = Date.now();
      const leads = await second.waitForLog((l) => l.msg === 'became leader', 10_000);
      // By the standby's own clock (its log may reach us late): the lease expires LEASE_MS after
      // the leader's last renewal, and the standby tries again every retry period (jittered).
      const takeover = Date.parse(String(leads['time'])) - killed;
      assert.ok(takeover < LEASE_MS * 1.5, `took over in ${takeover} ms, lease duration ${LEASE_MS} ms`);

      for (let i = 0; i < 5; i++) await create(`/api/v1/namespaces/${ns}/configmaps`, configMap(`after-${i}`));
      await eventually(
        async () => (await labelsOf(`/api/v1/namespaces/${ns}/configmaps/after-4`))['team'] === 'platform',
        'the new leader to label',
      );
      await eventually(async () => patches() === 15 && 'fifteen', 'one patch per object');
      await sleep(1000);
      assert.equal(patches(), 15, 'no object was written twice');
    } finally {
      first.process.kill('SIGKILL');
      assert.equal((await second.stop()).code, 0);
    }
  });

  test('a leader that cannot renew its lease stops writing and exits; a clean shutdown releases the lease', async () => {
    const ns = await createNamespace('lease-lost');
    await create(`/api/v1/namespaces/${ns}/configmaps`, configMap('cm'));
    const proxy = await FaultProxy.start((await adminClient()).server);
    const cut = replica(ns, { kubeconfig: writeKubeconfig({ server: proxy.url }) });
    await cut.waitForLog((l) => l.msg === 'became leader');
    const standby = replica(ns);
    try {
      await standby.waitForLog((l) => l.msg === 'initial list complete');
      proxy.pause();
      const exit = await cut.exited;
      assert.equal(exit.code, 1, 'a leader that lost its lease exits with status 1');
      assert.ok(cut.logs.some((l) => l.msg === 'lost leadership'));
      await standby.waitForLog((l) => l.msg === 'became leader', 10_000);
      assert.match((await holder(ns)) ?? '', /_[0-9a-f]{8}$/);

      // A clean shutdown gives the lease up: nobody holds it afterwards.
      assert.equal((await standby.stop()).code, 0);
      assert.ok(standby.logs.some((l) => l.msg === 'released leadership'));
      assert.equal(await holder(ns), undefined);
    } finally {
      cut.process.kill('SIGKILL');
      standby.process.kill('SIGKILL');
      await proxy.close();
    }
  });
});
