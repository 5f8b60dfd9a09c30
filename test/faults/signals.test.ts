// SIGTERM at awkward moments: while starting, while discovery hangs, in the middle of the first
// list, at random points of a patch burst (Node and Deno), and as leader. Each must be a clean
// exit: status 0, no stack trace or unhandled rejection, no half-labelled object, and no Lease
// left held.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertCleanExit, assertNoCrash } from '../process/crash.ts';
import { Cluster } from '../cluster/cluster.ts';
import { sleep } from '../process/sleep.ts';
import { eventually } from '../process/eventually.ts';
import { figure } from '../process/figures.ts';
import { sharedKubeconfig, skip } from '../cluster/testrun.ts';
import { Labeller } from '../process/labeller.ts';
import type { Runtime } from '../process/runtime.ts';
import { FaultProxy } from '../cluster/faultproxy.ts';

describe('signals at random points', { skip }, () => {
  let cluster: Cluster;
  let ns: string;
  const cms = () => `/api/v1/namespaces/${ns}/configmaps`;
  before(async () => {
    cluster = await Cluster.connect(sharedKubeconfig());
    ns = await cluster.namespace('signals');
    await cluster.createMany(
      cms(),
      Array.from({ length: 300 }, (_, i) => `cm-${String(i).padStart(3, '0')}`),
      (name) => ({ metadata: { name } }),
    );
  });
  after(() => cluster?.close());

  /** Labels of every config map back to none, for the next run. */
  async function unlabelAll(): Promise<void> {
    const all = await cluster.labelsByName(cms());
    const names = [...all].filter(([, l]) => Object.keys(l).length > 0).map(([name]) => name);
    for (let i = 0; i < names.length; i += 25) {
      await Promise.all(
        names.slice(i, i + 25).map((name) =>
          cluster.client.json('PATCH', `${cms()}/${name}?fieldManager=labeller`, {
            headers: { 'content-type': 'application/apply-patch+yaml' },
            body: JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, labels: {} } }),
          })
        ),
      );
    }
  }

  async function assertAllOrNone(): Promise<number> {
    const labels = [...(await cluster.labelsByName(cms())).values()];
    for (const l of labels) {
      assert.ok(
        ('a' in l) === ('b' in l) && ('a' in l) === ('c' in l),
        `all or none of the labels: ${JSON.stringify(l)}`,
      );
    }
    return labels.filter((l) => 'a' in l).length;
  }

  const args = () => [
    '--kinds',
    'configmaps',
    '--label',
    'a=1',
    '--label',
    'b=2',
    '--label',
    'c={{name}}',
    '--namespace',
    ns,
    '--concurrency',
    '2',
    '--grace-period',
    '10s',
    // A line per write (debug): the signals come mid-burst, timed from the first write.
    '--log-level',
    'debug',
  ];

  test('SIGTERM within the first seconds after start (from the first log line on): a clean exit 0', async (t) => {
    const outcomes: string[] = [];
    // Timed from labeller's first log line, not from spawning: how long a loaded machine takes to
    // start Node says nothing of labeller, and a signal before its first output is out of contract.
    for (const ms of [0, 200 + Math.random() * 400, 1000 + Math.random() * 1000]) {
      const labeller = new Labeller(args(), { kubeconfig: cluster.kubeconfig });
      const first = await labeller.waitForLog(() => true, 60_000);
      await sleep(ms);
      const logged = labeller.logs.length;
      const exit = await labeller.stop();
      outcomes.push(
        `${Math.round(ms)} ms after "${first.msg}": ${
          exit.code === null ? `killed by ${exit.signal}` : `exit ${exit.code}`
        } (${logged} log line${logged === 1 ? '' : 's'} by then)`,
      );
      assertNoCrash(exit.stderr);
    }
    figure(t, `signal at startup: ${outcomes.join('; ')}`);
    assert.ok(outcomes.every((o) => /exit 0/.test(o)), outcomes.join('; '));
  });

  test('SIGTERM while discovery waits for an API server that does not answer: a clean exit 0', async (t) => {
    const proxy = await FaultProxy.start(cluster.server);
    proxy.pause();
    const labeller = new Labeller(args(), { kubeconfig: cluster.writeKubeconfig({ server: proxy.url }) });
    try {
      // Long enough for the process to have started and to be waiting on discovery.
      await eventually(async () => proxy.connections > 0, 'labeller to connect', 20_000);
      await sleep(500);
      const started = Date.now();
      const exit = await labeller.stop();
      figure(
        t,
        `signal during discovery: exit ${exit.code ?? exit.signal} after ${Date.now() - started} ms, stderr ${
          JSON.stringify(exit.stderr.trim().split('\n').at(-1))
        }`,
      );
      assertNoCrash(exit.stderr);
      assert.equal(exit.code, 0, exit.stderr);
      assert.doesNotMatch(exit.stderr, /labeller: SIGTERM/);
    } finally {
      labeller.kill();
      await proxy.close();
    }
  });

  test('SIGTERM in the middle of the first list (its response held back): exit 0 at once', async (t) => {
    const proxy = await FaultProxy.start(cluster.server);
    const labeller = new Labeller(args(), { kubeconfig: cluster.writeKubeconfig({ server: proxy.url }) });
    try {
      await labeller.waitForLog((l) => l.msg === 'starting', 30_000);
      proxy.pause();
      await sleep(300);
      assert.equal(labeller.logs.filter((l) => /list complete/.test(l.msg)).length, 0, 'the list was held back');
      const started = Date.now();
      const exit = await labeller.stop();
      const took = Date.now() - started;
      figure(t, `signal mid-list: exit ${exit.code} after ${took} ms`);
      assertCleanExit(exit);
      assert.ok(took < 5000, `exited within 5 s (${took} ms)`);
    } finally {
      labeller.kill();
      await proxy.close();
    }
  });

  for (const runtime of ['node', 'deno'] as Runtime[]) {
    test(`SIGTERM at random points of a patch burst: exit 0, no half-labelled object (${runtime})`, async (t) => {
      const outcomes: string[] = [];
      for (let run = 0; run < (runtime === 'node' ? 3 : 2); run++) {
        await unlabelAll();
        const labeller = new Labeller(args(), { kubeconfig: cluster.kubeconfig, runtime });
        try {
          await labeller.waitForLog((l) => l.msg === 'labels applied', 30_000);
          const ms = Math.random() * 600;
          await sleep(ms);
          const exit = await labeller.stop();
          assertCleanExit(exit);
          outcomes.push(`${Math.round(ms)} ms into the burst: ${await assertAllOrNone()} of 300 labelled`);
        } finally {
          labeller.kill();
        }
      }
      figure(t, `signal mid-burst (${runtime}): ${outcomes.join('; ')}`);
    });
  }

  test('SIGTERM as the leader: exit 0 and the Lease released (holderIdentity empty)', async (t) => {
    const lease = `labeller-${ns}`;
    // It waits for a write: a burst above may have labelled all 300 before its signal.
    await unlabelAll();
    const labeller = new Labeller([
      ...args(),
      '--leader-elect',
      '--leader-election-namespace',
      ns,
      '--leader-election-id',
      lease,
    ], { kubeconfig: cluster.kubeconfig });
    try {
      await labeller.waitForLog((l) => /became leader|leading/i.test(l.msg), 30_000);
      await labeller.waitForLog((l) => l.msg === 'labels applied', 30_000);
      const held = await cluster.get<{ spec: { holderIdentity?: string } }>(
        `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${lease}`,
      );
      assert.ok(held.spec.holderIdentity, 'the Lease is held while leading');
      const exit = await labeller.stop();
      assertCleanExit(exit);
      const released = await cluster.get<{ spec: { holderIdentity?: string | null } }>(
        `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${lease}`,
      );
      figure(
        t,
        `signal as leader: exit 0, Lease holder before "${held.spec.holderIdentity}", after "${
          released.spec.holderIdentity ?? ''
        }"`,
      );
      assert.ok(!released.spec.holderIdentity, `the Lease is released, holder "${released.spec.holderIdentity}"`);
    } finally {
      labeller.kill();
    }
  });
});
