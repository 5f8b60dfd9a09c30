import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Lease } from '../kube/lease.ts';
import { FakeClock } from '../runtime/testing/fakelease.ts';
import { Liveness } from './liveness.ts';

const lease = (name: string, version: string, renewedMsAgo: number): Lease => ({
  metadata: { name, namespace: 'ns', resourceVersion: version },
  spec: { leaseDurationSeconds: 4, renewTime: new Date(Date.now() - renewedMsAgo).toISOString() },
});
const names = (leases: readonly Lease[]) => leases.map((l) => l.metadata.name);

test('a Lease is held for its duration after it was seen to change, by this clock; one long unrenewed is expired at first sight', async () => {
  const clock = new FakeClock();
  const liveness = new Liveness(clock);
  // b's renewTime is 9 s old: over two durations of 4 s, a pod long gone.
  let seen = liveness.observe([lease('a', '1', 0), lease('b', '1', 9000)]);
  assert.deepEqual([names(seen.held), names(seen.expired), seen.nextExpiry], [['a'], ['b'], 4001]);
  await clock.advance(3000);
  seen = liveness.observe([lease('a', '2', 0)]);
  assert.deepEqual([names(seen.held), seen.nextExpiry], [['a'], 7001], 'renewed: held from now');
  await clock.advance(4000);
  assert.deepEqual(names(liveness.observe([lease('a', '2', 0)]).held), ['a'], 'a whole duration since the change');
  await clock.advance(1);
  assert.deepEqual(
    names(liveness.observe([lease('a', '2', 0)]).expired),
    ['a'],
    'then expired, whatever its renewTime says',
  );
  // Gone and back (deleted, created anew with an old version string): seen afresh.
  liveness.observe([]);
  assert.deepEqual(names(liveness.observe([lease('a', '2', 0)]).held), ['a']);
});
