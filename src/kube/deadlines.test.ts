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
