import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { ApiError } from '../apimachinery/errors.ts';
import type { PartialObjectMetadata, PartialObjectMetadataList, WatchEvent } from '../apimachinery/objects.ts';
import { createLogger } from '../util/log.ts';
import { Controller, type Reconcile } from './controller.ts';
import { Informer } from './informer.ts';
import type { WorkQueueOptions } from './queue.ts';
import { bookmark, expiredEvent, metadataOf, page, pod, ScriptedApi } from './testing/scripted.ts';

type Meta = PartialObjectMetadata['metadata'];

/** Lets every pending promise reaction and I/O callback run, a few rounds over. */
async function flush(rounds = 20): Promise<void> {
  for (let i = 0; i < rounds; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** Flushes until `condition` holds; fails after many rounds rather than hanging. */
async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1000 && !condition(); i++) await flush(1);
  assert.ok(condition(), `never happened: ${what}`);
}

interface Started {
  readonly controller: Controller<Meta>;
  /** Keys in the order reconcile was called with them. */
  readonly calls: string[];
  readonly logs: Record<string, unknown>[];
}

/** A controller on `api` with one worker and no periodic requeue unless asked; stopped when the test ends. */
function start(
  t: TestContext,
  api: ScriptedApi,
  options: {
    reconcile?: Reconcile<Meta>;
    queue?: Omit<WorkQueueOptions, 'metrics'>;
    leading?: Promise<void>;
    requeueAfterMs?: number;
    queued?: (key: string) => void;
  } = {},
): Started {
  const calls: string[] = [];
  const logs: Record<string, unknown>[] = [];
  const log = createLogger({
    level: 'debug',
    format: 'json',
    write: (line) => logs.push(JSON.parse(line) as Record<string, unknown>),
  });
  const informer = new Informer<Meta>({ name: 'pods', api, project: metadataOf, log });
  const controller = new Controller<Meta>({
    name: 'pods',
    informers: [informer],
    reconcile: async (object, key, writes) => {
      calls.push(key);
      return await options.reconcile?.(object, key, writes);
    },
    concurrency: 1,
    requeueAfterMs: options.requeueAfterMs ?? 0,
    ...(options.queue ? { queue: options.queue } : {}),
    queued: options.queued,
    log,
  });
  const intake = new AbortController();
  const running = [informer.run(intake.signal), controller.run(intake.signal, options.leading)];
  t.after(async () => {
    intake.abort();
    await Promise.all(running);
  });
  return { controller, calls, logs };
}

test('nothing is reconciled before the first list is complete, all of its pages', async (t) => {
  const lastPage = Promise.withResolvers<PartialObjectMetadataList>();
  const api = new ScriptedApi([page('5', [pod('a'), pod('b')], 'p2'), lastPage.promise]);
  const { controller, calls } = start(t, api);

  await until(() => api.lists.length === 2, 'the second page is asked for');
  await flush();
  assert.deepEqual(calls, [], 'reconciled with the list incomplete');
  assert.equal(controller.informers[0]!.store.synced, false);

  lastPage.resolve(page('5', [pod('c')]));
  await until(() => calls.length === 3, 'every listed object is reconciled');
  await controller.synced;
  assert.deepEqual(calls, ['ns/a', 'ns/b', 'ns/c']);
});

test('a standby lists and caches but reconciles nothing until it leads', async (t) => {
  const leading = Promise.withResolvers<void>();
  const api = new ScriptedApi([page('5', [pod('a')])]);
  const { controller, calls } = start(t, api, { leading: leading.promise });

  await controller.synced;
  await flush();
  assert.equal(controller.size, 1);
  assert.deepEqual(calls, []);
  leading.resolve();
  await until(() => calls.length === 1, 'the leader reconciles');
});

test('queued hears of the keys enqueue and requeueAll queue', async (t) => {
  const heard: string[] = [];
  const api = new ScriptedApi([page('5', [pod('a'), pod('b')])]);
  const { controller, calls } = start(t, api, { queued: (key) => heard.push(key) });
  await until(() => calls.length === 2, 'the listed objects reconciled');
  const atStart = heard.length;
  controller.enqueue('ns/b');
  controller.requeueAll();
  assert.deepEqual(heard.slice(atStart).sort(), ['ns/a', 'ns/b', 'ns/b']);
});

