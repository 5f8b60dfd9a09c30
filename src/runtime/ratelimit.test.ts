import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BucketRateLimiter, ItemExponentialRateLimiter, MaxOfRateLimiter } from './ratelimit.ts';

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

test('the bucket allows a burst, then spaces calls at 1/qps', () => {
  let now = 0;
  const bucket = new BucketRateLimiter({ qps: 10, burst: 3, now: () => now });
  assert.deepEqual([bucket.when(), bucket.when(), bucket.when()], [0, 0, 0]);
  assert.equal(bucket.when(), 100);
  assert.equal(bucket.when(), 200);
  now = 1000; // refilled by 10 tokens, capped at the burst of 3, minus the 2 borrowed
  assert.equal(bucket.when(), 0);
});

test('the default controller limiter takes the longer of per-key backoff and the overall bucket', () => {
  const limiter = new MaxOfRateLimiter(
    new ItemExponentialRateLimiter({ initialMs: 5 }),
    new BucketRateLimiter({ qps: 10, burst: 1, now: () => 0 }),
  );
  assert.equal(limiter.when('a'), 5);
  assert.equal(limiter.when('b'), 100);
  assert.equal(limiter.retries('a'), 1);
  limiter.forget('a');
  assert.equal(limiter.retries('a'), 0);
});
