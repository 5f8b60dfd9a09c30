import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { ApiError, WatchIdleError } from '../apimachinery/errors.ts';
import type { PartialObjectMetadataList, WatchEvent } from '../apimachinery/objects.ts';
import { Backoff } from '../util/backoff.ts';
import {
  bookmark,
  expired,
  expiredEvent,
  initialEventsEnd,
  type ListStep,
  page,
  pod,
  ScriptedApi,
  streamingRefused,
  type WatchStep,
} from './testing/scripted.ts';
import { type ListWatch, watcher, type WatcherEvent } from './watcher.ts';
import type { Added } from './partition.ts';
import { Widening } from './widening.ts';

/** Deterministic backoff: 1000 ms doubling, plus half of it as jitter (random = 0.5): 1500, 3000, 6000, ... */
function fixedBackoff(): Backoff {
  return new Backoff({ initialMs: 1000, factor: 2, maxMs: 60_000, jitter: 1, random: () => 0.5, now: () => 0 });
}

const immediate = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function start(
  t: TestContext,
  api: ListWatch,
  options: {
    pageSize?: number;
    labelSelector?: string;
    backoff?: Backoff;
    streamingLists?: boolean;
    shardSelector?: () => string | undefined;
    widening?: Widening;
  } = {},
) {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const controller = new AbortController();
  const events = watcher(api, {
    backoff: fixedBackoff(),
    ...options,
    watchTimeoutSeconds: 60,
    signal: controller.signal,
  });
  t.after(async () => {
    controller.abort();
    await events.return(undefined);
  });
  return {
    controller,
    events,
    /** The next event; `waitMs` of mocked time pass first (for a watcher backing off after an error). */
    async next(waitMs = 0): Promise<WatcherEvent> {
      const pending = events.next();
      if (waitMs > 0) {
        await immediate();
        t.mock.timers.tick(waitMs);
      }
      const result = await pending;
      assert.equal(result.done, false, 'the watcher ended');
      return result.value as WatcherEvent;
    },
    async take(n: number): Promise<WatcherEvent[]> {
      const taken: WatcherEvent[] = [];
      for (let i = 0; i < n; i++) taken.push(await this.next());
      return taken;
    },
  };
}

/** Events with objects reduced to their names, errors to their status, for readable comparisons. */
function summary(events: readonly WatcherEvent[]): string[] {
  return events.map((event) => {
    switch (event.type) {
      case 'initApply':
      case 'apply':
      case 'delete':
        return `${event.type} ${event.object.metadata.name}`;
      case 'init':
        return event.merge ? 'init merge' : 'init';
      case 'error':
        return `error ${event.error instanceof ApiError ? event.error.status : event.error.message} ${event.retryInMs}`;
      default:
        return event.type;
    }
  });
}

test('a paginated list follows continue tokens: init, initApply per item, initDone', async (t) => {
  const api = new ScriptedApi([
    page('9', [pod('a'), pod('b')], 'p2'),
    page('9', [pod('c'), pod('d')], 'p3'),
    page('9', [pod('e')]),
  ]);
  const run = start(t, api, { pageSize: 2, labelSelector: 'app=web' });

  assert.deepEqual(summary(await run.take(7)), [
    'init',
    'initApply a',
    'initApply b',
    'initApply c',
    'initApply d',
    'initApply e',
    'initDone',
  ]);
  assert.deepEqual(api.lists.map((o) => o.continue), [undefined, 'p2', 'p3']);
  for (const options of api.lists) {
    assert.equal(options.limit, 2);
    assert.equal(options.labelSelector, 'app=web');
    assert.equal(options.resourceVersion, undefined, 'the first list is a consistent read');
  }
});

