// The Lease holder on a clock the test drives: renewals on their own schedule, the claim's end by
// this clock (writes on the wire aborted), the grace after a 403, lost races, and release.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createLogger } from '../util/log.ts';
import { type HolderEvents, LeaseHolder } from './holder.ts';
import { FakeClock, FakeLeases } from './testing/fakes.ts';

const log = createLogger({ level: 'error', format: 'json', write: () => {} });

function holder(leases: FakeLeases, identity: string, mayTake?: () => boolean): LeaseHolder {
  return new LeaseHolder(leases.as(identity), {
    namespace: 'ns',
    name: 'lease',
    identity,
    leaseDurationMs: 4000,
    validForMs: 3600,
    renewEveryMs: 1000,
    forbiddenGraceMs: 4000,
    content: () => ({ annotations: { says: identity } }),
    mayTake,
    clock: leases.clock,
    log,
  });
}

function setup() {
  const clock = new FakeClock();
  return { clock, leases: new FakeLeases(clock) };
}

test('renews every period; the claim holds until the last renewal was sent plus validFor, then aborts with the round in flight', async () => {
  const { clock, leases } = setup();
  const a = holder(leases, 'a');
  const stop = new AbortController();
  const renewed: boolean[] = [];
  let lapses = 0;
  const events: HolderEvents = { renewed: (lapsed) => renewed.push(lapsed), lapsed: () => lapses++ };
  const running = a.run(stop.signal, events);
  await clock.advance(5000);
  assert.equal(leases.writes.filter((w) => w.identity === 'a').length, 6, 'at 0, 1, …, 5 s');
  assert.equal(leases.lease('lease')?.metadata.annotations?.says, 'a');
  assert.ok(a.valid());
  const claim = a.claim;
  leases.hung.add('a');
  // Last renewal sent at 5 s: valid until 8.6 s by this clock.
  await clock.advance(3599);
  assert.ok(a.valid() && !claim.aborted);
  await clock.advance(1);
  assert.ok(!a.valid() && claim.aborted, 'ended exactly at 8.6 s');
  assert.equal(lapses, 1);
  assert.ok((leases.aborted.get('a') ?? 0) >= 1, 'the round on the wire was aborted');
  // Back: a renewal after the lapse says so, and a new claim begins.
  leases.hung.delete('a');
  await clock.advance(2000);
  assert.ok(a.valid() && !a.claim.aborted);
  assert.deepEqual(renewed.slice(-2), [true, false]);
  stop.abort();
  await running;
  assert.equal(await a.release('delete', 1000), true);
  assert.equal(leases.size, 0);
});

test('a 403 before the Lease was ever held ends renewing at once; once held, 403s are borne for the grace', async () => {
  const { clock, leases } = setup();
  leases.denied.add('a');
  const a = holder(leases, 'a');
  let forbidden = 0;
  await a.run(new AbortController().signal, { forbidden: () => forbidden++ });
  assert.equal(forbidden, 1);

  const b = holder(leases, 'b');
  const running = b.run(new AbortController().signal, { forbidden: () => forbidden++ });
  await clock.advance(1000);
  leases.denied.add('b');
  await clock.advance(3999);
  assert.equal(forbidden, 1, 'within the grace: retried');
  await clock.advance(1001);
  await running;
  assert.equal(forbidden, 2, 'past the grace: reported, renewing ends');
});

test('a lost race is read at once: a live holder the policy may not take is reported, a free Lease is taken', async () => {
  const { clock, leases } = setup();
  let mayTake = false;
  const a = holder(leases, 'a', () => mayTake);
  const held: string[] = [];
  const stop = new AbortController();
  const running = a.run(stop.signal, { held: (who) => held.push(who) });
  await clock.advance(0);
  const lease = leases.lease('lease');
  assert.ok(lease);
  await leases.as('b').update({ ...lease, spec: { ...lease.spec, holderIdentity: 'b' } });
  await clock.advance(1000);
  assert.deepEqual(held, ['b']);
  assert.ok(a.valid(), 'its claim runs on until it ends: the policy decides what being taken means');
  mayTake = true;
  await clock.advance(1000);
  assert.equal(leases.lease('lease')?.spec.holderIdentity, 'a');
  assert.equal(leases.lease('lease')?.spec.leaseTransitions, 1);
  stop.abort();
  await running;
  assert.equal(await a.release('clear', 1000), true);
  assert.equal(leases.lease('lease')?.spec.holderIdentity, null, 'cleared for a successor');
});

test('renewSoon writes at once, not a period later; content is asked at every write', async () => {
  const { clock, leases } = setup();
  let says = 'one';
  const a = new LeaseHolder(leases.as('a'), {
    namespace: 'ns',
    name: 'lease',
    identity: 'a',
    leaseDurationMs: 4000,
    validForMs: 3600,
    renewEveryMs: 1000,
    content: () => ({ annotations: { says } }),
    clock,
    log,
  });
  const stop = new AbortController();
  const running = a.run(stop.signal);
  await clock.advance(100);
  says = 'two';
  a.renewSoon();
  await clock.advance(0);
  assert.equal(leases.lease('lease')?.metadata.annotations?.says, 'two');
  stop.abort();
  await running;
  assert.equal(await a.release('keep', 1000), false);
  assert.equal(leases.size, 1, 'kept, to expire');
});

test('release deletes the Lease though a renewal cut short landed after all (a version it never saw)', async () => {
  const { clock, leases } = setup();
  const a = holder(leases, 'a');
  const stop = new AbortController();
  const running = a.run(stop.signal, {});
  await clock.advance(2000);
  stop.abort();
  await running;
  // Its last renewal landed, its answer lost: the Lease is at a version the holder did not see.
  const current = leases.lease('lease')!;
  assert.ok(await leases.as('a').update(current));
  assert.equal(await a.release('delete', 1000), true);
  assert.equal(leases.size, 0, 'deleted at the version read again');
});
