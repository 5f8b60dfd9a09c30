import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FIGHT_BACKOFF_MAX_MS, FIGHT_BACKOFF_MS, FIGHT_RETAKES, FIGHT_WINDOW_MS, FightTracker } from './fights.ts';

function tracker() {
  let now = 1_000_000;
  const fights = new FightTracker(() => now);
  return { fights, advance: (ms: number) => (now += ms), now: () => now };
}

test('a one-off overwrite is retaken; a key taken back again and again is yielded, then retaken once after a doubling backoff', () => {
  const { fights, advance, now } = tracker();
  for (let i = 0; i < FIGHT_RETAKES; i++) {
    assert.equal(fights.contest('uid-1', 'labels/team').verdict, 'retake', `retake ${i + 1}`);
    advance(1000);
  }
  const first = fights.contest('uid-1', 'labels/team');
  assert.deepEqual(first, {
    verdict: 'yield',
    untilMs: now() + FIGHT_BACKOFF_MS,
    started: true,
    retakes: FIGHT_RETAKES,
  });
  advance(30_000);
  assert.deepEqual(fights.contest('uid-1', 'labels/team'), {
    verdict: 'yield',
    untilMs: first.verdict === 'yield' ? first.untilMs : 0,
    started: false,
    retakes: 0,
  }, 'still backing off');
  advance(30_000);
  assert.equal(fights.contest('uid-1', 'labels/team').verdict, 'retake', 'the backoff is over: retaken once');
  advance(1000);
  const second = fights.contest('uid-1', 'labels/team');
  assert.equal(second.verdict, 'yield');
  assert.equal(
    second.verdict === 'yield' && second.untilMs - now(),
    2 * FIGHT_BACKOFF_MS,
    'taken back again: twice as long',
  );
  assert.equal(fights.contest('uid-2', 'labels/team').verdict, 'retake', 'another object is another fight');
  assert.equal(fights.contest('uid-1', 'labels/tier').verdict, 'retake', 'another key too');
});

test('the backoff stops growing at its cap; a key left alone for a window is forgotten', () => {
  const { fights, advance, now } = tracker();
  for (let i = 0; i < FIGHT_RETAKES; i++) fights.contest('u', 'labels/k');
  const backoffs: number[] = [];
  for (let round = 0; round < 9; round++) {
    const yielded = fights.contest('u', 'labels/k');
    assert.equal(yielded.verdict, 'yield');
    if (yielded.verdict !== 'yield') return;
    backoffs.push(yielded.untilMs - now());
    // Looked at again when the backoff ends: retaken once, and taken back again at once.
    advance(yielded.untilMs - now());
    assert.equal(fights.contest('u', 'labels/k').verdict, 'retake');
    advance(1000);
  }
  assert.deepEqual(backoffs.slice(0, 3), [FIGHT_BACKOFF_MS, 2 * FIGHT_BACKOFF_MS, 4 * FIGHT_BACKOFF_MS]);
  assert.equal(Math.max(...backoffs), FIGHT_BACKOFF_MAX_MS);
  // The other manager stops: nothing contested for a window past the backoff, then a one-off overwrite.
  advance(FIGHT_BACKOFF_MAX_MS + FIGHT_WINDOW_MS + 1);
  assert.equal(fights.contest('u', 'labels/k').verdict, 'retake', 'a fresh start');
});