test("the watch starts at the list's version and resumes from the newest one seen, bookmarks included, without a relist after a clean end", async (t) => {
  const api = new ScriptedApi(
    [page('10', [pod('a'), pod('b')])],
    [
      {
        events: [{ type: 'ADDED', object: pod('c', '11') }, { type: 'MODIFIED', object: pod('a', '12') }, {
          type: 'DELETED',
          object: pod('b', '13'),
        }, bookmark('14')],
      },
      { events: [{ type: 'ADDED', object: pod('d', '15') }] },
    ],
  );
  const run = start(t, api, { labelSelector: 'app=web' });

  assert.deepEqual(summary(await run.take(10)), [
    'init',
    'initApply a',
    'initApply b',
    'initDone',
    'watching',
    'apply c',
    'apply a',
    'delete b',
    'watching',
    'apply d',
  ]);
  const pending = run.events.next();
  await immediate();
  assert.deepEqual(api.watches.map((o) => o.resourceVersion), ['10', '14', '15']);
  assert.equal(api.lists.length, 1, 'no relist after the watch ended cleanly');
  assert.deepEqual(api.watches[0], {
    labelSelector: 'app=web',
    resourceVersion: '10',
    timeoutSeconds: 60,
    idleMs: 90_000,
    signal: run.controller.signal,
  });
  run.controller.abort();
  assert.equal((await pending).done, true);
});

test('410 relists at once from the watch cache: the first page asks NotOlderThan the last seen version, later pages only continue', async (t) => {
  const api = new ScriptedApi(
    [page('10', [pod('a')]), page('20', [pod('a')], 'p2'), page('20', [pod('c')])],
    [{ events: [{ type: 'ADDED', object: pod('b', '11') }, bookmark('12'), expiredEvent] }],
  );
  const run = start(t, api);

  assert.deepEqual(summary(await run.take(6)), [
    'init',
    'initApply a',
    'initDone',
    'watching',
    'apply b',
    'error 410 0',
  ]);
  assert.deepEqual(summary([await run.next(0), ...(await run.take(3))]), [
    'init',
    'initApply a',
    'initApply c',
    'initDone',
  ]);

  const [, relist, second] = api.lists;
  assert.equal(relist?.resourceVersion, '12');
  assert.equal(relist?.resourceVersionMatch, 'NotOlderThan');
  assert.equal(relist?.continue, undefined);
  assert.equal(second?.continue, 'p2');
  assert.equal(second?.resourceVersion, undefined);
  assert.equal(second?.resourceVersionMatch, undefined);

  const pending = run.events.next();
  await immediate();
  assert.equal(api.watches[1]?.resourceVersion, '20', "the watch resumes from the relist's version");
  run.controller.abort();
  await pending;
});

test('when the relist from the watch cache is 410 too, the next list is a consistent one, after a backoff', async (t) => {
  const api = new ScriptedApi([page('10', []), expired(), page('30', [pod('a')])], [{
    events: [bookmark('12'), expiredEvent],
  }]);
  const run = start(t, api);

  assert.deepEqual(summary(await run.take(4)), ['init', 'initDone', 'watching', 'error 410 0']);
  assert.deepEqual(summary([await run.next(0), await run.next()]), ['init', 'error 410 1500']);
  assert.deepEqual(summary([await run.next(1500), ...(await run.take(2))]), ['init', 'initApply a', 'initDone']);

  assert.deepEqual(
    api.lists.map((o) => [o.resourceVersion, o.resourceVersionMatch]),
    [[undefined, undefined], ['12', 'NotOlderThan'], [undefined, undefined]],
  );
});

test('a server that answers every watch with 410 gets one immediate relist, then lists backed off to the 30 s cap', async (t) => {
  const cycles = 1000;
  // Every list works; every watch fails with 410, alternately as an ERROR event and as a refused request.
  const api = new ScriptedApi(
    Array.from({ length: cycles + 1 }, (_, i) => page(String(10 + i), [])),
    Array.from({ length: cycles }, (_, i) => (i % 2 === 0 ? { events: [expiredEvent] } : { refused: expired() })),
  );
  // client-go's and kube-rs's curve (0.8 s doubling to 30 s, reset after 2 min of health) on a fake clock, without jitter.
  let clock = 0;
  const run = start(t, api, { backoff: new Backoff({ random: () => 0, now: () => clock }) });

  const delays: number[] = [];
  let waitMs = 0;
  while (delays.length < cycles) {
    const event = await run.next(waitMs);
    waitMs = 0;
    if (event.type !== 'error') continue;
    assert.ok(event.error instanceof ApiError && event.error.expired, `unexpected error ${event.error.message}`);
    delays.push(event.retryInMs);
    clock += waitMs = event.retryInMs;
  }
  assert.deepEqual(delays.slice(0, 9), [0, 800, 1600, 3200, 6400, 12_800, 25_600, 30_000, 30_000]);
  assert.ok(delays.slice(7).every((d) => d === 30_000), 'every later retry waits the 30 s cap');
  assert.equal(api.lists.length, cycles);
  assert.ok(clock >= (cycles - 8) * 30_000, `${cycles} failures took only ${clock} ms of (fake) time`);
});

