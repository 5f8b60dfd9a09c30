import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Refreshing } from './refreshing.ts';

/** A clock the test moves by hand. */
function clock(): { now: () => number; advance: (ms: number) => void } {
  let t = 0;
  return { now: () => t, advance: (ms) => (t += ms) };
}

/** A loader that counts its runs and finishes only when the test says so. */
function loader(now: () => number, lifetimeMs: number) {
  let runs = 0;
  const pending: (() => void)[] = [];
  const load = () => {
    runs++;
    const value = { run: runs };
    return new Promise<{ value: { run: number }; freshUntil: number }>((resolve) =>
      pending.push(() => resolve({ value, freshUntil: now() + lifetimeMs }))
    );
  };
  return { load, runs: () => runs, finish: () => pending.splice(0).forEach((f) => f()) };
}

test('20 callers of a missing value share one load', async () => {
  const c = clock();
  const l = loader(c.now, 1000);
  const r = new Refreshing(l.load, c.now);
  const waiting = Array.from({ length: 20 }, () => r.get());
  l.finish();
  const values = await Promise.all(waiting);
  assert.equal(l.runs(), 1);
  assert.ok(values.every((v) => v === values[0]));
});

test('a fresh value is reused; a stale one is loaded again, once for all callers', async () => {
  const c = clock();
  const l = loader(c.now, 1000);
  const r = new Refreshing(l.load, c.now);
  const first = r.get();
  l.finish();
  const v1 = await first;
  c.advance(999);
  assert.equal(await r.get(), v1);
  c.advance(1);
  const waiting = Array.from({ length: 20 }, () => r.get());
  l.finish();
  const values = await Promise.all(waiting);
  assert.equal(l.runs(), 2);
  assert.ok(values.every((v) => v !== v1 && v === values[0]));
});

test('refresh(rejected) loads once however many requests were rejected, and not again for a value already replaced', async () => {
  const c = clock();
  const l = loader(c.now, 60_000);
  const r = new Refreshing(l.load, c.now);
  const first = r.get();
  l.finish();
  const rejected = await first;
  const refreshes = Array.from({ length: 20 }, () => r.refresh(rejected));
  l.finish();
  const fresh = await Promise.all(refreshes);
  assert.equal(l.runs(), 2);
  assert.ok(fresh.every((v) => v !== rejected && v === fresh[0]));
  // A late 401 for the old value finds it already replaced.
  assert.equal(await r.refresh(rejected), fresh[0]);
  assert.equal(l.runs(), 2);
});

test('a failed load is reported to its waiters and the next call tries again', async () => {
  let fail = true;
  const r = new Refreshing(async () => {
    if (fail) throw new Error('plugin failed');
    return { value: 'token', freshUntil: Infinity };
  });
  await assert.rejects(Promise.all([r.get(), r.get()]), /plugin failed/);
  fail = false;
  assert.equal(await r.get(), 'token');
});
