import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Deadlines } from './deadlines.ts';

test('a deadline expires once its time has passed, within a tick or two, and calls what ends its request', async () => {
  const deadlines = new Deadlines(10);
  const started = performance.now();
  let endedAt: number | undefined;
  const deadline = deadlines.start(50);
  deadline.request = { destroy: () => void (endedAt = performance.now()) };
  await sleep(30);
  assert.equal(deadline.expired, false);
  await sleep(100);
  assert.equal(deadline.expired, true);
  assert.ok(endedAt !== undefined && endedAt - started >= 50, `expired after ${endedAt! - started} ms`);
});

test('a deadline ended in time never expires, and the others still do', async () => {
  const deadlines = new Deadlines(10);
  const ended = deadlines.start(30);
  const kept = deadlines.start(30);
  let calls = 0;
  ended.request = { destroy: () => void calls++ };
  deadlines.end(ended);
  await sleep(80);
  assert.equal(ended.expired, false);
  assert.equal(calls, 0);
  assert.equal(kept.expired, true);
});

test('deadlines started after the timer stopped (nothing pending for a tick) still expire', async () => {
  const deadlines = new Deadlines(10);
  deadlines.end(deadlines.start(1000));
  await sleep(40); // the timer stops on a tick with nothing pending
  const later = deadlines.start(20);
  await sleep(80);
  assert.equal(later.expired, true);
});

test("a signal's abort ends the requests in flight under it, with its reason, and no others", () => {
  const deadlines = new Deadlines(10);
  const writes = new AbortController();
  const other = new AbortController();
  const ended: string[] = [];
  const request = (name: string) => ({ destroy: (error?: Error) => void ended.push(`${name}: ${error?.message}`) });
  const a = deadlines.start(60_000, writes.signal);
  const b = deadlines.start(60_000, writes.signal);
  const c = deadlines.start(60_000, other.signal);
  const d = deadlines.start(60_000);
  const done = deadlines.start(60_000, writes.signal);
  a.request = request('a');
  b.request = request('b');
  c.request = request('c');
  d.request = request('d');
  done.request = request('done');
  deadlines.end(done);
  writes.abort(new Error('leadership lost'));
  assert.deepEqual(ended, ['a: leadership lost', 'b: leadership lost']);
  other.abort('not an Error');
  assert.deepEqual(ended.slice(2), ['c: undefined']);
  for (const deadline of [a, b, c, d]) deadlines.end(deadline);
});

test('one listener per signal, however many deadlines carry it', () => {
  const deadlines = new Deadlines(10);
  const controller = new AbortController();
  let added = 0;
  const add = controller.signal.addEventListener.bind(controller.signal);
  controller.signal.addEventListener = ((...args: Parameters<typeof add>) => {
    added++;
    add(...args);
  }) as typeof add;
  for (let i = 0; i < 100; i++) deadlines.end(deadlines.start(60_000, controller.signal));
  assert.equal(added, 1);
});
