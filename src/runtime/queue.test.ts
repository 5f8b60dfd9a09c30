import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import { test } from 'node:test';
import timers from 'node:timers';
import type { QueueMetrics, WorkQueueOptions } from './queue.ts';
import { WorkQueue } from './queue.ts';

/** A queue on node:test's mocked clock: t.mock.timers.tick(ms) moves time and fires timers. */
function mockedQueue(t: TestContext, options: WorkQueueOptions = {}): WorkQueue {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  // Node resets test-context mocks after each test, Deno's node:test does not. A full
  // reset restores spies on timers before the timers themselves, as Node's own does.
  t.after(() => t.mock.reset());
  return new WorkQueue({ now: () => Date.now(), ...options });
}

/** Whether p has settled, once already-queued reactions have run. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  const pending = Symbol('pending');
  return (await Promise.race([p, Promise.resolve(pending)])) !== pending;
}

/** Takes every key ready now. */
async function drain(queue: WorkQueue): Promise<string[]> {
  const keys: string[] = [];
  while (queue.length > 0) keys.push((await queue.get()) ?? '');
  return keys;
}

test('a key is pending at most once, and keys come out in arrival order', async () => {
  const queue = new WorkQueue();
  for (const key of ['a', 'b', 'a', 'c', 'b']) queue.add(key);
  assert.equal(queue.length, 3);
  assert.deepEqual(await drain(queue), ['a', 'b', 'c']);
});

test('a held key is not handed to a second worker; added meanwhile, it comes back once after done', async () => {
  const queue = new WorkQueue();
  queue.add('a');
  assert.equal(await queue.get(), 'a');
  queue.add('a');
  queue.add('a');
  assert.equal(queue.length, 0);
  const second = queue.get();
  assert.equal(await settled(second), false);
  queue.done('a');
  assert.equal(await second, 'a');
  queue.done('a');
  assert.equal(queue.length, 0);
});

test('done releases a key for good unless it was added again; done for a key not held is ignored', async () => {
  const queue = new WorkQueue();
  queue.add('a');
  assert.equal(await queue.get(), 'a');
  queue.done('a');
  queue.done('a');
  queue.done('never-added');
  assert.equal(queue.length, 0);
  queue.add('a');
  assert.equal(queue.length, 1);
});

test('blocked get()s receive keys as they are added, oldest getter first', async () => {
  const queue = new WorkQueue();
  const first = queue.get();
  const second = queue.get();
  queue.add('a');
  queue.add('b');
  assert.equal(await first, 'a');
  assert.equal(await second, 'b');
  // Handed straight to a worker, a key is held at once: adding it again must wait for done.
  queue.add('a');
  assert.equal(queue.length, 0);
});

test('shutDown releases blocked getters, drops pending keys and ignores later adds', async () => {
  const queue = new WorkQueue();
  queue.add('held');
  assert.equal(await queue.get(), 'held');
  const blocked = queue.get();
  queue.add('held');
  queue.shutDown();
  assert.equal(await blocked, undefined);
  queue.add('late');
  assert.equal(queue.length, 0);
  assert.equal(await queue.get(), undefined);
  // The worker still holding a key finishes normally; its key is not handed out again.
  queue.done('held');
  assert.equal(queue.length, 0);
});

test('addAfter adds a key once its delay has passed', (t) => {
  const queue = mockedQueue(t);
  queue.addAfter('a', 1000);
  queue.addAfter('b', 500);
  t.mock.timers.tick(499);
  assert.equal(queue.length, 0);
  t.mock.timers.tick(1);
  assert.equal(queue.length, 1);
  t.mock.timers.tick(500);
  assert.equal(queue.length, 2);
});

test('addAfter keeps the earlier deadline, and a superseded one never adds again', async (t) => {
  const queue = mockedQueue(t);
  queue.addAfter('a', 1000);
  queue.addAfter('a', 100);
  queue.addAfter('a', 5000);
  t.mock.timers.tick(100);
  assert.deepEqual(await drain(queue), ['a']);
  queue.done('a');
  t.mock.timers.tick(10_000);
  assert.equal(queue.length, 0);
});

test('delays of a minute or more wait by the second: never early, at most a second late', (t) => {
  const queue = mockedQueue(t);
  t.mock.timers.tick(250);
  queue.addAfter('a', 300_000);
  queue.addAfter('b', 300_750);
  t.mock.timers.tick(299_999);
  assert.equal(queue.length, 0);
  t.mock.timers.tick(751);
  assert.equal(queue.length, 2, 'both due at the end of their second');
});

test('the earlier deadline wins between short and long delays', async (t) => {
  const queue = mockedQueue(t);
  queue.addAfter('a', 300_000);
  queue.addAfter('a', 100);
  queue.addAfter('b', 100);
  queue.addAfter('b', 300_000);
  queue.addAfter('c', 300_000);
  queue.addAfter('c', 120_000);
  t.mock.timers.tick(100);
  assert.deepEqual(await drain(queue), ['a', 'b']);
  queue.done('a');
  queue.done('b');
  t.mock.timers.tick(120_000);
  assert.deepEqual(await drain(queue), ['c']);
  queue.done('c');
  t.mock.timers.tick(600_000);
  assert.equal(queue.length, 0, 'superseded deadlines never add again');
});

