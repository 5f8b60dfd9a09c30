import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setImmediate } from 'node:timers/promises';
import { ApiError } from '../apimachinery/errors.ts';
import { OwnerUnavailable } from '../kube/owner.ts';
import { labelledObject } from '../labelling/testing/objects.ts';
import { createLogger } from '../util/log.ts';
import type { Report } from './report.ts';
import type { ReportApi, ReportOnServer } from './store.ts';
import { type TestKind, testKind } from './testing/kinds.ts';
import { ReportWriter, type ReportWriterOptions } from './writer.ts';

const log = createLogger({ level: 'error', format: 'json', write: () => {} });
const TEAM = { team: '{{namespace.labels.team}}' };

/** Sleeps that end when the test moves the clock on. */
class FakeClock {
  now = 0;
  readonly #sleeping = new Set<{ readonly until: number; readonly wake: () => void }>();

  sleep = (ms: number, signal: AbortSignal): Promise<void> =>
    new Promise((resolve) => {
      const sleeper = {
        until: this.now + ms,
        wake: () => {
          this.#sleeping.delete(sleeper);
          signal.removeEventListener('abort', sleeper.wake);
          resolve();
        },
      };
      signal.addEventListener('abort', sleeper.wake, { once: true });
      this.#sleeping.add(sleeper);
    });

