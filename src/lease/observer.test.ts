import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Lease } from '../kube/lease.ts';
import { LeaseObserver } from './observer.ts';
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
  let seen = observer.observe([lease('a', '1'), lease('b', '1', 9000)]);
  assert.deepEqual([names(seen.held), names(seen.expired), seen.nextExpiry], [['a', 'b'], [], 4001]);
  assert.deepEqual([...seen.unconfirmed], ['a', 'b'], 'seen at one version only');
  await clock.advance(3000);
  seen = observer.observe([lease('a', '2'), lease('b', '2', 9000)]);
  assert.deepEqual([names(seen.held), seen.nextExpiry, [...seen.unconfirmed]], [['a', 'b'], 7001, []], 'renewed');
  await clock.advance(4000);
  assert.deepEqual(names(observer.observe([lease('a', '2')]).held), ['a'], 'a whole duration since the change');
  await clock.advance(1);
  assert.deepEqual(
    names(observer.observe([lease('a', '2', -60_000)]).expired),
    ['a'],
    'then expired, even from the future',
  );
  // Gone and back (deleted, created anew with an old version string): seen afresh.
  observer.observe([]);
  assert.deepEqual(names(observer.observe([lease('a', '2')]).held), ['a']);
});

test('a Lease without a holder (released) is expired at once; one not renewed for a while is late', async () => {
  const clock = new FakeClock();
  const observer = new LeaseObserver(clock);
  assert.deepEqual(names(observer.observe([lease('a', '1', 0, null)]).expired), ['a']);
  observer.observe([lease('b', '1')]);
  await clock.advance(2000);
  assert.deepEqual([...observer.observe([lease('b', '1')], 1500).late], ['b']);
  assert.deepEqual([...observer.observe([lease('b', '2')], 1500).late], []);
});
