// The HTTP endpoints a cluster uses: /readyz is ready only with the initial lists done and the watches up, /metrics
// carries controller-runtime's names (so existing dashboards work) and labeller's own.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  adminClient,
  create,
  createNamespace,
  eventually,
  labelsOf,
  patchLabels,
  skip,
  writeKubeconfig,
} from './cluster.ts';
import { Labeller } from '../process/labeller.ts';
import { FaultProxy } from '../cluster/faultproxy.ts';
import { sample } from '../process/metrics.ts';

async function get(port: number, path: string): Promise<{ status: number; body: string }> {
  const response = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: response.status, body: await response.text() };
}

describe('HTTP endpoints', { skip }, () => {
  test("/readyz is 503 until every kind's first list is complete and while a watch is down, else 200; /healthz is 200 throughout", async () => {
    const ns = await createNamespace('readyz');
    const proxy = await FaultProxy.start((await adminClient()).server);
    proxy.pause();
    const labeller = new Labeller([
      '--kinds',
      'configmaps',
      '--label',
      'a=1',
      '--namespace',
      ns,
      '--http-port',
      '18391',
    ], { kubeconfig: writeKubeconfig({ server: proxy.url }) });
    try {
      await labeller.waitForLog((l) => l.msg === 'serving');
      const notReady = await get(18391, '/readyz');
      assert.equal(notReady.status, 503);
      assert.match(notReady.body, /waiting for API discovery/);
      assert.equal((await get(18391, '/healthz')).status, 200);
      assert.equal((await get(18391, '/metrics')).status, 200, 'a scrape never fails, started or not');
      proxy.resume();
      let readyAt = 0;
      await eventually(
        async () => (await get(18391, '/readyz')).status === 200 && (readyAt = Date.now()) > 0,
        '/readyz to turn ready',
      );
      // The log line may reach us after the HTTP answer: compare the times, not the arrival order.
      const listed = await labeller.waitForLog((l) => l.msg === 'initial list complete');
      assert.ok(Date.parse(String(listed['time'])) <= readyAt, 'ready only after the list');

      // The API server out of reach: the watch fails, and stays down until the server is back.
      proxy.refuse(true);
      proxy.drop();
      const down = await eventually(async () => {
        const readyz = await get(18391, '/readyz');
        return readyz.status === 503 && readyz;
      }, '/readyz to report the watch down');
      assert.match(down.body, new RegExp(`^not ready:\n- configmaps/${ns}: watch down: .+`));
      assert.equal((await get(18391, '/healthz')).status, 200, 'alive all along: a restart would not help');
      proxy.refuse(false);
      await eventually(async () => (await get(18391, '/readyz')).status === 200, '/readyz to turn ready again');
      await labeller.waitForLog((l) => l.msg === 'watch re-established');
    } finally {
      proxy.refuse(false);
      proxy.resume();
      assert.equal((await labeller.stop()).code, 0);
      await proxy.close();
    }
  });

  test('labeller_objects_managed and labeller_objects_pending follow the cache: all pending before the first labelling, none after, the drifted one after a change by someone else', async () => {
    const ns = await createNamespace('ownership');
    for (const name of ['a', 'b', 'c']) {
      await create(`/api/v1/namespaces/${ns}/configmaps`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name } });
    }
    const controller = { controller: `configmaps/${ns}` };
    const args = ['--kinds', 'configmaps', '--label', 'team=platform', '--namespace', ns];
    /** Runs labeller until its gauges read `expected`. */
    const expect = async (extra: readonly string[], port: number, expected: { managed: number; pending: number }) => {
      const labeller = new Labeller([...args, ...extra, '--metrics-bind-address', `127.0.0.1:${port}`]);
      try {
        await eventually(async () => {
          const { body } = await get(port, '/metrics');
          return sample(body, 'labeller_objects_managed', controller) === expected.managed &&
            sample(body, 'labeller_objects_pending', controller) === expected.pending;
        }, `gauges ${JSON.stringify(expected)}`);
      } finally {
        assert.equal((await labeller.stop()).code, 0);
      }
    };
    await expect(['--dry-run'], 18395, { managed: 0, pending: 3 });
    await expect([], 18396, { managed: 3, pending: 0 });
    // Someone else's change of the value takes the key over: labeller owns it no more on b.
    await patchLabels(`/api/v1/namespaces/${ns}/configmaps/b`, { team: 'ops' });
    await expect(['--dry-run'], 18397, { managed: 2, pending: 1 });
  });

  test("/metrics exposes controller-runtime's and labeller's metrics with plausible values", async () => {
    const ns = await createNamespace('metrics');
    for (const name of ['a', 'b', 'c']) {
      await create(`/api/v1/namespaces/${ns}/configmaps`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name } });
    }
    const labeller = new Labeller([
      '--kinds',
      'configmaps',
      '--label',
      'team=platform',
      '--namespace',
      ns,
      '--http-port',
      '18392',
    ]);
    try {
      await eventually(
        async () => (await labelsOf(`/api/v1/namespaces/${ns}/configmaps/c`))['team'] === 'platform',
        'the labels',
      );
      const { status, body } = await get(18392, '/metrics');
      assert.equal(status, 200);
      const controller = { controller: `configmaps/${ns}` };
      assert.equal(sample(body, 'labeller_objects_cached', controller), 3);
      assert.equal(sample(body, 'labeller_labels_applied_total', controller), 3);
      assert.equal(sample(body, 'labeller_labels_removed_total', controller), 0);
      assert.equal(sample(body, 'controller_runtime_reconcile_errors_total', controller), 0);
      assert.ok((sample(body, 'controller_runtime_reconcile_total', { ...controller, result: 'success' }) ?? 0) >= 3);
      assert.ok((sample(body, 'controller_runtime_reconcile_time_seconds_count', controller) ?? 0) >= 3);
      assert.equal(sample(body, 'controller_runtime_max_concurrent_reconciles', controller), 8);
      assert.equal(sample(body, 'controller_runtime_active_workers', controller), 0);
      assert.ok((sample(body, 'workqueue_adds_total', { name: `configmaps/${ns}` }) ?? 0) >= 3);
      assert.equal(sample(body, 'workqueue_depth', { name: `configmaps/${ns}` }), 0);
      assert.equal(sample(body, 'rest_client_requests_total', { code: '200', method: 'PATCH' }), 3);
      for (
        const name of [
          'workqueue_queue_duration_seconds_count',
          'workqueue_work_duration_seconds_count',
          'workqueue_retries_total',
          'labeller_watch_restarts_total',
          'labeller_relists_total',
          'labeller_conflicts_total',
          'process_resident_memory_bytes',
        ]
      ) {
        assert.match(body, new RegExp(`^${name}`, 'm'), name);
      }
    } finally {
      assert.equal((await labeller.stop()).code, 0);
    }
  });
});
