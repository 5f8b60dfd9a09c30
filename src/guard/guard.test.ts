// The field-manager guard on a clock the test drives: other holders judged by this host's clock
// only (a writer whose clock is behind is live while it renews; one left behind is gone after its
// duration), and writes held back after a lapse until the holders were looked at again.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Lease } from '../kube/lease.ts';
import { FakeClock, FakeLeases } from '../lease/testing/fakes.ts';
import { createLogger } from '../util/log.ts';
import { type Claim, claimMetadata, guardLeaseName } from './claim.ts';
import { FieldManagerGuard, FieldManagerTaken } from './guard.ts';

const log = createLogger({ level: 'error', format: 'json', write: () => {} });

const claim = (identity: string, fingerprint: string): Claim => ({
  fieldManager: 'labeller',
  fingerprint,
  scope: ['configmaps@*'],
  identity,
});

function guard(leases: FakeLeases, identity: string, fingerprint: string): FieldManagerGuard {
  return new FieldManagerGuard(leases.as(identity), claim(identity, fingerprint), {
    namespace: 'ns',
    leaseDurationMs: 3000,
    ignore: false,
    log,
    clock: leases.clock,
  });
}

/** Another labeller's guard Lease, written by hand as its process would, renewTime `skewMs` off. */
async function other(leases: FakeLeases, skewMs: number): Promise<() => Promise<void>> {
  const theirs = claim('other', 'sha256:theirs');
  const store = leases.as('other');
  const write = async () => {
    const current = leases.lease(guardLeaseName(theirs));
    const lease: Lease = {
      metadata: {
        ...current?.metadata,
        name: guardLeaseName(theirs),
        namespace: 'ns',
        ...claimMetadata(current?.metadata, theirs),
      },
      spec: {
        holderIdentity: 'other',
        leaseDurationSeconds: 3,
        renewTime: new Date(Date.now() + skewMs).toISOString(),
      },
    };
    await (current ? store.update(lease) : store.create(lease));
  };
  await write();
  return write;
}

test('a holder of another config whose clock is far behind is live while it renews: the claim is refused', async () => {
  const clock = new FakeClock();
  const leases = new FakeLeases(clock);
  // Its renewTime says 10 s ago on a 3 s lease: a wall-clock judge would call it long expired.
  const renew = await other(leases, -10_000);
  const mine = guard(leases, 'me', 'sha256:mine');
  const refused = assert.rejects(
    mine.claim({ fingerprint: 'sha256:mine', scope: ['configmaps@*'] }),
    FieldManagerTaken,
  );
  await clock.advance(0);
  // Seen once: looked at again a third of its duration later, renewed meanwhile.
  await renew();
  await clock.advance(1000);
  await refused;
});

test('a Lease of another config left behind (not renewed) stops nobody once unchanged for its duration, and is deleted', async () => {
  const clock = new FakeClock();
  const leases = new FakeLeases(clock);
  // Its renewTime is in the future (its writer's clock ahead): that must not keep it live either.
  await other(leases, 60_000);
  const mine = guard(leases, 'me', 'sha256:mine');
  let done = false;
  const claiming = mine.claim({ fingerprint: 'sha256:mine', scope: ['configmaps@*'] }).then(() => (done = true));
  await clock.advance(2000);
  assert.equal(done, false, 'still looking');
  await clock.advance(1500);
  await claiming;
  assert.equal(leases.size, 0, 'deleted');
});

test('after a lapse, writes wait until the holders were looked at again; another config that started meanwhile makes it step down', async () => {
  const clock = new FakeClock();
  const leases = new FakeLeases(clock);
  const mine = guard(leases, 'me', 'sha256:mine');
  await mine.claim({ fingerprint: 'sha256:mine', scope: ['configmaps@*'] });
  const writes = new AbortController();
  let taken: FieldManagerTaken | undefined;
  const holding = mine.hold(writes.signal, (error) => (taken = error));
  await clock.advance(100);
  assert.equal(mine.writable(), undefined, 'held and checked: writes go');
  // Cut off past its claim (0.9 × 3 s): writes wait.
  leases.cut.add('me');
  await clock.advance(3000);
  assert.ok(!mine.holds());
  let wrote = false;
  void mine.writable()?.then(() => (wrote = true), () => {});
  // Another config starts meanwhile, and renews.
  const renew = await other(leases, 0);
  leases.cut.delete('me');
  for (let t = 0; t < 3000 && !taken; t += 250) {
    await renew();
    await clock.advance(250);
  }
  assert.ok(taken instanceof FieldManagerTaken, 'stepped down');
  assert.equal(wrote, false, 'no write went after the lapse');
  writes.abort();
  await holding;
  assert.equal(leases.lease(guardLeaseName(claim('me', ''))), undefined, 'its Lease given up');
});