test('a watch that delivered events earns a new immediate relist on its next 410', async (t) => {
  const api = new ScriptedApi(
    [page('10', []), page('20', []), page('30', []), page('40', [])],
    [{ events: [expiredEvent] }, { events: [expiredEvent] }, { events: [bookmark('31'), expiredEvent] }],
  );
  const run = start(t, api);

  assert.deepEqual(summary(await run.take(4)), ['init', 'initDone', 'watching', 'error 410 0']);
  assert.deepEqual(summary(await run.take(4)), ['init', 'initDone', 'watching', 'error 410 1500']);
  assert.deepEqual(summary([await run.next(1500), ...(await run.take(3))]), [
    'init',
    'initDone',
    'watching',
    'error 410 0',
  ]);
});

test("other errors yield an error event with the backoff's delay, or the server's Retry-After when longer, and retry after it", async (t) => {
  const cases: Array<{ error: Error; retryInMs: number; shown: string }> = [
    {
      error: new ApiError('GET', '/api/v1/pods', 500, { message: 'etcd timeout' }),
      retryInMs: 1500,
      shown: 'error 500 1500',
    },
    { error: new Error('socket hang up'), retryInMs: 3000, shown: 'error socket hang up 3000' },
    {
      error: new ApiError('GET', '/api/v1/pods', 429, { reason: 'TooManyRequests' }, '10'),
      retryInMs: 10_000,
      shown: 'error 429 10000',
    },
    {
      error: new ApiError('GET', '/api/v1/pods', 503, { details: { retryAfterSeconds: 20 } }),
      retryInMs: 20_000,
      shown: 'error 503 20000',
    },
    { error: new ApiError('GET', '/api/v1/pods', 429, {}, '1'), retryInMs: 24_000, shown: 'error 429 24000' },
  ];
  const api = new ScriptedApi([...cases.map((c) => c.error), page('1', [])]);
  const run = start(t, api);

  assert.deepEqual(summary(await run.take(2)), ['init', cases[0]?.shown]);
  for (const [i, { retryInMs }] of cases.entries()) {
    let retried = false;
    const pending = run.events.next().finally(() => (retried = true));
    await immediate();
    t.mock.timers.tick(retryInMs - 1);
    await immediate();
    assert.equal(retried, false, `case ${i}: retried before ${retryInMs} ms`);
    t.mock.timers.tick(1);
    assert.equal((await pending).value?.type, 'init');
    const next = cases[i + 1];
    assert.deepEqual(summary([await run.next()]), [next ? next.shown : 'initDone']);
  }
});

test('a watch failure other than 410 resumes the watch from the newest version, without a relist; "watching" only when the server answers', async (t) => {
  const api = new ScriptedApi(
    [page('10', [])],
    [
      { events: [bookmark('11')], end: new WatchIdleError('/api/v1/pods', 90_000) },
      { events: [{ type: 'ERROR', object: { code: 500, message: 'internal error' } }] },
      { refused: new Error('connect ECONNREFUSED') },
    ],
  );
  const run = start(t, api);

  assert.deepEqual(summary(await run.take(4)), [
    'init',
    'initDone',
    'watching',
    `error watch /api/v1/pods was silent for 90 s; reconnecting 1500`,
  ]);
  assert.deepEqual(summary([await run.next(1500), await run.next()]), ['watching', 'error 500 3000']);
  assert.deepEqual(summary([await run.next(3000)]), ['error connect ECONNREFUSED 6000']);
  const pending = run.events.next();
  await immediate();
  t.mock.timers.tick(6000);
  await immediate();
  assert.equal(api.lists.length, 1);
  assert.deepEqual(api.watches.map((o) => o.resourceVersion), ['10', '11', '11', '11']);
  run.controller.abort();
  assert.equal((await pending).done, true);
});