test('an object deleted while queued is never reconciled, so nothing can recreate it', async (t) => {
  const release = Promise.withResolvers<void>();
  const deletion = Promise.withResolvers<readonly WatchEvent[]>();
  const api = new ScriptedApi([page('5', [pod('a'), pod('b')])], [{ until: deletion.promise }]);
  // One worker, held by a: b waits in the queue.
  const { controller, calls } = start(t, api, {
    reconcile: async (_, key) => (key === 'ns/a' ? release.promise : undefined),
  });

  await until(() => calls.length === 1, 'a is being reconciled');
  deletion.resolve([{ type: 'DELETED', object: pod('b', '6') }]);
  await until(() => controller.get('ns/b') === undefined, 'b leaves the cache');
  release.resolve();
  await flush();
  assert.deepEqual(calls, ['ns/a']);
});

test('a failure with Retry-After is retried no sooner than the server asked', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  t.after(() => t.mock.reset());
  let failures = 0;
  const api = new ScriptedApi([page('5', [pod('a')])]);
  const { calls, logs } = start(t, api, {
    queue: { now: () => Date.now() },
    reconcile: async () => {
      // Throttled once: the per-object backoff alone would retry after 5 ms.
      if (failures++ === 0) {
        throw new ApiError('PATCH', '/api/v1/namespaces/ns/pods/a', 429, { reason: 'TooManyRequests' }, '7');
      }
    },
  });

  await until(() => calls.length === 1, 'the first reconcile');
  await flush();
  t.mock.timers.tick(6_999);
  await flush();
  assert.equal(calls.length, 1, 'retried before Retry-After');
  t.mock.timers.tick(1);
  await until(() => calls.length === 2, 'retried once Retry-After has passed');
  assert.ok(logs.some((line) => line['msg'] === 'reconcile failed; retrying with backoff' && line['key'] === 'ns/a'));
});

test('a relist requeues only the objects that changed while away, and forgets the deleted ones', async (t) => {
  const expiry = Promise.withResolvers<readonly WatchEvent[]>();
  const api = new ScriptedApi(
    [
      page('10', [pod('a', '1'), pod('b', '2'), pod('c', '3')]),
      page('20', [pod('a', '1'), pod('b', '12'), pod('d', '13')]),
    ],
    [{ until: expiry.promise }],
  );
  const { controller, calls, logs } = start(t, api);

  await until(() => calls.length === 3, 'the first list is reconciled');
  await flush();
  // Compacted while the watch was open: 410, a relist at once.
  expiry.resolve([bookmark('11'), expiredEvent]);
  await until(() => api.lists.length === 2 && controller.get('ns/d') !== undefined, 'the relist is in the cache');
  await flush();
  assert.deepEqual(calls, ['ns/a', 'ns/b', 'ns/c', 'ns/b', 'ns/d']);
  assert.equal(controller.get('ns/c'), undefined);
  const relist = logs.find((line) => line['msg'] === 'relist complete');
  assert.deepEqual([relist?.['objects'], relist?.['changed'], relist?.['removed']], [3, 2, 1]);
});

test('every object is re-checked about requeueAfterMs after its last reconcile; a deleted one is not', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  t.after(() => t.mock.reset());
  const deletion = Promise.withResolvers<readonly WatchEvent[]>();
  const api = new ScriptedApi([page('5', [pod('a'), pod('b')])], [{ until: deletion.promise }]);
  const { controller, calls } = start(t, api, { queue: { now: () => Date.now() }, requeueAfterMs: 300_000 });

  await until(() => calls.length === 2, 'the first list is reconciled');
  deletion.resolve([{ type: 'DELETED', object: pod('b', '6') }]);
  await until(() => controller.get('ns/b') === undefined, 'b leaves the cache');
  // ±10 % jitter, then up to a second for the slot the re-check waits in.
  t.mock.timers.tick(269_999);
  await flush();
  assert.deepEqual(calls, ['ns/a', 'ns/b'], 'not re-checked before 90 % of the period');
  t.mock.timers.tick(61_001);
  await until(() => calls.length === 3, 'a re-checked');
  t.mock.timers.tick(331_000);
  await until(() => calls.length === 4, 'a re-checked again');
  await flush();
  assert.deepEqual(calls, ['ns/a', 'ns/b', 'ns/a', 'ns/a'], 'b never again');
});

