// Objects that vanish under labeller, and the shutdown coordinator under load.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { describe, test } from 'node:test';
import {
  adminClient,
  auditEvents,
  auditSkip,
  create,
  createNamespace,
  eventually,
  kubeconfig,
  serviceAccountKubeconfig,
  skip,
} from './cluster.ts';
import { Labeller } from '../process/labeller.ts';
import type { Runtime } from '../process/runtime.ts';
import { clusterCa, copyKubeconfig } from '../cluster/cluster.ts';
import { serverName, WriteProxy } from '../cluster/writeproxy.ts';
import { sleep } from '../process/sleep.ts';

async function createConfigMaps(ns: string, count: number): Promise<void> {
  const names = Array.from({ length: count }, (_, i) => `cm-${String(i).padStart(4, '0')}`);
  // 25 at a time: quick, without tripping the API server's in-flight limits.
  for (let i = 0; i < names.length; i += 25) {
    await Promise.all(
      names.slice(i, i + 25).map((name) =>
        create(`/api/v1/namespaces/${ns}/configmaps`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name } })
      ),
    );
  }
}

async function configMapLabels(ns: string): Promise<Record<string, string>[]> {
  const client = await adminClient();
  const list = await client.json<{ items: { metadata: { labels?: Record<string, string> } }[] }>(
    'GET',
    `/api/v1/namespaces/${ns}/configmaps`,
  );
  return list.items.map((i) => i.metadata.labels ?? {});
}

describe('lifecycle', { skip }, () => {
  test('objects deleted while their reconcile is pending are never recreated', { skip: auditSkip }, async () => {
    const ns = await createNamespace('deleted');
    await createConfigMaps(ns, 300);
    // One worker, so most objects are still queued when they are deleted.
    const labeller = new Labeller([
      '--kinds',
      'configmaps',
      '--label',
      'team=platform',
      '--namespace',
      ns,
      '--concurrency',
      '1',
      // A line per write (debug) says when the first one is done.
      '--log-level',
      'debug',
    ]);
    try {
      await labeller.waitForLog((l) => l.msg === 'labels applied');
      await (await adminClient()).request('DELETE', `/api/v1/namespaces/${ns}/configmaps`);
      await eventually(
        async () => (await configMapLabels(ns)).length === 0 && 'empty',
        'the namespace to have no config maps',
      );
      // Give the queued reconciles time to run against the deleted objects.
      await sleep(3000);
      assert.equal((await configMapLabels(ns)).length, 0, 'no config map was recreated');
      const byLabeller = auditEvents((e) =>
        e.objectRef?.namespace === ns && (e.userAgent ?? '').startsWith('labeller/')
      );
      assert.equal(byLabeller.filter((e) => e.verb === 'create').length, 0);
      assert.ok(
        byLabeller.every((e) => e.verb !== 'patch' || e.responseStatus?.code === 200 || e.responseStatus?.code === 409),
        'patches either applied or were refused by the uid guard',
      );
    } finally {
      assert.equal((await labeller.stop()).code, 0);
    }
  });

  for (const runtime of ['node', 'deno'] as Runtime[]) {
    test(`SIGTERM during a burst of 500 pending objects: exit 0 within the grace period, no half-applied object (${runtime})`, async () => {
      const ns = await createNamespace(`sigterm-${runtime}`);
      await createConfigMaps(ns, 500);
      const labeller = new Labeller([
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
        '4',
        '--grace-period',
        '10s',
        // A line per write (debug) says when the burst has begun.
        '--log-level',
        'debug',
      ], { runtime });
      await labeller.waitForLog((l) => l.msg === 'labels applied');
      const started = Date.now();
      const exit = await labeller.stop('SIGTERM');
      assert.equal(exit.code, 0, exit.stderr.slice(-2000));
      assert.ok(Date.now() - started < 10_000, 'exited within the grace period');
      const labels = await configMapLabels(ns);
      const labelled = labels.filter((l) => l['a'] === '1');
      assert.ok(
        labelled.length > 0 && labelled.length < 500,
        `the signal came mid-burst (${labelled.length} labelled)`,
      );
      for (const l of labels) {
        assert.ok(
          ('a' in l) === ('b' in l) && ('a' in l) === ('c' in l),
          `all or none of the labels: ${JSON.stringify(l)}`,
        );
      }
    });
  }

  test('the first signal waits for in-flight patches, a second one exits at once with status 1', async () => {
    const ns = await createNamespace('second-signal');
    await createConfigMaps(ns, 5);
    // Every PATCH is held on the wire from the start: when the signal comes, writes are in flight
    // however fast the machine (a paused connection raced the burst, and lost on a fast one).
    const proxy = await WriteProxy.start((await adminClient()).server, clusterCa(kubeconfig()), ['lifecycle']);
    proxy.hold('lifecycle');
    const account = await serviceAccountKubeconfig(ns, 'labeller', [
      { apiGroups: ['*'], resources: ['*'], verbs: ['*'] },
    ], proxy.url);
    const labeller = new Labeller([
      '--kinds',
      'configmaps',
      '--label',
      'a=1',
      '--namespace',
      ns,
      '--grace-period',
      '60s',
    ], {
      kubeconfig: copyKubeconfig(account, dirname(account), {
        cluster: {
          'certificate-authority-data': readFileSync(proxy.caFile).toString('base64'),
          'tls-server-name': serverName('lifecycle'),
        },
      }),
    });
    try {
      await eventually(async () => proxy.writes.length > 0, 'a PATCH is held');
      labeller.process.kill('SIGTERM');
      await labeller.waitForLog((l) => /^shutting down/.test(l.msg));
      await sleep(500);
      assert.ok(labeller.running, 'still draining in-flight patches');
      const started = Date.now();
      const exit = await labeller.stop('SIGTERM');
      assert.equal(exit.code, 1);
      assert.ok(Date.now() - started < 2000, 'the second signal exits at once');
    } finally {
      labeller.process.kill('SIGKILL');
      await proxy.close();
    }
  });
});
