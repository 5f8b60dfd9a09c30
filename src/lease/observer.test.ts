import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Lease } from '../kube/lease.ts';
import { deleteExpired, LeaseObserver } from './observer.ts';
import { FakeClock } from './testing/fakes.ts';

/** A Lease at `version`, renewed `renewedMsAgo` by its writer's wall clock: which must never count. */
const lease = (name: string, version: string, renewedMsAgo = 0, holder: string | null = name): Lease => ({
  metadata: { name, namespace: 'ns', resourceVersion: version },
  spec: {
    holderIdentity: holder,
    leaseDurationSeconds: 4,
    renewTime: new Date(Date.now() - renewedMsAgo).toISOString(),
  },
});
const names = (leases: readonly Lease[]) => leases.map((l) => l.metadata.name);

test('a Lease is held for its duration after it was seen to change, by this clock, whatever its renewTime says', async () => {
  const clock = new FakeClock();
  const observer = new LeaseObserver(clock);
  // b's renewTime is 9 s old on a 4 s lease: a writer whose clock is 9 s behind ours, or ours ahead.
  let seen = observer.observe([lease('a', '1'), lease('b', '1', 9000)], clock.now());
  assert.deepEqual([names(seen.held), names(seen.expired), seen.nextExpiry], [['a', 'b'], [], 4001]);
  assert.deepEqual([...seen.unconfirmed], ['a', 'b'], 'seen at one version only');
  await clock.advance(3000);
  seen = observer.observe([lease('a', '2'), lease('b', '2', 9000)], clock.now());
  assert.deepEqual([names(seen.held), seen.nextExpiry, [...seen.unconfirmed]], [['a', 'b'], 7001, []], 'renewed');
  await clock.advance(4000);
  assert.deepEqual(
    names(observer.observe([lease('a', '2')], clock.now()).held),
    ['a'],
    'a whole duration since the change',
  );
  await clock.advance(1);
  assert.deepEqual(
    names(observer.observe([lease('a', '2', -60_000)], clock.now()).expired),
    ['a'],
    'then expired, even from the future',
  );
  // Gone and back (deleted, created anew with an old version string): seen afresh.
  observer.observe([], clock.now());
  assert.deepEqual(names(observer.observe([lease('a', '2')], clock.now()).held), ['a']);
});

test('a Lease without a holder (released) is expired at once; one not renewed for a while is late', async () => {
  const clock = new FakeClock();
  const observer = new LeaseObserver(clock);
  assert.deepEqual(names(observer.observe([lease('a', '1', 0, null)], clock.now()).expired), ['a']);
  observer.observe([lease('b', '1')], clock.now());
  await clock.advance(2000);
  assert.deepEqual([...observer.observe([lease('b', '1')], clock.now(), 1500).late], ['b']);
  assert.deepEqual([...observer.observe([lease('b', '2')], clock.now(), 1500).late], []);
});

test('an answer read long after its request was sent (the reader paused) judges the Leases as of the send', async () => {
  const clock = new FakeClock();
  const observer = new LeaseObserver(clock);
  observer.observe([lease('a', '1')], clock.now());
  await clock.advance(1000);
  // Sent at 1 s; the reader stopped for 10 s before it read the answer, which still shows version 1.
  const sent = clock.now();
  await clock.advance(10_000);
  const seen = observer.observe([lease('a', '1')], sent, 2000);
  assert.deepEqual([names(seen.held), names(seen.expired), [...seen.late]], [['a'], [], []], 'live as of the send');
  // A look sent after the pause that still finds version 1 does find it expired.
  assert.deepEqual(names(observer.observe([lease('a', '1')], clock.now()).expired), ['a']);
});

test('deleteExpired: a Lease renewed since it was judged expired (a 409) is held after all; others are gone', async () => {
  const clock = new FakeClock();
  const observer = new LeaseObserver(clock);
  const leases = [lease('a', '1'), lease('b', '1'), lease('c', '1')];
  observer.observe(leases, clock.now());
  await clock.advance(5000);
  const seen = observer.observe(leases, clock.now());
  const answers: Record<string, () => Promise<boolean>> = {
    a: () => Promise.resolve(true),
    b: () => Promise.resolve(false),
    c: () => Promise.reject(new Error('connection reset')),
  };
  const gone = await deleteExpired(seen, (l) => answers[l.metadata.name]!());
  assert.deepEqual([names(gone), names(seen.held)], [['a', 'c'], ['b']]);
});
