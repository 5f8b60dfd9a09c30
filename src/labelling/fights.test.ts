import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  FIGHT_BACKOFF_MAX_MS,
  FIGHT_BACKOFF_MS,
  FIGHT_RETAKES,
  FIGHT_WINDOW_MS,
  FightTracker,
  RETAKES_PER_MINUTE,
} from './fights.ts';

function tracker() {
  let now = 1_000_000;
  const fights = new FightTracker(() => now);
  return { fights, advance: (ms: number) => (now += ms), now: () => now };
}

test('from a manager yielded to: a one-off overwrite is retaken; a key taken back again and again is yielded, then retaken once after a doubling backoff', () => {
  const { fights, advance, now } = tracker();
  for (let i = 0; i < FIGHT_RETAKES; i++) {
    assert.equal(fights.contest('uid-1', 'labels/team', true).verdict, 'retake', `retake ${i + 1}`);
    advance(1000);
  }
  const first = fights.contest('uid-1', 'labels/team', true);
  assert.deepEqual(first, {
    verdict: 'yield',
    untilMs: now() + FIGHT_BACKOFF_MS,
    started: true,
    retakes: FIGHT_RETAKES,
  });
  advance(30_000);
  assert.deepEqual(fights.contest('uid-1', 'labels/team', true), {
    verdict: 'yield',
    untilMs: first.verdict === 'yield' ? first.untilMs : 0,
    started: false,
    retakes: 0,
  }, 'still backing off');
  advance(30_000);
  assert.equal(fights.contest('uid-1', 'labels/team', true).verdict, 'retake', 'the backoff is over: retaken once');
  advance(1000);
  const second = fights.contest('uid-1', 'labels/team', true);
  assert.equal(second.verdict, 'yield');
  assert.equal(
    second.verdict === 'yield' && second.untilMs - now(),
    2 * FIGHT_BACKOFF_MS,
    'taken back again: twice as long',
  );
  assert.equal(fights.contest('uid-2', 'labels/team', true).verdict, 'retake', 'another object is another fight');
  assert.equal(fights.contest('uid-1', 'labels/tier', true).verdict, 'retake', 'another key too');
});

test('the backoff stops growing at its cap; a key left alone for a window is forgotten', () => {
  const { fights, advance, now } = tracker();
  for (let i = 0; i < FIGHT_RETAKES; i++) fights.contest('u', 'labels/k', true);
  const backoffs: number[] = [];
  for (let round = 0; round < 9; round++) {
    const yielded = fights.contest('u', 'labels/k', true);
    assert.equal(yielded.verdict, 'yield');
    if (yielded.verdict !== 'yield') return;
    backoffs.push(yielded.untilMs - now());
    // Looked at again when the backoff ends: retaken once, and taken back again at once.
    advance(yielded.untilMs - now());
    assert.equal(fights.contest('u', 'labels/k', true).verdict, 'retake');
    advance(1000);
  }
  assert.deepEqual(backoffs.slice(0, 3), [FIGHT_BACKOFF_MS, 2 * FIGHT_BACKOFF_MS, 4 * FIGHT_BACKOFF_MS]);
  assert.equal(Math.max(...backoffs), FIGHT_BACKOFF_MAX_MS);
  // The other manager stops: nothing contested for a window past the backoff, then a one-off overwrite.
  advance(FIGHT_BACKOFF_MAX_MS + FIGHT_WINDOW_MS + 1);
  assert.equal(fights.contest('u', 'labels/k', true).verdict, 'retake', 'a fresh start');
});

test('from any other manager: put back every time, at most RETAKES_PER_MINUTE times a minute per object, never yielded (issue 46)', () => {
  const { fights, advance, now } = tracker();
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < RETAKES_PER_MINUTE; i++) {
      assert.equal(fights.contest('u', i % 2 ? 'labels/team' : 'labels/cc', false).verdict, 'retake');
      advance(1000);
    }
    const waiting = fights.contest('u', 'labels/team', false);
    assert.equal(waiting.verdict, 'wait', 'the minute is spent');
    assert.equal(waiting.verdict === 'wait' && waiting.untilMs - now(), 60_000 - RETAKES_PER_MINUTE * 1000);
    assert.equal(fights.yielded('u', 'labels/team'), false, 'not yielded: only delayed');
    assert.equal(fights.contest('v', 'labels/team', false).verdict, 'retake', 'another object has its own minute');
    advance(60_000);
  }
});
