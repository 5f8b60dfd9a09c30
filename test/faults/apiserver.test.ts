// Faults of the control plane itself, on a control plane of this file's own: kube-apiserver
// killed and restarted (during the initial list and in steady state), and etcd compacted while
// labeller was away so that its watch resumes from a resourceVersion that no longer exists.
// /readyz is sampled throughout: it must report each outage and recover after it.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import type { ControlPlane } from '../controlplane/controlplane.ts';
import { assertCleanExit } from '../process/crash.ts';
import { auditEvents, byLabeller, receivedAt } from '../cluster/audit.ts';
import { Cluster } from '../cluster/cluster.ts';
import { compactEtcd, etcdRevision } from '../cluster/etcd.ts';
import { sleep } from '../process/sleep.ts';
import { eventually } from '../process/eventually.ts';
import { figure } from '../process/figures.ts';
import { freePorts, startControlPlane } from '../controlplane/controlplane.ts';
import { ownSkip } from '../cluster/testrun.ts';
import { Labeller, type LogLine, watchFailed } from '../process/labeller.ts';
import { FaultProxy } from '../cluster/faultproxy.ts';
import { scrape } from '../process/metrics.ts';

const configMap = (name: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name } });
const secret = (name: string) => ({ apiVersion: 'v1', kind: 'Secret', metadata: { name }, stringData: { k: 'v' } });

/** The labels labeller must put on every object here. */
const wanted = (name: string) => ({ team: 'platform', 'example.com/name': name });
const isLabelled = (name: string, labels: Record<string, string> | undefined): boolean =>
  labels !== undefined && Object.entries(wanted(name)).every(([k, v]) => labels[k] === v);