test("an object it wrote is not reconciled again until the cache shows the write, and the write's echo alone is no work", async (t) => {
  const events = Promise.withResolvers<readonly WatchEvent[]>();
  const api = new ScriptedApi([page('4', [pod('a', '4'), pod('b', '4')])], [{ until: events.promise }]);
  // a's reconcile writes it (version 6); b's finds nothing to do.
  const { calls } = start(t, api, {
    reconcile: async (_, key) => (key === 'ns/a' && calls.length <= 2 ? { written: '6' } : undefined),
  });
  await until(() => calls.length === 2, 'the first list is reconciled');
  events.resolve([
    // Someone else's change of a, from before labeller's write: not reconciled from it.
    { type: 'MODIFIED', object: pod('a', '5') },
    // b changes: reconciled as usual.
    { type: 'MODIFIED', object: pod('b', '5') },
    // The echo of labeller's write of a: reconciled, because of the change before it.
    { type: 'MODIFIED', object: pod('a', '6') },
  ]);
  await until(() => calls.length === 4, 'b, then a once its write is in the cache');
  assert.deepEqual(calls, ['ns/a', 'ns/b', 'ns/b', 'ns/a']);
});

test('the echo of its own write, with nothing else between, is not reconciled', async (t) => {
  const echo = Promise.withResolvers<readonly WatchEvent[]>();
  const api = new ScriptedApi([page('4', [pod('a', '4')])], [{ until: echo.promise }]);
  const { calls } = start(t, api, { reconcile: async () => ({ written: '6' }) });
  await until(() => calls.length === 1, 'a is reconciled');
  echo.resolve([{ type: 'MODIFIED', object: pod('a', '6') }, { type: 'MODIFIED', object: pod('a', '7') }]);
  await until(() => calls.length === 2, 'a changed after the echo');
  await flush();
  assert.deepEqual(calls, ['ns/a', 'ns/a'], 'the echo (6) was no work; the change after it (7) was');
});

test('an apply that changed nothing (the version it answers is the one reconciled) waits for no echo: the next change is reconciled', async (t) => {
  const events = Promise.withResolvers<readonly WatchEvent[]>();
  const api = new ScriptedApi([page('4', [pod('a', '4')])], [{ until: events.promise }]);
  // The apply finds the object as wanted already: the API server answers its version unchanged.
  const { calls } = start(t, api, { reconcile: async (object) => ({ written: object.resourceVersion }) });
  await until(() => calls.length === 1, 'a is reconciled');
  // Someone else's change: not mistaken for an event from before a write that never happened.
  events.resolve([{ type: 'MODIFIED', object: pod('a', '5') }]);
  await until(() => calls.length === 2, "a is reconciled again after someone else's change");
});

test('a reconcile that asks to be looked at again after a while is, with no periodic re-check and no event', async (t) => {
  const api = new ScriptedApi([page('4', [pod('a', '4')])]);
  const { calls } = start(t, api, { reconcile: async () => (calls.length === 1 ? { requeueAfterMs: 5 } : undefined) });
  await until(() => calls.length === 2, 'a is reconciled again once the time asked for is over');
  await flush();
  assert.deepEqual(calls, ['ns/a', 'ns/a']);
});

test('a change that lands while its write is under way is looked at once the write shows, not from the older cache', async (t) => {
  const release = Promise.withResolvers<void>();
  const events = Promise.withResolvers<readonly WatchEvent[]>();
  const echo = Promise.withResolvers<readonly WatchEvent[]>();
  const api = new ScriptedApi([page('4', [pod('a', '4')])], [{ until: events.promise }, { until: echo.promise }]);
  const versions: string[] = [];
  const { calls } = start(t, api, {
    reconcile: async (object) => {
      versions.push(object.resourceVersion);
      if (versions.length > 1) return undefined;
      // The write (version 6) takes a while; someone else's change (5) lands in the cache meanwhile.
      await release.promise;
      return { written: '6' };
    },
  });
  await until(() => calls.length === 1, 'a is being reconciled');
  events.resolve([{ type: 'MODIFIED', object: pod('a', '5') }]);
  await flush();
  release.resolve();
  await flush();
  assert.deepEqual(versions, ['4'], 'not reconciled again from version 5, older than its own write');
  echo.resolve([{ type: 'MODIFIED', object: pod('a', '6') }]);
  await until(() => calls.length === 2, 'reconciled once the write shows');
  assert.deepEqual(versions, ['4', '6']);
});

