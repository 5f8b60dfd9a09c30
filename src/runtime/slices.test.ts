import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setImmediate } from 'node:timers/promises';
import { SLICE_MS, Sliced } from './slices.ts';

/** A Sliced whose every step takes 1 ms, and what it stepped. */
function slow(): { out: number[]; sliced: Sliced<number> } {
  const out: number[] = [];
  const sliced = new Sliced<number>((n) => {
    out.push(n);
    const until = performance.now() + 1;
    while (performance.now() < until);
  });
  return { out, sliced };
}

test('a small batch is stepped at once, in order', () => {
  const out: number[] = [];
  const sliced = new Sliced<number>((n) => out.push(n));
  sliced.pushAll([1, 2, 3]);
  sliced.pushAll([4]);
  assert.deepEqual(out, [1, 2, 3, 4]);
  assert.equal(sliced.busy, false);
});

test('a long batch lets the event loop in between slices, and keeps its order across pushes', async () => {
  const { out, sliced } = slow();
  sliced.pushAll(Array.from({ length: 4 * SLICE_MS }, (_, i) => i));
  // The first slice ran synchronously, and stopped once spent.
  assert.ok(out.length > 0 && out.length < 4 * SLICE_MS, `stepped ${out.length}`);
  let turns = 0;
  const timer = setInterval(() => turns++, 0);
  // Pushed while draining: after what came before.
  sliced.pushAll([100, 101]);
  while (sliced.busy) await setImmediate();
  clearInterval(timer);
  assert.deepEqual(out, [...Array.from({ length: 4 * SLICE_MS }, (_, i) => i), 100, 101]);
  assert.ok(turns > 0, 'timers ran while it drained');
});

test('an iterable is read as it is stepped: a live Set may grow meanwhile', async () => {
  const live = new Set(Array.from({ length: 4 * SLICE_MS }, (_, i) => i));
  const { out, sliced } = slow();
  sliced.pushAll(live);
  live.add(1000);
  while (sliced.busy) await setImmediate();
  assert.deepEqual(out, [...live]);
});

test('clear drops what is pending, and what comes after it is stepped', async () => {
  const { out, sliced } = slow();
  sliced.pushAll(Array.from({ length: 4 * SLICE_MS }, (_, i) => i));
  const stepped = out.length;
  sliced.clear();
  await setImmediate();
  await setImmediate();
  assert.equal(out.length, stepped);
  sliced.pushAll([-1]);
  assert.equal(out.at(-1), -1);
  // A loaded machine may spend the slice on that one step: the drain then ends after a turn.
  await setImmediate();
  assert.equal(sliced.busy, false);
});