describe('kube-apiserver restarts and etcd compaction', { skip: ownSkip }, () => {
  let cp: ControlPlane;
  let cluster: Cluster;
  before(async () => {
    cp = await startControlPlane();
    cluster = await Cluster.connect(cp.kubeconfig);
  });
  after(async () => {
    await cluster?.close();
    await cp?.stop();
  });

  async function allLabelled(paths: readonly string[]): Promise<boolean> {
    for (const path of paths) {
      const labels = await cluster.labelsByName(path);
      for (const [name, l] of labels) if (!isLabelled(name, l)) return false;
    }
    return true;
  }

  /** What each outage of the restart test cost; the two tests after it judge these figures. */
  interface Outage {
    readonly what: string;
    readonly ms: number;
    /** When the API server was stopped (its graceful shutdown begun), down, and ready again. */
    readonly stopping: number;
    readonly down: number;
    readonly ready: number;
    /** When every change made after the restart had been labelled. */
    readonly recovered: number;
    readonly watchFailures: readonly LogLine[];
    readonly reconcileFailures: number;
    /** Each failed retry: its controller, when labeller logged it (Date.now() clock) and why. */
    readonly retryFailures: readonly { readonly controller: string; readonly at: number; readonly error: string }[];
    readonly requestsToRecover: number;
  }
  const outages: Outage[] = [];
  /** labeller's /readyz, sampled every 250 ms through the restart test. */
  const readiness: { readonly at: number; readonly ready: boolean }[] = [];
  const HTTP_PORT = 18393;

  test('restarted during the initial list and twice in steady state: no crash, watch retries back off, every object ends up labelled', async (t) => {
    const ns = await cluster.namespace('restarts');
    const cms = `/api/v1/namespaces/${ns}/configmaps`;
    const secrets = `/api/v1/namespaces/${ns}/secrets`;
    await cluster.createMany(cms, Array.from({ length: 200 }, (_, i) => `cm-${String(i).padStart(3, '0')}`), configMap);
    await cluster.createMany(secrets, Array.from({ length: 40 }, (_, i) => `s-${String(i).padStart(3, '0')}`), secret);
    const proxy = await FaultProxy.start(cp.server);
    const labeller = new Labeller(
      [
        '--kinds',
        'configmaps,secrets',
        '--label',
        'team=platform',
        '--label',
        'example.com/name={{name}}',
        '--namespace',
        ns,
        '--concurrency',
        '1',
        '--watch-timeout',
        '60s',
        '--http-port',
        String(HTTP_PORT),
        // A line per write (debug): the outages are timed from a kind's first write.
        '--log-level',
        'debug',
      ],
      { kubeconfig: cluster.writeKubeconfig({ server: proxy.url }) },
    );
    const sampler = setInterval(() => {
      const at = Date.now();
      fetch(`http://127.0.0.1:${HTTP_PORT}/readyz`).then(async (r) => {
        await r.body?.cancel();
        readiness.push({ at, ready: r.ok });
      }, () => {});
    }, 250);
    /**
     * Samples on until /readyz has answered 200 after `since` (the API server ready again): on a
     * loaded machine that answer may come late, and the next outage must not cut it off.
     */
    const readyAgain = (since: number) =>
      eventually(
        async () => readiness.some((r) => r.ready && r.at >= since),
        '/readyz to answer 200 after the outage',
        120_000,
        250,
      );
    /** Stops kube-apiserver, keeps it down `ms`, starts it and waits until it is ready. */
    const outage = async (ms: number) => {
      const stopping = Date.now();
      await cp.stopApiServer();
      const down = Date.now();
      await sleep(ms);
      await cp.startApiServer();
      return { stopping, down, ready: Date.now() };
    };
    // When labeller logged each *retry* that failed (its own clock, not when the line reached this
    // process: a busy machine delivers stderr in bursts). A key's first failure is no retry: the
    // first attempts of queued objects, and the re-adds of a relist, are not rate-limited (as in
    // client-go); what must not storm is the retrying.
    const retryFailures = (from: number): Outage['retryFailures'] => {
      const failed = new Set<string>();
      return labeller.since(from, (l) => l.msg.startsWith('reconcile failed')).flatMap((l) => {
        const controller = String(l['controller']);
        const key = `${controller}/${String(l['key'])}`;
        const retry = failed.has(key);
        failed.add(key);
        return retry ? [{ controller, at: Date.parse(String(l['time'])), error: String(l['error']) }] : [];
      });
    };
    try {
      // 1. During the initial list: the moment the controllers start listing, every connection
      // is cut and the API server goes away for 3 s.
      await labeller.waitForLog((l) => l.msg === 'starting');
      proxy.drop();
      let mark = labeller.logs.length;
      const listedBefore = labeller.logs.filter((l) => /list complete/.test(l.msg)).length;
      const times = await outage(3000);
      // (After a list that failed, the first complete one may be logged as "relist complete". A
      // list done before the cut is done again: the restarted API server's watch cache starts past
      // its version, so the resumed watch gets 410.)
      const listed = new Map<string, number>();
      for (const kind of ['ConfigMap', 'Secret']) {
        const line = await labeller.waitForLog((l) => /list complete/.test(l.msg) && l.kind === kind, 90_000, mark);
        listed.set(kind, labeller.logs.indexOf(line));
      }
      await labeller.waitForLog((l) => l.msg === 'labels applied', 60_000);
      outages.push({
        what: `initial list (${listedBefore} of 2 lists done when cut)`,
        ms: 3000,
        ...times,
        recovered: Date.now(),
        watchFailures: labeller.since(mark, watchFailed),
        reconcileFailures: labeller.since(mark, (l) => l.msg.startsWith('reconcile failed')).length,
        retryFailures: retryFailures(mark),
        requestsToRecover: 0,
      });
      await readyAgain(times.ready);

      // 2. Mid-burst (concurrency 1 leaves most objects pending), then in steady state. First each
      // kind's watch must have delivered an event (its own PATCH's), which is what starts a watch's
      // backoff over; a quiet kind would carry it on. A PATCH logged is not yet delivered: the API
      // server, stopped at once, may close the watch first. So wait until the cache holds a label
      // the relist cannot have brought: more labelled objects than the server had when read after
      // the relist, or all of them (a PATCH after the relist means the relist had fewer than all).
      for (const [kind, path] of [['ConfigMap', cms], ['Secret', secrets]] as const) {
        await labeller.waitForLog((l) => l.msg === 'labels applied' && l.kind === kind, 30_000, listed.get(kind));
        const objects = [...(await cluster.labelsByName(path))];
        const labelled = objects.filter(([name, labels]) => isLabelled(name, labels)).length;
        const controller = `${path.split('/').at(-1)}/${ns}`;
        await eventually(
          async () => {
            const cached = await scrape(HTTP_PORT, 'labeller_objects_managed', { controller }) ?? 0;
            return cached > labelled || cached === objects.length;
          },
          `${kind}: the watch to deliver a labelled object (the server had ${labelled} after the relist)`,
          30_000,
          100,
        );
      }
      for (const [what, ms] of [['mid-burst', 3000], ['steady state', 5000]] as const) {
        if (what === 'steady state') {
          await eventually(
            () => allLabelled([cms, secrets]),
            'every object to be labelled before the next outage',
            90_000,
            500,
          );
        }
        mark = labeller.logs.length;
        const times = await outage(ms);
        // Changes made right after the restart must be seen by the re-established watches.
        const probe = `probe-${outages.length}`;
        await cluster.post(cms, configMap(probe));
        await cluster.post(secrets, secret(probe));
        await cluster.patchLabels(`${cms}/cm-000`, { team: null });
        await eventually(
          async () =>
            isLabelled(probe, await cluster.labelsOf(`${cms}/${probe}`)) &&
            isLabelled(probe, await cluster.labelsOf(`${secrets}/${probe}`)) &&
            isLabelled('cm-000', await cluster.labelsOf(`${cms}/cm-000`)),
          `the objects changed after outage "${what}" to be labelled`,
          120_000,
          100,
        );
        const recovered = Date.now();
        const requestsToRecover = auditEvents(cp.auditLog, (e) =>
          byLabeller(e) && receivedAt(e) >= times.ready - 5000 && receivedAt(e) <= recovered).length;
        outages.push({
          what,
          ms,
          ...times,
          recovered,
          watchFailures: labeller.since(mark, watchFailed),
          reconcileFailures: labeller.since(mark, (l) =>
            l.msg.startsWith('reconcile failed')).length,
          retryFailures: retryFailures(mark),
          requestsToRecover,
        });
        await readyAgain(times.ready);
      }
      await eventually(() => allLabelled([cms, secrets]), 'every object to be labelled', 90_000, 500);
      assert.ok(labeller.running, 'labeller is still running');
    } finally {
      clearInterval(sampler);
      const exit = await labeller.stop();
      labeller.kill();
      await proxy.close();
      for (const o of outages) {
        const byKind = new Map<string, number[]>();
        for (const f of o.watchFailures) {
          byKind.set(String(f['kind']), [...(byKind.get(String(f['kind'])) ?? []), Number(f['retryInMs'])]);
        }
        figure(
          t,
          `restart [${o.what}]: API server shutting down ${((o.down - o.stopping) / 1000).toFixed(1)} s, down ${
            o.ms / 1000
          } s, starting ${((o.ready - o.down - o.ms) / 1000).toFixed(1)} s; ` +
            `labeller caught up ${((o.recovered - o.ready) / 1000).toFixed(1)} s after the API server was ready; ` +
            `watch retries ${
              [...byKind].map(([k, v]) => `${k} ${v.length}× (${v.map((ms) => (ms / 1000).toFixed(1)).join(', ')} s)`)
                .join(', ') || 'none'
            }; ` +
            `failed reconciles ${o.reconcileFailures}; requests from ready to caught up ${o.requestsToRecover}`,
        );
      }
      assertCleanExit(exit);
    }

    // No tight watch retry loop: per outage and kind, the retries follow the backoff (0.8 s
    // doubling, jittered) rather than the outage's length divided by a short fixed interval.
    for (const o of outages) {
      for (const kind of ['ConfigMap', 'Secret']) {
        // An expired resourceVersion after a healthy watch is relisted at once (retryInMs 0): no
        // failure, and at most one per outage, since a relist that expires again backs off.
        const failures = o.watchFailures.filter((f) => f['kind'] === kind);
        const expired = failures.filter((f) => /: 410 /.test(String(f['error'])));
        assert.ok(
          expired.filter((f) => Number(f['retryInMs']) === 0).length <= 1,
          `${kind}, outage "${o.what}": at most one immediate relist`,
        );
        const retries = failures.filter((f) => Number(f['retryInMs']) > 0 || !expired.includes(f)).map((f) =>
          Number(f['retryInMs'])
        );
        const downMs = o.ready - o.stopping + 1000;
        const bound = Math.ceil(Math.log2(downMs / 800)) + 3;
        assert.ok(
          retries.length <= bound,
          `${kind}, outage "${o.what}": ${retries.length} watch retries in ${downMs} ms (at most ${bound} expected with backoff)`,
        );
        assert.ok(
          retries.every((ms) => ms >= 800),
          `retry delays never below the initial backoff: ${retries.join(', ')}`,
        );
      }
    }
    const patches = auditEvents(
      cp.auditLog,
      (e) => byLabeller(e) && e.verb === 'patch' && e.objectRef?.namespace === ns,
    );
    figure(
      t,
      `restarts: ${outages.length} API server restarts survived; ${patches.length} PATCH requests reached the API server for 240 objects, 4 probes and 2 label removals`,
    );
    // Of the labelled kinds, that is: it creates its own Events and its field-manager guard's Lease.
    assert.equal(
      auditEvents(
        cp.auditLog,
        (e) => byLabeller(e) && e.verb === 'create' && ['configmaps', 'secrets'].includes(e.objectRef?.resource ?? ''),
      ).length,
      0,
      'labeller never creates',
    );
  });

  test('each outage starts the watch backoff over, and labeller catches up within the backoff of that outage alone', () => {
    assert.ok(outages.length > 0, 'the restart test ran');
    for (const o of outages) {
      // The first retry of an outage waits the initial delay (0.8 s, up to twice that with jitter).
      for (const kind of ['ConfigMap', 'Secret']) {
        const first = o.watchFailures.find((f) => f['kind'] === kind);
        if (first) {
          assert.ok(
            Number(first['retryInMs']) <= 1600,
            `outage "${o.what}", ${kind}: first retry after ${Number(first['retryInMs']).toFixed(0)} ms`,
          );
        }
      }
      // With full jitter the last retry of an outage of length T comes at most about 2T later (≤ 60 s).
      const down = o.ready - o.stopping;
      const bound = Math.min(60_000, 2 * down) + 5000;
      assert.ok(
        o.recovered - o.ready <= bound,
        `outage "${o.what}" (${(down / 1000).toFixed(1)} s): caught up ${
          ((o.recovered - o.ready) / 1000).toFixed(1)
        } s after the API server was ready (at most ${(bound / 1000).toFixed(1)} s)`,
      );
    }
  });

  test('/readyz reports each outage (503 while the API server is away) and is 200 again once labeller has caught up', (t) => {
    assert.ok(outages.length > 0, 'the restart test ran');
    readiness.sort((a, b) => a.at - b.at);
    for (const [i, o] of outages.entries()) {
      // Until the next API server is gone (it serves during its graceful shutdown).
      const until = outages[i + 1]?.down ?? Infinity;
      const samples = readiness.filter((r) => r.at >= o.stopping && r.at < until);
      const changes = samples.filter((r, j) => j === 0 || r.ready !== samples[j - 1]!.ready);
      const notReady = samples.find((r) => !r.ready && r.at >= o.down && r.at <= o.ready);
      const readyAgain = samples.find((r) => r.ready && r.at >= o.ready);
      figure(
        t,
        `readiness [${o.what}] (API server stopped at 0 s, down at ${
          ((o.down - o.stopping) / 1000).toFixed(1)
        } s, ready at ${((o.ready - o.stopping) / 1000).toFixed(1)} s): ` +
          changes.map((r) => `${r.ready ? 200 : 503} at ${((r.at - o.stopping) / 1000).toFixed(1)} s`).join(', '),
      );
      assert.ok(notReady, `outage "${o.what}": /readyz answered 503 while the API server was down`);
      assert.ok(
        readyAgain && readyAgain.at <= o.recovered + 5000,
        `outage "${o.what}": /readyz answered 200 again once labeller had caught up`,
      );
    }
  });

  test("while the API server is away, failed retries stay within each controller's token bucket (a burst of 100, then 10 a second)", () => {
    assert.ok(outages.length > 0, 'the restart test ran');
    for (const o of outages) {
      // Every retry reserved a slot in its controller's bucket when its key last failed (after
      // the outage began, with at most 100 tokens left) and runs no sooner than that slot. So by
      // any time t, at most 100 + 10/s × (t − outage start) retries can have failed. This holds
      // however the machine stalls labeller: a stall only makes failures later, never more.
      const byController = Map.groupBy(o.retryFailures, (f) => f.controller);
      for (const [controller, failures] of byController) {
        failures.forEach((f, i) => {
          const allowed = 100 + (10 * (f.at - o.stopping)) / 1000;
          assert.ok(
            i + 1 <= allowed + 5,
            `outage "${o.what}", ${controller}: ${i + 1} failed retries by ${
              ((f.at - o.stopping) / 1000).toFixed(1)
            } s after the API server was stopped, ` +
              `more than the bucket allows (${
                Math.floor(allowed)
              }); ${o.reconcileFailures} failed reconciles in all; last error: ${f.error.slice(0, 200)}`,
          );
        });
      }
    }
  });

  test('etcd compacted while labeller was disconnected: 410, relist, changes in the gap reconciled, deleted objects leave the store', async (t) => {
    const ns = await cluster.namespace('compaction');
    const cms = `/api/v1/namespaces/${ns}/configmaps`;
    const names = Array.from({ length: 60 }, (_, i) => `cm-${String(i).padStart(2, '0')}`);
    await cluster.createMany(cms, names, configMap);
    const proxy = await FaultProxy.start(cp.server);
    const labeller = new Labeller(
      [
        '--kinds',
        'configmaps',
        '--label',
        'team=platform',
        '--label',
        'example.com/name={{name}}',
        '--namespace',
        ns,
        '--watch-timeout',
        '60s',
      ],
      { kubeconfig: cluster.writeKubeconfig({ server: proxy.url }) },
    );
    try {
      await eventually(
        async () => [...(await cluster.labelsByName(cms))].every(([name, l]) => isLabelled(name, l)),
        'the first labelling',
        60_000,
        200,
      );
      // Cut labeller off (connections dropped, new ones refused), then change the world.
      proxy.refuse(true);
      proxy.drop();
      const mark = labeller.logs.length;
      await labeller.waitForLog(watchFailed, 10_000, mark);
      const deleted = names.slice(0, 15);
      const stripped = names.slice(15, 30);
      const added = Array.from({ length: 10 }, (_, i) => `new-${i}`);
      const deletedAt = Date.now();
      await Promise.all(deleted.map((name) => cluster.delete(`${cms}/${name}`)));
      await Promise.all(
        stripped.map((name) => cluster.patchLabels(`${cms}/${name}`, { team: null, 'example.com/name': null })),
      );
      await cluster.createMany(cms, added, configMap);
      // Compact etcd up to now and restart the API server, so no cache can serve the old versions.
      const revision = await etcdRevision(cp.etcd);
      await compactEtcd(cp.etcd, revision);
      await cp.stopApiServer();
      await cp.startApiServer();
      const reconnected = Date.now();
      proxy.refuse(false);

      const expired = await labeller.waitForLog(
        (l) => watchFailed(l) && /410|too old|expired/i.test(String(l['error'])),
        60_000,
        mark,
      );
      const relisted = await labeller.waitForLog((l) => /list complete/.test(l.msg), 60_000, mark);
      await eventually(
        async () => {
          const now = await cluster.labelsByName(cms);
          return now.size === names.length - deleted.length + added.length &&
            [...now].every(([name, l]) => isLabelled(name, l));
        },
        'the stripped and added objects to be labelled',
        60_000,
        200,
      );
      const recovered = Date.now();
      // Give queued work time to run against the deleted objects, then look for traces of them.
      await sleep(2000);
      const now = await cluster.labelsByName(cms);
      for (const name of deleted) assert.ok(!now.has(name), `${name} was not recreated`);
      const touched = auditEvents(
        cp.auditLog,
        (e) =>
          byLabeller(e) && e.objectRef?.namespace === ns && deleted.includes(e.objectRef?.name ?? '') &&
          receivedAt(e) >= deletedAt,
      );
      assert.deepEqual(
        touched.map((e) => `${e.verb} ${e.objectRef?.name} ${e.responseStatus?.code}`),
        [],
        'no request for an object deleted during the gap',
      );
      figure(
        t,
        `compaction: 410 seen (${String(expired['error']).slice(0, 120)}); "${relisted.msg}" ${
          JSON.stringify({ objects: relisted['objects'], removed: relisted['removed'] })
        }; ` +
          `${stripped.length} stripped + ${added.length} added objects labelled ${
            ((recovered - reconnected) / 1000).toFixed(1)
          } s after reconnecting`,
      );
      assert.equal(
        relisted['removed'] ?? deleted.length,
        deleted.length,
        'the relist reports the deleted objects as removed',
      );
    } finally {
      const exit = await labeller.stop();
      labeller.kill();
      await proxy.close();
      assertCleanExit(exit);
    }
  });

  test('a config change while the API server is out of reach is retried until it applies, not rejected', async () => {
    const ns = await cluster.namespace('reload-outage');
    const cms = `/api/v1/namespaces/${ns}/configmaps`;
    await cluster.createMany(cms, ['a', 'b'], configMap);
    const proxy = await FaultProxy.start(cp.server);
    const yaml = (team: string) => `kinds:\n  - resource: configmaps\n    labels: { team: ${team} }\n`;
    const file = cluster.writeFile(`reload-outage-${ns}.yaml`, yaml('one'));
    const [port] = await freePorts(1);
    const labeller = new Labeller(['--config', file, '--namespace', ns, '--http-port', String(port)], {
      kubeconfig: cluster.writeKubeconfig({ server: proxy.url }),
    });
    const teams = async () => [...(await cluster.labelsByName(cms)).values()].map((l) => l['team']);
    try {
      await eventually(async () => (await teams()).every((team) => team === 'one'), 'labelled with C1');
      proxy.refuse(true);
      proxy.drop();
      const from = labeller.logs.length;
      writeFileSync(file, yaml('two'));
      const retrying = await labeller.waitForLog(
        (l) => l.msg === 'config change not applied yet; retrying',
        30_000,
        from,
      );
      assert.match(String(retrying['error']), /cannot reach the API server/);
      await sleep(3000);
      proxy.refuse(false);
      await labeller.waitForLog((l) => l.msg === 'config reloaded', 90_000, from);
      await eventually(async () => (await teams()).every((team) => team === 'two'), 'labelled with C2', 60_000);
      assert.equal(
        labeller.since(from, (l) => l.msg.startsWith('config change rejected')).length,
        0,
        'a passing failure is no rejection',
      );
      assert.equal(await scrape(port!, 'labeller_config_reloads_total', { result: 'failure' }), 0);
      assert.equal(await scrape(port!, 'labeller_config_last_reload_successful'), 1);
    } finally {
      proxy.refuse(false);
      assertCleanExit(await labeller.stop());
      await proxy.close();
    }
  });
});