test('aborting the signal ends the generator, whether it is listing, watching or waiting to retry', async (t) => {
  const scripts: Record<string, () => ScriptedApi> = {
    listing: () => new ScriptedApi([]),
    watching: () => new ScriptedApi([page('1', [])]),
    'waiting to retry': () => new ScriptedApi([new Error('refused')]),
  };
  for (const [phase, script] of Object.entries(scripts)) {
    await t.test(phase, async (t) => {
      const run = start(t, script());
      const seen: string[] = [];
      let pending = run.events.next();
      // Pull events until the watcher blocks (its next event does not arrive by itself).
      for (;;) {
        const result = await Promise.race([pending, immediate().then(() => 'blocked' as const)]);
        if (result === 'blocked') break;
        assert.equal(result.done, false);
        seen.push(result.value.type);
        pending = run.events.next();
      }
      assert.ok(seen.includes('init'), `${phase}: saw ${seen.join(', ')}`);
      run.controller.abort();
      assert.equal((await pending).done, true);
    });
  }
});

test('a watch that ends at once without an event is a very short watch: backed off, not reopened at once', async (t) => {
  const api = new ScriptedApi([page('10', [])], [{ events: [] }, { events: [bookmark('11')] }]);
  const run = start(t, api);
  assert.deepEqual(summary(await run.take(4)), [
    'init',
    'initDone',
    'watching',
    'error very short watch: it ended within a second without delivering an event; reopening after a pause 1500',
  ]);
  assert.equal(api.watches.length, 1, 'not reopened before the pause');
  assert.deepEqual(summary([await run.next(1500)]), ['watching']);
  assert.deepEqual(api.watches.map((o) => o.resourceVersion), ['10', '10'], 'resumed, no relist');
  assert.equal(api.lists.length, 1);
});

test('a continue token that expired mid-list falls back to one full list, not to paging from the start', async (t) => {
  const api = new ScriptedApi([page('10', [pod('a')], 'token'), expired(), page('12', [pod('a'), pod('b')])]);
  const run = start(t, api, { pageSize: 1 });
  assert.deepEqual(summary(await run.take(5)), ['init', 'initApply a', 'init', 'initApply a', 'initApply b']);
  assert.deepEqual(summary([await run.next()]), ['initDone']);
  assert.deepEqual(
    api.lists.map((o) => [o.limit, o.continue]),
    [[1, undefined], [1, 'token'], [undefined, undefined]],
  );
});

test('a streaming list: the objects as ADDED events, done at the bookmark that ends them, then the same watch goes on', async (t) => {
  const api = new ScriptedApi([], [
    {
      events: [
        { type: 'ADDED', object: pod('a', '7') },
        bookmark('8'),
        { type: 'ADDED', object: pod('b', '5') },
        initialEventsEnd('9'),
        { type: 'MODIFIED', object: pod('a', '10') },
        { type: 'DELETED', object: pod('b', '11') },
      ],
    },
    { events: [{ type: 'ADDED', object: pod('c', '12') }] },
  ], { streamingLists: true });
  const run = start(t, api, { labelSelector: 'app=web' });

  assert.deepEqual(summary(await run.take(9)), [
    'init',
    'initApply a',
    'initApply b',
    'initDone',
    'watching',
    'apply a',
    'delete b',
    'watching',
    'apply c',
  ]);
  assert.equal(api.lists.length, 0, 'no list request');
  assert.deepEqual(
    api.watches.map((o) => [o.resourceVersion, o.sendInitialEvents, o.labelSelector]),
    [[undefined, true, 'app=web'], ['11', undefined, 'app=web']],
    'a consistent streaming list, then a plain watch from the newest version seen',
  );
});