test('remove drops a key’s delayed add, short or long, and its backoff', async (t) => {
  const queue = mockedQueue(t);
  queue.addAfter('short', 100);
  queue.addAfter('long', 300_000);
  queue.addAfter('kept', 300_000);
  for (let i = 0; i < 5; i++) queue.addRateLimited('failing');
  queue.remove('short');
  queue.remove('long');
  queue.remove('failing');
  t.mock.timers.tick(600_000);
  assert.deepEqual(await drain(queue), ['kept']);
  queue.addRateLimited('failing');
  t.mock.timers.tick(5);
  assert.deepEqual(await drain(queue), ['failing'], 'back to the first backoff step');
});

test('addAfter with no delay adds at once', (t) => {
  const queue = mockedQueue(t);
  queue.addAfter('a', 0);
  queue.addAfter('b', -5);
  assert.equal(queue.length, 2);
});

test('delayed keys that are already pending are not queued twice', async (t) => {
  const queue = mockedQueue(t);
  queue.add('a');
  queue.addAfter('a', 100);
  t.mock.timers.tick(100);
  assert.deepEqual(await drain(queue), ['a']);
});

test('all delayed adds share one timer, moved only for an earlier deadline', (t) => {
  const queue = mockedQueue(t);
  const setTimeout = t.mock.method(timers, 'setTimeout');
  for (let i = 0; i < 10_000; i++) queue.addAfter(`key-${i}`, 1000 + i);
  for (let i = 0; i < 10_000; i++) queue.addAfter(`later-${i}`, 300_000 + i);
  assert.equal(setTimeout.mock.callCount(), 1);
  queue.addAfter('urgent', 10);
  assert.equal(setTimeout.mock.callCount(), 2);
  t.mock.timers.tick(10);
  // Re-armed once for the next deadline.
  assert.equal(setTimeout.mock.callCount(), 3);
  t.mock.timers.tick(20_000);
  assert.equal(queue.length, 10_001);
  t.mock.timers.tick(300_000);
  assert.equal(queue.length, 20_001);
});

test('the timer does not keep the process alive', (t) => {
  const setTimeout = t.mock.method(timers, 'setTimeout');
  const queue = new WorkQueue();
  queue.addAfter('a', 60_000);
  assert.equal(setTimeout.mock.calls[0]?.result?.hasRef(), false);
  queue.shutDown();
});

test('shutDown cancels delayed adds', (t) => {
  const queue = mockedQueue(t);
  queue.addAfter('a', 100);
  queue.addAfter('b', 300_000);
  queue.shutDown();
  queue.addAfter('c', 100);
  t.mock.timers.tick(600_000);
  assert.equal(queue.length, 0);
});

test('addRateLimited backs a key off exponentially until forget', async (t) => {
  const queue = mockedQueue(t);
  const retryAfter = async (ms: number): Promise<void> => {
    queue.addRateLimited('a');
    t.mock.timers.tick(ms - 1);
    assert.equal(queue.length, 0, `not before ${ms} ms`);
    t.mock.timers.tick(1);
    assert.equal(await queue.get(), 'a', `after ${ms} ms`);
    queue.done('a');
  };
  await retryAfter(5);
  await retryAfter(10);
  await retryAfter(20);
  queue.forget('a');
  await retryAfter(5);
});

test('retries of many failing keys never outrun the overall bucket: by time t at most 100 + 10/s × t', async (t) => {
  const queue = mockedQueue(t);
  const keys = Array.from({ length: 300 }, (_, i) => `k${i}`);
  for (const key of keys) queue.add(key);
  const failed = new Set<string>();
  let retries = 0;
  // Every 10 ms, every key that is ready fails at once (the fastest a worker pool could fail).
  for (let now = 0; now <= 20_000; now += 10) {
    while (queue.length > 0) {
      const key = (await queue.get())!;
      if (failed.has(key)) {
        retries++;
        assert.ok(retries <= 100 + now / 100, `${retries} retries by ${now} ms`);
      }
      failed.add(key);
      queue.addRateLimited(key);
      queue.done(key);
    }
    t.mock.timers.tick(10);
  }
  // The bucket is the only limit here: it is used to the full.
  assert.ok(retries >= 290, `${retries} retries in 20 s`);
});

test('metrics follow client-go: adds, depth, retries, queue latency and work duration', async (t) => {
  const seen = {
    adds: 0,
    depth: [] as number[],
    retries: 0,
    queueLatency: [] as number[],
    workDuration: [] as number[],
  };
  const metrics: QueueMetrics = {
    adds: () => void seen.adds++,
    depth: (n) => void seen.depth.push(n),
    retries: () => void seen.retries++,
    queueLatency: (s) => void seen.queueLatency.push(s),
    workDuration: (s) => void seen.workDuration.push(s),
  };
  const queue = mockedQueue(t, { metrics });
  queue.add('a');
  queue.add('a');
  queue.add('b');
  t.mock.timers.tick(250);
  assert.equal(await queue.get(), 'a');
  queue.add('a');
  t.mock.timers.tick(500);
  queue.done('a');
  queue.addAfter('c', 100);
  assert.deepEqual(seen, { adds: 3, depth: [1, 2, 1, 2], retries: 1, queueLatency: [0.25], workDuration: [0.5] });
});

test('take() hands out a key pending now, held as get() holds it; nothing pending, or shut down, is undefined', () => {
  const queue = new WorkQueue();
  assert.equal(queue.take(), undefined);
  queue.add('a');
  queue.add('b');
  assert.equal(queue.take(), 'a');
  queue.add('a'); // held: it comes back after done()
  assert.equal(queue.take(), 'b');
  assert.equal(queue.take(), undefined);
  queue.done('a');
  assert.equal(queue.take(), 'a');
  queue.add('c');
  queue.shutDown();
  assert.equal(queue.take(), undefined);
});