test("the echo of its write that lands before the write's answer is no work; a change after it is", async (t) => {
  for (
    const [events, expected] of [
      [[pod('a', '6')], ['4']],
      [[pod('a', '6'), pod('a', '7')], ['4', '7']],
    ] as const
  ) {
    const answer = Promise.withResolvers<void>();
    const watched = Promise.withResolvers<readonly WatchEvent[]>();
    const api = new ScriptedApi([page('4', [pod('a', '4')])], [{ until: watched.promise }]);
    const versions: string[] = [];
    const { calls } = start(t, api, {
      reconcile: async (object) => {
        versions.push(object.resourceVersion);
        if (versions.length > 1) return undefined;
        // The write is version 6; its watch event comes before the PATCH's answer is read.
        await answer.promise;
        return { written: '6' };
      },
    });
    await until(() => calls.length === 1, 'a is being reconciled');
    watched.resolve(events.map((object) => ({ type: 'MODIFIED' as const, object })));
    await flush();
    answer.resolve();
    await flush();
    if (expected.length === 2) await until(() => calls.length === 2, 'the change after the echo is reconciled');
    await flush();
    assert.deepEqual(versions, expected);
  }
});

test('concurrency bounds the reconciles of the whole kind, over all its informers (one per namespace)', async (t) => {
  const log = createLogger({ level: 'error', format: 'json', write: () => {} });
  const informers = ['a', 'b', 'c'].map((ns) =>
    new Informer<Meta>({
      name: `pods/${ns}`,
      api: new ScriptedApi([
        page('1', [1, 2, 3].map((i) => ({ ...pod(`p${i}`), metadata: { ...pod(`p${i}`).metadata, namespace: ns } }))),
      ]),
      project: metadataOf,
      log,
    })
  );
  let running = 0;
  let most = 0;
  let done = 0;
  const controller = new Controller<Meta>({
    name: 'pods',
    informers,
    reconcile: async () => {
      most = Math.max(most, ++running);
      await flush(2);
      running--;
      done++;
    },
    concurrency: 2,
    requeueAfterMs: 0,
    log,
  });
  const intake = new AbortController();
  const runs = [...informers.map((s) => s.run(intake.signal)), controller.run(intake.signal)];
  t.after(async () => {
    intake.abort();
    await Promise.all(runs);
  });
  await until(() => done === 9, 'every object of the three namespaces');
  assert.equal(most, 2, 'never more than --concurrency at once for the kind');
});

test('writes are summed up in a line when the queue runs dry, and every 10 s while a burst lasts; none per write', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  t.after(() => t.mock.reset());
  const slow = Promise.withResolvers<void>();
  const api = new ScriptedApi([page('4', [pod('a'), pod('b'), pod('c'), pod('d')])]);
  // a and b are written at once, c after the burst has run 10 s, d finds nothing to do.
  const { calls, logs } = start(t, api, {
    queue: { now: () => Date.now() },
    reconcile: async (_, key) => {
      if (key === 'ns/c') await slow.promise;
      return key === 'ns/d' ? undefined : { written: '5' };
    },
  });
  const summaries = () => logs.filter((line) => line['msg'] === 'objects written');
  await until(() => calls.length === 3, 'c is being written');
  assert.deepEqual(summaries(), [], 'no summary before 10 s while the queue still holds work');
  t.mock.timers.tick(10_000);
  await until(() => summaries().length === 1, 'the summary of the first 10 s');
  assert.deepEqual([summaries()[0]?.['written'], summaries()[0]?.['queued']], [2, 1]);
  slow.resolve();
  await until(() => summaries().length === 2, 'the summary once the queue has run dry');
  assert.deepEqual([summaries()[1]?.['written'], summaries()[1]?.['queued']], [1, 0]);
  assert.equal(summaries()[1]?.['level'], 'info');
  assert.ok(!logs.some((line) => line['level'] === 'info' && line['key'] !== undefined), 'no info line per object');
});