test('a server without streaming lists (422) gets a paginated list at once, and only those from then on', async (t) => {
  const api = new ScriptedApi(
    [page('10', [pod('a')]), page('20', [pod('a')])],
    [{ refused: streamingRefused() }, { events: [bookmark('12'), expiredEvent] }],
    { streamingLists: true },
  );
  const run = start(t, api);

  assert.deepEqual(summary(await run.take(7)), [
    'init',
    'init',
    'initApply a',
    'initDone',
    'watching',
    'error 410 0',
    'init',
  ]);
  assert.deepEqual(summary(await run.take(2)), ['initApply a', 'initDone']);
  assert.deepEqual(api.watches.map((o) => o.sendInitialEvents), [true, undefined]);
  assert.deepEqual(api.lists.map((o) => o.resourceVersion), [undefined, '12'], 'the relist is paginated too');
});

test('410 relists with a streaming list from the last version seen; one that fails midway is followed by one paginated list, as client-go falls back', async (t) => {
  const api = new ScriptedApi([page('14', [pod('a', '7'), pod('b', '13')])], [
    { events: [{ type: 'ADDED', object: pod('a', '7') }, initialEventsEnd('9'), bookmark('12'), expiredEvent] },
    { events: [{ type: 'ADDED', object: pod('a', '7') }], end: new Error('connection reset') },
    // The watch after the paginated list; its 410 relists with a streaming list again.
    { events: [bookmark('15'), expiredEvent] },
    { events: [{ type: 'ADDED', object: pod('b', '13') }, initialEventsEnd('16')] },
  ], { streamingLists: true });
  const run = start(t, api);

  assert.deepEqual(summary(await run.take(5)), ['init', 'initApply a', 'initDone', 'watching', 'error 410 0']);
  assert.deepEqual(summary([await run.next(0), ...(await run.take(2))]), [
    'init',
    'initApply a',
    'error connection reset 1500',
  ]);
  assert.deepEqual(summary([await run.next(1500), ...(await run.take(5))]), [
    'init',
    'initApply a',
    'initApply b',
    'initDone',
    'watching',
    'error 410 0',
  ]);
  assert.deepEqual(summary(await run.take(4)), ['init', 'initApply b', 'initDone', 'watching']);
  assert.deepEqual(
    api.lists.map((o) => [o.resourceVersion, o.resourceVersionMatch]),
    [['12', 'NotOlderThan']],
    'the paginated list from the watch cache too',
  );
  assert.deepEqual(
    api.watches.map((o) => [o.resourceVersion, o.sendInitialEvents]),
    [[undefined, true], ['12', true], ['14', undefined], ['15', true]],
    'streaming lists from the watch cache, not older than the last version seen; one paginated list after the failed one',
  );
});

test('a streaming list the server fails (its watch cache not fresh within 3 s: 504 with Retry-After) is followed by a paginated list', async (t) => {
  const tooLarge = new ApiError('GET', '/api/v1/pods', 504, {
    reason: 'Timeout',
    message: 'Too large resource version',
    details: { retryAfterSeconds: 1 },
  });
  const api = new ScriptedApi([page('20', [pod('a')])], [{ refused: tooLarge }], { streamingLists: true });
  const run = start(t, api);

  assert.deepEqual(summary(await run.take(2)), ['init', 'error 504 1500']);
  assert.deepEqual(summary([await run.next(1500), ...(await run.take(2))]), ['init', 'initApply a', 'initDone']);
  assert.deepEqual([api.watches.length, api.lists.length], [1, 1]);
});

/**
 * A streaming list cut off before its bookmark, the paginated list after it, and a 410 on the
 * watch after that; `relist` is the streaming list the 410 brings. Answers the run there.
 */
async function cutOffThenExpired(t: TestContext, relist: WatchStep, pages = [page('20', [pod('a')])]) {
  const api = new ScriptedApi(pages, [
    { events: [{ type: 'ADDED', object: pod('a', '7') }] },
    // The watch after the paginated list; its 410 relists.
    { events: [bookmark('21'), expiredEvent] },
    relist,
  ], { streamingLists: true });
  const run = start(t, api);
  assert.deepEqual(summary(await run.take(3)), [
    'init',
    'initApply a',
    'error the streaming list ended before its last object; listing again, in pages 1500',
  ]);
  assert.deepEqual(summary([await run.next(1500), ...(await run.take(4))]), [
    'init',
    'initApply a',
    'initDone',
    'watching',
    'error 410 0',
  ]);
  return { api, run };
}