  /** Moves the clock on by `ms`, letting the writer run what is due until it sleeps again. */
  async advance(ms: number): Promise<void> {
    this.now += ms;
    for (const sleeper of [...this.#sleeping]) {
      if (sleeper.until <= this.now) sleeper.wake();
    }
    await setImmediate();
    for (let i = 0; i < 100_000 && this.#sleeping.size === 0; i++) await setImmediate();
  }
}

/** The API server's reports, and each write sent. */
class FakeStore implements ReportApi {
  readonly reports = new Map<string, Report | ReportOnServer>();
  readonly writes: string[] = [];

  list(): Promise<ReportOnServer[]> {
    return Promise.resolve(
      [...this.reports].map(([namespace, r]) => ({
        namespace,
        name: 'metadata' in r ? r.metadata.name : r.name,
        uid: 'u',
      })),
    );
  }

  apply(report: Report, options: { readonly dryRun: boolean; readonly signal?: AbortSignal }): Promise<void> {
    this.writes.push(
      `apply ${report.metadata.namespace ?? ''} ${report.results.length}${options.dryRun ? ' (dry run)' : ''}`,
    );
    if (!options.dryRun) this.reports.set(report.metadata.namespace ?? '', report);
    return Promise.resolve();
  }

  delete(report: ReportOnServer, options: { readonly dryRun: boolean }): Promise<void> {
    this.writes.push(`delete ${report.namespace}`);
    if (!options.dryRun) this.reports.delete(report.namespace);
    return Promise.resolve();
  }
}

function start(kinds: TestKind[], options: Partial<ReportWriterOptions> & { readonly store: FakeStore }) {
  const clock = new FakeClock();
  const writer = new ReportWriter({
    kinds: () => kinds,
    fieldManager: 'labeller',
    dryRun: false,
    intervalMs: 5_000,
    sleep: clock.sleep,
    log,
    ...options,
  });
  const stop = new AbortController();
  const running = writer.run(stop.signal);
  return {
    clock,
    writer,
    stop: async () => {
      stop.abort();
      await running;
    },
  };
}

const short = (name: string, namespace = 'shop', labels: Record<string, string> = { team: 'blue' }) =>
  labelledObject(name, { key: `${namespace}/${name}`, namespace, labels, resourceVersion: String(Math.random()) });

test('batched: a namespace of 10,000 objects short of a key costs one write, and 2,000 changes within a round one more', async () => {
  const store = new FakeStore();
  const pods = testKind({ labels: TEAM });
  for (let i = 0; i < 10_000; i++) pods.set(short(`pod-${i}`));
  const { clock, writer, stop } = start([pods], { store });
  await clock.advance(0);
  assert.deepEqual(store.writes, ['apply shop 1000']);
  assert.deepEqual(writer.counts(), { reports: 1, clusterReports: 0, fail: 10_000, warn: 0 });
  const report = store.reports.get('shop') as Report;
  assert.equal(report.summary.fail, 10_000);

  // Changes within the interval wait for the next round, and go in one write.
  for (let i = 0; i < 2_000; i++) pods.set(short(`pod-${i}`, 'shop', { team: 'red' }));
  await clock.advance(4_000);
  assert.equal(store.writes.length, 1, 'not before the interval');
  await clock.advance(1_000);
  assert.deepEqual(store.writes, ['apply shop 1000', 'apply shop 1000']);
  assert.equal((store.reports.get('shop') as Report).summary.fail, 10_000 - 2_000);

  // A change that changes no finding writes nothing.
  pods.set(short('pod-9999'));
  await clock.advance(10_000);
  assert.equal(store.writes.length, 2);
  await stop();
});

test('reports follow the objects: a fixed key leaves the report, and a report with nothing to say is deleted', async () => {
  const store = new FakeStore();
  const pods = testKind({ labels: TEAM });
  pods.set(short('web'));
  pods.set(short('api'));
  pods.set(short('db', 'billing'));
  const { clock, stop } = start([pods], { store });
  await clock.advance(0);
  assert.deepEqual(store.writes.sort(), ['apply billing 1', 'apply shop 2']);
  pods.set(short('web', 'shop', { team: 'red' }));
  pods.drop('billing/db');
  await clock.advance(5_000);
  assert.deepEqual(store.writes.slice(2).sort(), ['apply shop 1', 'delete billing']);
  assert.deepEqual([...store.reports.keys()], ['shop']);
  await stop();
});

test('at start, reports already there with nothing to say are deleted; those of another name are left alone', async () => {
  const store = new FakeStore();
  store.reports.set('gone', { namespace: 'gone', name: 'labeller-labels', uid: 'u' });
  store.reports.set('other', { namespace: 'other', name: 'someone-else', uid: 'u' });
  const pods = testKind({ labels: TEAM });
  const { clock, stop } = start([pods], { store });
  await clock.advance(0);
  assert.deepEqual(store.writes, ['delete gone']);
  await stop();
});

test('not written while a claim has lapsed (leadership, the guard, a shard bucket); written once it holds again', async () => {
  const store = new FakeStore();
  const pods = testKind({ labels: TEAM });
  pods.set(short('web'));
  let lapsed: string | undefined = "the field-manager guard's Lease is not held";
  const { clock, stop } = start([pods], { store, claimed: () => lapsed });
  await clock.advance(0);
  assert.deepEqual(store.writes, []);
  lapsed = undefined;
  await clock.advance(5_000);
  assert.deepEqual(store.writes, ['apply shop 1']);
  // A delete waits for the claim as well.
  lapsed = 'leadership lost';
  pods.set(short('web', 'shop', { team: 'red' }));
  await clock.advance(5_000);
  assert.deepEqual(store.writes, ['apply shop 1']);
  lapsed = undefined;
  await clock.advance(5_000);
  assert.deepEqual(store.writes, ['apply shop 1', 'delete shop']);
  await stop();
});

test('a dry run has the API server check each report, and deletes none', async () => {
  const store = new FakeStore();
  store.reports.set('gone', { namespace: 'gone', name: 'labeller-labels', uid: 'u' });
  const pods = testKind({ labels: TEAM });
  pods.set(short('web'));
  const { clock, stop } = start([pods], { store, dryRun: true });
  await clock.advance(0);
  assert.deepEqual(store.writes.sort(), ['apply shop 1 (dry run)', 'delete gone']);
  assert.ok(
    store.reports.has('gone'),
    'the fake deletes nothing in a dry run, as ReportStore does not call the API server',
  );
  await stop();
});

test('a kind whose caches have not listed (started by a reload) holds the round: no report loses its results meanwhile', async () => {
  const store = new FakeStore();
  const pods = testKind({ labels: TEAM });
  pods.set(short('web'));
  const kinds = [pods];
  const { clock, writer, stop } = start(kinds, { store });
  await clock.advance(0);
  assert.deepEqual(store.writes, ['apply shop 1']);
  // A reload restarts the kind: the new one lists first.
  const listed = Promise.withResolvers<void>();
  const restarted = testKind({ labels: TEAM, synced: listed.promise });
  kinds.splice(0, 1, restarted);
  writer.changed();
  await clock.advance(5_000);
  assert.deepEqual(store.writes, ['apply shop 1'], 'nothing deleted while it lists');
  restarted.set(short('web'));
  listed.resolve();
  await clock.advance(5_000);
  assert.deepEqual(store.writes, ['apply shop 1'], 'the same report: nothing to send');
  await stop();
});

test('CRDs not served: said once and noted in /readyz, retried with a backoff, and written once they are', async () => {
  const store = new FakeStore();
  const list = store.list.bind(store);
  let served = false;
  store.list = () =>
    served
      ? list()
      : Promise.reject(new ApiError('GET', '/apis/wgpolicyk8s.io/v1alpha2/policyreports', 404, { reason: 'NotFound' }));
  const pods = testKind({ labels: TEAM });
  pods.set(short('web'));
  const { clock, writer, stop } = start([pods], { store });
  await clock.advance(0);
  assert.match(writer.notes().join(), /does not serve wgpolicyk8s.io\/v1alpha2 PolicyReports: install their CRDs/);
  served = true;
  await clock.advance(120_000);
  assert.deepEqual(writer.notes(), []);
  assert.deepEqual(store.writes, ['apply shop 1']);
  await stop();
});

test('with an owner, each report depends on it; missing, nothing is written (it would be collected at once); made again, all are applied again', async () => {
  const store = new FakeStore();
  const pods = testKind({ labels: TEAM });
  pods.set(short('web'));
  pods.set(short('db', 'billing'));
  let uid: string | undefined;
  const owner = {
    reference: () =>
      uid === undefined
        ? Promise.reject(new OwnerUnavailable('missing', 'clusterrole/labeller-policy-reports does not exist'))
        : Promise.resolve({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name: 'r', uid }),
  };
  const { clock, writer, stop } = start([pods], { store, owner });
  await clock.advance(0);
  assert.deepEqual(store.writes, []);
  assert.match(writer.notes().join(), /does not exist/);
  uid = 'first';
  await clock.advance(120_000);
  assert.deepEqual(store.writes.sort(), ['apply billing 1', 'apply shop 1']);
  const owners = () =>
    [...store.reports.values()].map((r) => 'metadata' in r ? r.metadata.ownerReferences?.[0]?.uid : '');
  assert.deepEqual(owners(), ['first', 'first']);
  uid = 'second';
  writer.changed();
  await clock.advance(5_000);
  assert.equal(store.writes.length, 4);
  assert.deepEqual(owners(), ['second', 'second']);
  await stop();
});

test("a kind whose list keeps failing holds the rounds a minute at most: the other kinds' reports are written", async () => {
  const store = new FakeStore();
  const pods = testKind({ labels: TEAM });
  pods.set(short('web'));
  const never = testKind({ labels: TEAM, plural: 'services', kind: 'Service', synced: new Promise<void>(() => {}) });
  const { clock, stop } = start([pods, never], { store });
  await clock.advance(0);
  assert.deepEqual(store.writes, []);
  await clock.advance(60_000);
  assert.deepEqual(store.writes, ['apply shop 1']);
  pods.set(short('api'));
  await clock.advance(5_000);
  assert.deepEqual(store.writes, ['apply shop 1', 'apply shop 2'], 'not waited for again');
  await stop();
});

test('a run whose signal aborts a write under way ends cut short; the next run starts clean', async () => {
  const store = new FakeStore();
  const pods = testKind({ labels: TEAM });
  pods.set(short('pod-0'));
  const clock = new FakeClock();
  const writer = new ReportWriter({
    kinds: () => [pods],
    fieldManager: 'labeller',
    dryRun: false,
    intervalMs: 5_000,
    sleep: clock.sleep,
    log,
    store,
  });
  // The first run's write hangs on the wire until the run's signal aborts it (a lapse, a handover).
  const apply = store.apply.bind(store);
  store.apply = (_report, options) =>
    new Promise((_, reject) => {
      store.writes.push('on the wire');
      options.signal?.addEventListener('abort', () => reject(options.signal?.reason), { once: true });
    });
  const first = new AbortController();
  const running = writer.run(first.signal);
  await clock.advance(0);
  assert.deepEqual(store.writes, ['on the wire']);
  first.abort(new Error('the Lease lapsed'));
  assert.equal(await running, 'cut short');
  // Taken again: this run's write lands.
  store.apply = apply;
  const second = new AbortController();
  const again = writer.run(second.signal);
  await clock.advance(0);
  assert.deepEqual(store.writes, ['on the wire', 'apply shop 1']);
  second.abort();
  assert.equal(await again, undefined, 'nothing was under way when it ended');
});
