import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ItemExponentialRateLimiter } from './ratelimit.ts';

test('each failure of a key doubles its delay from 5 ms', () => {
  const limiter = new ItemExponentialRateLimiter();
  assert.deepEqual([1, 2, 3, 4, 5].map(() => limiter.when('a')), [5, 10, 20, 40, 80]);
  assert.equal(limiter.retries('a'), 5);
});

test('the delay stops at 1000 s', () => {
  const limiter = new ItemExponentialRateLimiter();
  const delays = Array.from({ length: 2000 }, () => limiter.when('a'));
  assert.equal(delays[17], 655_360);
  assert.equal(delays[18], 1_000_000);
  assert.equal(delays.at(-1), 1_000_000);
});

test('keys back off independently', () => {
  const limiter = new ItemExponentialRateLimiter();
  limiter.when('a');
  limiter.when('a');
  assert.equal(limiter.when('b'), 5);
  assert.equal(limiter.retries('a'), 2);
  assert.equal(limiter.retries('b'), 1);
  assert.equal(limiter.retries('c'), 0);
});

test('forget starts a key over', () => {
  const limiter = new ItemExponentialRateLimiter({ initialMs: 100, maxMs: 250 });
  assert.deepEqual([1, 2, 3].map(() => limiter.when('a')), [100, 200, 250]);
  limiter.forget('a');
  assert.equal(limiter.retries('a'), 0);
  assert.equal(limiter.when('a'), 100);
});