test('a streaming list ended without the bookmark that ends it: one paginated list; a later relist streams again', async (t) => {
  const { api, run } = await cutOffThenExpired(t, {
    events: [{ type: 'ADDED', object: pod('a', '7') }, initialEventsEnd('22')],
  });
  assert.deepEqual(summary([await run.next(0), ...(await run.take(3))]), [
    'init',
    'initApply a',
    'initDone',
    'watching',
  ]);
  assert.deepEqual(api.watches.map((o) => o.sendInitialEvents), [true, undefined, true]);
});

test('streaming lists ended twice running without their bookmark (a server ignoring the parameters): paginated lists from then on', async (t) => {
  const { api, run } = await cutOffThenExpired(t, { events: [{ type: 'ADDED', object: pod('a', '7') }] }, [
    page('20', [pod('a')]),
    page('22', [pod('a')]),
  ]);
  assert.deepEqual(summary([await run.next(0), ...(await run.take(2))]), [
    'init',
    'initApply a',
    'error the streaming list ended before its last object twice running; paginated lists from now on 1500',
  ]);
  assert.deepEqual(summary([await run.next(1500), ...(await run.take(2))]), ['init', 'initApply a', 'initDone']);
  assert.equal(api.lists.length, 2);
});

test('a watcher told not to (a one-off read, which may list but not watch) lists in pages where the API could stream', async (t) => {
  const api = new ScriptedApi([page('10', [pod('a')])], [], { streamingLists: true });
  const run = start(t, api, { streamingLists: false });
  assert.deepEqual(summary(await run.take(3)), ['init', 'initApply a', 'initDone']);
  assert.equal(api.watches.length, 0);
});

/** The pods a widening adds in these tests: those named b…, selected by `b`. */
const ADDS_B: Added = { adds: (meta) => meta.name.startsWith('b'), selector: 'b' };

/** A shard selector that widens when the test says so: `a` first, `a || b` after widen(). */
function widens(): { selector: () => string; widening: Widening; widen: () => void } {
  let selector = 'a';
  const widening = new Widening();
  return {
    selector: () => selector,
    widening,
    widen: () => {
      selector = 'a || b';
      widening.request(ADDS_B);
    },
  };
}

/**
 * A watcher that listed `a` at version 10 and watches quietly, then widened: the lists after the
 * first (what the widening adds, and what follows) are `then`'s.
 */
async function widenedWhileWatching(t: TestContext, then: ListStep[]) {
  const { promise: held } = Promise.withResolvers<readonly WatchEvent[]>();
  const api = new ScriptedApi([page('10', [pod('a')]), ...then], [{ events: [], until: held }]);
  const shard = widens();
  const run = start(t, api, { shardSelector: shard.selector, widening: shard.widening });
  assert.deepEqual(summary(await run.take(4)), ['init', 'initApply a', 'initDone', 'watching']);
  shard.widen();
  return { api, run };
}

test('a selector widened while it watches: what it adds listed from the watch cache, the wider watch resumed where it ended, its replays of what the list brought skipped', async (t) => {
  const { promise: held } = Promise.withResolvers<readonly WatchEvent[]>();
  const api = new ScriptedApi(
    [page('10', [pod('a')]), page('20', [pod('b1', '18')], 'p2'), page('20', [pod('b2', '19')])],
    [
      { events: [{ type: 'MODIFIED', object: pod('a', '11') }, bookmark('12')], until: held },
      {
        events: [
          // Replayed from 12: b1's change is in the list already; a's is not (a was watched until 12).
          { type: 'MODIFIED', object: pod('b1', '18') },
          { type: 'MODIFIED', object: pod('a', '19') },
          { type: 'DELETED', object: pod('b0', '17') },
          // Past the list's version: new for everyone.
          { type: 'ADDED', object: pod('b3', '21') },
          { type: 'MODIFIED', object: pod('b1', '22') },
        ],
      },
    ],
  );
  const shard = widens();
  const run = start(t, api, { shardSelector: shard.selector, widening: shard.widening });

  assert.deepEqual(summary(await run.take(5)), ['init', 'initApply a', 'initDone', 'watching', 'apply a']);
  const next = run.next();
  await immediate();
  shard.widen();
  assert.deepEqual(summary([await next, ...(await run.take(7))]), [
    'init merge',
    'initApply b1',
    'initApply b2',
    'initDone',
    'watching',
    'apply a',
    'apply b3',
    'apply b1',
  ]);
  void run.events.next();
  await immediate();
  assert.deepEqual(
    api.lists.map((o) => [o.shardSelector, o.resourceVersion, o.resourceVersionMatch, o.continue]),
    [['a', undefined, undefined, undefined], ['b', '12', 'NotOlderThan', undefined], ['b', undefined, undefined, 'p2']],
    'only what it adds, not older than where the watch was; later pages only continue',
  );
  assert.deepEqual(
    api.watches.map((o) => [o.shardSelector, o.resourceVersion]),
    [['a', '10'], ['a || b', '12'], ['a || b', '22']],
    'the wider watch resumes where the narrower one ended',
  );
});

