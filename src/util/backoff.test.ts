import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Backoff, exponentialDelay } from './backoff.ts';

/** A clock the test moves by hand. */
function clock(): { now: () => number; advance: (ms: number) => void } {
  let t = 0;
  return { now: () => t, advance: (ms) => (t += ms) };
}

function waits(backoff: Backoff, n: number): number[] {
  return Array.from({ length: n }, () => backoff.next());
}

test('exponentialDelay grows by factor and stops at the cap, even for huge attempts', () => {
  const curve = { initialMs: 10, factor: 3, maxMs: 500 };
  assert.deepEqual([0, 1, 2, 3, 4].map((n) => exponentialDelay(curve, n)), [10, 30, 90, 270, 500]);
  assert.equal(exponentialDelay(curve, 1e6), 500);
});

test('defaults: 0.8 s doubling to 30 s', () => {
  const backoff = new Backoff({ random: () => 0, now: clock().now });
  assert.deepEqual(waits(backoff, 9), [800, 1600, 3200, 6400, 12_800, 25_600, 30_000, 30_000, 30_000]);
});

test('jitter only adds, up to jitter × the delay', () => {
  const at = (random: number, jitter?: number) =>
    new Backoff({ random: () => random, now: clock().now, ...(jitter === undefined ? {} : { jitter }) }).next();
  assert.equal(at(0), 800);
  assert.equal(at(0.5), 1200);
  assert.ok(at(0.999_999) < 1600);
  assert.equal(at(0.5, 0.1), 840);
  assert.equal(at(0.9, 0), 800);
});

test('with real randomness every wait lies in [d, 2d)', () => {
  const backoff = new Backoff({ initialMs: 100, maxMs: 1000, now: clock().now });
  const bases = [100, 200, 400, 800, 1000, 1000, 1000];
  for (const [i, wait] of waits(backoff, bases.length).entries()) {
    const base = bases[i] ?? 0;
    assert.ok(wait >= base && wait < 2 * base, `wait ${i} = ${wait}, base ${base}`);
  }
});

test('starts over after resetAfterMs without failures, not before', () => {
  const c = clock();
  const backoff = new Backoff({ random: () => 0, now: c.now, resetAfterMs: 120_000 });
  assert.deepEqual(waits(backoff, 3), [800, 1600, 3200]);
  c.advance(119_999);
  assert.equal(backoff.next(), 6400);
  c.advance(120_000);
  assert.equal(backoff.next(), 800);
});

test('reset() starts over at once', () => {
  const backoff = new Backoff({ random: () => 0, now: clock().now });
  waits(backoff, 4);
  backoff.reset();
  assert.deepEqual(waits(backoff, 2), [800, 1600]);
});