test('a widening whose versions do not compare relists', async (t) => {
  const { api, run } = await widenedWhileWatching(t, [page('v2', [pod('b1')]), page('v3', [pod('a'), pod('b1')])]);
  assert.deepEqual(summary(await run.take(6)), [
    'init merge',
    'initApply b1',
    'init',
    'initApply a',
    'initApply b1',
    'initDone',
  ]);
  assert.deepEqual(api.lists.map((o) => [o.shardSelector, o.resourceVersion, o.resourceVersionMatch]), [
    ['a', undefined, undefined],
    ['b', '10', 'NotOlderThan'],
    ['a || b', '10', 'NotOlderThan'],
  ]);
});

test("a selector widened during a streaming list's initial objects: the list is not cut; what it adds is listed, streaming too, from the version of its bookmark; one that fails is listed again in pages", async (t) => {
  const { promise: held } = Promise.withResolvers<readonly WatchEvent[]>();
  const { promise: rest, resolve: send } = Promise.withResolvers<readonly WatchEvent[]>();
  const api = new ScriptedApi(
    [page('30', [pod('b1', '21'), pod('b3', '25')])],
    [
      { events: [{ type: 'ADDED', object: pod('a', '7') }], until: rest },
      // What it adds, streaming: its objects, then the bookmark that ends them; left there.
      { events: [{ type: 'ADDED', object: pod('b1', '12') }, initialEventsEnd('20'), bookmark('21')] },
      { events: [], until: held },
      // The next one ends before its bookmark.
      { events: [{ type: 'ADDED', object: pod('b1', '21') }] },
    ],
    { streamingLists: true },
  );
  const shard = widens();
  const run = start(t, api, { shardSelector: shard.selector, widening: shard.widening });

  assert.deepEqual(summary(await run.take(2)), ['init', 'initApply a']);
  shard.widen();
  send([{ type: 'ADDED', object: pod('a2', '8') }, initialEventsEnd('9')]);
  assert.deepEqual(summary(await run.take(7)), [
    'initApply a2',
    'initDone',
    'watching',
    'init merge',
    'initApply b1',
    'initDone',
    'watching',
  ]);
  assert.equal(api.lists.length, 0, 'no list request');
  assert.deepEqual(
    api.watches.map((o) => [o.shardSelector, o.resourceVersion, o.sendInitialEvents]),
    [['a', undefined, true], ['b', '9', true], ['a || b', '9', undefined]],
  );

  // Widened again; the streaming list of it fails: in pages, after the backoff.
  shard.widening.request(ADDS_B);
  assert.deepEqual(summary(await run.take(3)), [
    'init merge',
    'initApply b1',
    'error the list of what the widened selector adds ended before its last object 1500',
  ]);
  assert.deepEqual(summary([await run.next(1500), ...(await run.take(3))]), [
    'init merge',
    'initApply b1',
    'initApply b3',
    'initDone',
  ]);
  assert.deepEqual(api.lists.map((o) => [o.shardSelector, o.resourceVersion, o.resourceVersionMatch]), [[
    'b',
    '9',
    'NotOlderThan',
  ]]);
});

test('a selector widened before the first list completes is served by a list that asks the wider selector, or by one list of what it adds after it', async (t) => {
  await t.test('before the list starts', async (t) => {
    const api = new ScriptedApi([page('10', [pod('a'), pod('b')])], []);
    const shard = widens();
    shard.widen();
    const run = start(t, api, { shardSelector: shard.selector, widening: shard.widening });
    assert.deepEqual(summary(await run.take(4)), ['init', 'initApply a', 'initApply b', 'initDone']);
    void run.events.next();
    await immediate();
    assert.deepEqual(api.lists.map((o) => o.shardSelector), ['a || b'], 'no list of what it adds');
    assert.deepEqual(api.watches.map((o) => [o.shardSelector, o.resourceVersion]), [['a || b', '10']]);
  });
  await t.test('while it pages', async (t) => {
    const { promise: second, resolve: answer } = Promise.withResolvers<PartialObjectMetadataList>();
    const api = new ScriptedApi([page('10', [pod('a')], 'p2'), second, page('10', [pod('b')])], []);
    const shard = widens();
    const run = start(t, api, { shardSelector: shard.selector, widening: shard.widening });
    assert.deepEqual(summary(await run.take(2)), ['init', 'initApply a']);
    const next = run.next();
    await immediate();
    shard.widen();
    answer(page('10', [pod('a2')]));
    assert.deepEqual(summary([await next, ...(await run.take(4))]), [
      'initApply a2',
      'initDone',
      'init merge',
      'initApply b',
      'initDone',
    ]);
    assert.deepEqual(
      api.lists.map((o) => [o.shardSelector, o.resourceVersion, o.resourceVersionMatch]),
      [['a', undefined, undefined], ['a', undefined, undefined], ['b', '10', 'NotOlderThan']],
    );
  });
});

test('a list of what a widened selector adds that finds its version expired (410) relists the wider selector; one that fails otherwise is tried again after the backoff', async (t) => {
  await t.test('410', async (t) => {
    const { api, run } = await widenedWhileWatching(t, [expired(), page('30', [pod('a'), pod('b')])]);
    assert.deepEqual(summary(await run.take(6)), [
      'init merge',
      'error 410 0',
      'init',
      'initApply a',
      'initApply b',
      'initDone',
    ]);
    assert.deepEqual(
      api.lists.map((o) => [o.shardSelector, o.resourceVersion, o.resourceVersionMatch]),
      [['a', undefined, undefined], ['b', '10', 'NotOlderThan'], ['a || b', '10', 'NotOlderThan']],
    );
  });
  await t.test('500', async (t) => {
    const failed = new ApiError('GET', '/api/v1/pods', 500, { message: 'etcd away' });
    const { api, run } = await widenedWhileWatching(t, [failed, page('10', [pod('b')])]);
    assert.deepEqual(summary(await run.take(2)), ['init merge', 'error 500 1500']);
    assert.deepEqual(summary([await run.next(1500), ...(await run.take(2))]), [
      'init merge',
      'initApply b',
      'initDone',
    ]);
    assert.deepEqual(api.lists.slice(1).map((o) => [o.shardSelector, o.resourceVersion, o.resourceVersionMatch]), [[
      'b',
      '10',
      'NotOlderThan',
    ], ['b', '10', 'NotOlderThan']]);
  });
});

test('widenings asked before one is taken are listed together; one that no selector can say lists everything', () => {
  const widening = new Widening();
  const named = (prefix: string, selector: string | undefined): Added => ({
    adds: (meta) => meta.name.startsWith(prefix),
    selector,
  });
  assert.equal(widening.take(), undefined);
  widening.request(named('x', 'x'));
  widening.request(named('y', 'y'));
  assert.equal(widening.signal.aborted, true);
  const both = widening.take();
  assert.equal(both?.selector, 'x || y');
  assert.deepEqual(['x1', 'y1', 'z1'].map((name) => both?.adds({ name })), [true, true, false]);
  assert.equal(widening.signal.aborted, false, 'a fresh signal after a take');
  widening.request(named('x', 'x'));
  widening.request(named('y', undefined));
  assert.equal(widening.take()?.selector, undefined);
  assert.equal(widening.pending, false);
});
