import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FakeClock, FakeLeases, settle } from '../lease/testing/fakes.ts';
import { createLogger } from '../util/log.ts';
import { type MemberConfig, memberLeaseName, Membership, type MembershipOptions } from './membership.ts';
import type { LeaseStore } from '../lease/holder.ts';
import type { Lease } from '../kube/lease.ts';
import { BUCKETS } from './ranges.ts';

const log = createLogger({ level: 'error', format: 'json', write: () => {} });

/** A member of group g on `leases`, over `store` (its own connection by default), as `options` say otherwise. */
function member(
  leases: FakeLeases,
  clock: FakeClock,
  identity: string,
  { store = leases.as(identity), ...options }: Partial<MembershipOptions> & { readonly store?: LeaseStore } = {},
): { membership: Membership; stop: () => Promise<void> } {
  const membership = new Membership(store, {
    group: 'g',
    namespace: 'ns',
    identity,
    leaseDurationMs: 4000,
    retryPeriodMs: 1000,
    synced: () => true,
    layoutPeriodMs: 10_000,
    log,
    clock,
    ...options,
  });
  const abort = new AbortController();
  const running = membership.run(abort.signal);
  return {
    membership,
    stop: async () => {
      abort.abort();
      await running;
    },
  };
}

/** Namespaces named as clusters name them, which FNV-1a crowds into a few equal buckets. */
const tenants = (count: number) => Array.from({ length: count }, (_, i) => `tenant-${i}`);

/**
 * Moves the clock on in small steps, checking after each that no namespace of `namespaces` has two
 * writers (each member's buckets read through its own layout) and, while the members agree on the
 * layout, no bucket either.
 */
async function run(
  clock: FakeClock,
  ms: number,
  members: readonly Membership[],
  namespaces: readonly string[] = tenants(500),
): Promise<void> {
  for (let t = 0; t < ms; t += 100) {
    await clock.advance(100);
    for (const namespace of namespaces) {
      const writers = members.filter((m) => m.state.writes.has(m.layout.bucketOf(namespace))).length;
      assert.ok(writers <= 1, `namespace ${namespace} has ${writers} writers`);
    }
    if (new Set(members.map((m) => m.layout.id)).size > 1) continue;
    const seen = new Map<number, number>();
    for (const m of members) for (const bucket of m.state.writes) seen.set(bucket, (seen.get(bucket) ?? 0) + 1);
    for (const [bucket, writers] of seen) assert.equal(writers, 1, `bucket ${bucket} has ${writers} writers`);
  }
}

/** How many of `namespaces` each member writes. */
const shares = (members: readonly Membership[], namespaces: readonly string[]) =>
  members.map((m) => namespaces.filter((namespace) => m.state.writes.has(m.layout.bucketOf(namespace))).length);

const written = (members: readonly Membership[]) => members.reduce((n, m) => n + m.state.writes.size, 0);

test('members split the buckets between them, one writer per bucket at every step; a member that leaves gives its buckets to the rest', async () => {
  const clock = new FakeClock();
  const leases = new FakeLeases(clock);
  const a = member(leases, clock, 'a');
  await run(clock, 5000, [a.membership]);
  assert.equal(a.membership.state.writes.size, BUCKETS, 'alone, a writes everything');

  const b = member(leases, clock, 'b');
  const c = member(leases, clock, 'c');
  const all = [a.membership, b.membership, c.membership];
  await run(clock, 8000, all);
  assert.equal(written(all), BUCKETS, 'every bucket written once');
  for (const m of all) assert.ok(m.state.writes.size > BUCKETS / 5, `${m.state.writes.size}`);
  assert.deepEqual(a.membership.state.members.map((m) => m.identity).sort(), ['a', 'b', 'c']);

  await b.stop();
  assert.equal(leases.size, 2, "b's Lease is deleted as it leaves");
  const rest = [a.membership, c.membership];
  await run(clock, 3000, rest);
  assert.equal(written(rest), BUCKETS, "b's buckets are taken within a few rounds");
  await a.stop();
  await c.stop();
  await settle();
  assert.equal(leases.size, 0);
});

test('a member whose caches are still listing takes nothing; the writer keeps its buckets until then', async () => {
  const clock = new FakeClock();
  const leases = new FakeLeases(clock);
  const a = member(leases, clock, 'a');
  await run(clock, 5000, [a.membership]);
  let listed = false;
  const { membership: b, stop } = member(leases, clock, 'b', { synced: () => listed });
  await run(clock, 5000, [a.membership, b]);
  assert.equal(a.membership.state.writes.size, BUCKETS, 'nothing is given to a member that cannot write it yet');
  assert.equal(b.state.writes.size, 0);
  assert.ok(b.state.keeps.size > 0, 'b lists what it will write');
  listed = true;
  await run(clock, 4000, [a.membership, b]);
  assert.equal(written([a.membership, b]), BUCKETS);
  assert.ok(b.state.writes.size > 0);
  await stop();
  await a.stop();
});

test('the oldest member lays the buckets out over the namespaces; the others follow, and a new layout never gives a namespace two writers', async () => {
  const clock = new FakeClock();
  const leases = new FakeLeases(clock);
  let namespaces = tenants(600);
  const a = member(leases, clock, 'a', { namespaces: () => Promise.resolve(namespaces) });
  await run(clock, 5000, [a.membership], namespaces);
  assert.notEqual(a.membership.layout.id, 'uniform', 'crowded names: laid out anew before it writes');
  const b = member(leases, clock, 'b', { namespaces: () => Promise.resolve(namespaces) });
  const c = member(leases, clock, 'c', { namespaces: () => Promise.resolve(namespaces) });
  const all = [a.membership, b.membership, c.membership];
  await run(clock, 8000, all, namespaces);
  assert.deepEqual(new Set(all.map((m) => m.layout.id)), new Set([a.membership.layout.id]), "a's layout, the oldest's");
  assert.equal(shares(all, namespaces).reduce((x, y) => x + y), namespaces.length, 'every namespace written once');
  for (const share of shares(all, namespaces)) {
    assert.ok(share > namespaces.length / 5, `shares ${shares(all, namespaces)}`);
  }

  // Namespaces outgrow the layout: at its next check a lays them out again, and all follow.
  const first = a.membership.layout.id;
  namespaces = [...namespaces, ...Array.from({ length: 2000 }, (_, i) => `zz-${i}`)];
  await run(clock, 20_000, all, namespaces);
  assert.notEqual(a.membership.layout.id, first);
  assert.deepEqual(new Set(all.map((m) => m.layout.id)), new Set([a.membership.layout.id]));
  assert.equal(shares(all, namespaces).reduce((x, y) => x + y), namespaces.length);

  // a leaves: b, now the oldest, keeps the layout (it fits), and b and c take a's buckets.
  const layout = a.membership.layout.id;
  await a.stop();
  await run(clock, 15_000, [b.membership, c.membership], namespaces);
  assert.equal(b.membership.layout.id, layout);
  assert.equal(shares([b.membership, c.membership], namespaces).reduce((x, y) => x + y), namespaces.length);
  await b.stop();
  await c.stop();
});

test('a member that stops renewing: the others list its buckets once it is late, write them once its Lease expires, never before', async () => {
  const clock = new FakeClock();
  const leases = new FakeLeases(clock);
  const [a, b, c] = ['a', 'b', 'c'].map((identity) => member(leases, clock, identity)) as [
    ReturnType<typeof member>,
    ReturnType<typeof member>,
    ReturnType<typeof member>,
  ];
  const all = [a.membership, b.membership, c.membership];
  await run(clock, 8000, all);
  const theirs = new Set(c.membership.state.writes);
  assert.ok(theirs.size > 0);
  const keptByOthers = () =>
    [...theirs].every((bucket) => a.membership.state.keeps.has(bucket) || b.membership.state.keeps.has(bucket));
  const writtenByOthers = () =>
    [...theirs].filter((bucket) => a.membership.state.writes.has(bucket) || b.membership.state.writes.has(bucket))
      .length;

  leases.cut.add('c');
  // Late 2.5 rounds after it was last seen renewed (lease 4 s, round 1 s): its buckets listed ahead,
  // none written; at its expiry a round later, taken at once, the caches holding them already.
  let listedAhead = false;
  for (let t = 0; t < 6000 && writtenByOthers() < theirs.size; t += 100) {
    await run(clock, 100, all);
    if (writtenByOthers() === 0 && keptByOthers()) listedAhead = true;
    if (writtenByOthers() > 0) assert.equal(writtenByOthers(), theirs.size, 'taken all at once');
  }
  assert.ok(listedAhead, "c's buckets kept by the others before its Lease expired, while not written");
  assert.equal(writtenByOthers(), theirs.size, "c's buckets written by the others once its Lease expired");
  assert.equal(c.membership.state.writes.size, 0, 'c gave every bucket up when its own Lease lapsed');

  // Back: it joins as a new member, and takes a share again once listed.
  leases.cut.delete('c');
  await run(clock, 8000, all);
  assert.equal(written(all), BUCKETS);
  assert.ok(c.membership.state.writes.size > 0);
  for (const m of [a, b, c]) await m.stop();
});

test('a write held across a handover: the member renews its Lease all along, and nobody takes the bucket before the write is done', async () => {
  const clock = new FakeClock();
  const leases = new FakeLeases(clock);
  const a = member(leases, clock, 'a');
  await run(clock, 5000, [a.membership]);
  const bucket = 0;
  const release = a.membership.hold(bucket);
  assert.ok(release, 'a writes every bucket alone');
  const b = member(leases, clock, 'b');
  const aLease = memberLeaseName('g', 'a');
  const renewalsBefore = leases.writes.filter((w) => w.name === aLease).length;
  let bTookItEarly = false;
  for (let t = 0; t < 20_000; t += 100) {
    await run(clock, 100, [a.membership, b.membership]);
    if (b.membership.state.writes.has(bucket)) bTookItEarly = true;
  }
  const renewals = leases.writes.filter((w) => w.name === aLease).length - renewalsBefore;
  assert.ok(renewals >= 19, `a renewed its Lease ${renewals} times in 20 s while its write was held`);
  assert.ok(b.membership.state.writes.size > 0, 'b took its share meanwhile');
  assert.ok(!bTookItEarly, 'b never wrote the bucket while the write was held');
  assert.ok(a.membership.writing(bucket) === a.membership.state.writes.has(bucket));
  release();
  await run(clock, 3000, [a.membership, b.membership]);
  assert.equal(written([a.membership, b.membership]), BUCKETS, 'given up once done, and taken');
  await a.stop();
  await b.stop();
});

test('a member that leaves just after a write was aborted on its way leaves its Lease to expire: nobody takes the bucket before', async () => {
  const clock = new FakeClock();
  const leases = new FakeLeases(clock);
  const a = member(leases, clock, 'a');
  const b = member(leases, clock, 'b');
  await run(clock, 8000, [a.membership, b.membership]);
  const bucket = [...a.membership.state.writes][0];
  assert.ok(bucket !== undefined);
  const release = a.membership.hold(bucket);
  assert.ok(release);
  // The write's signal aborted it after its bytes left (a SIGTERM stopping a policy resync, say).
  release(true);
  await a.stop();
  assert.equal(leases.size, 2, "a's Lease is kept, not deleted");
  let takenAt: number | undefined;
  for (let t = 0; t < 10_000 && takenAt === undefined; t += 100) {
    await run(clock, 100, [b.membership]);
    if (b.membership.state.writes.has(bucket)) takenAt = t;
  }
  assert.ok(takenAt !== undefined, "b took a's bucket once a's Lease expired");
  assert.ok(
    takenAt >= 4000 - 1000,
    `b waited a lease duration, less the time since a's last renewal: took it at ${takenAt} ms`,
  );

  // A clean leave (nothing aborted within a lease duration) deletes the Lease, as ever.
  const c = member(leases, clock, 'c');
  await run(clock, 8000, [b.membership, c.membership]);
  const cBucket = [...c.membership.state.writes][0];
  assert.ok(cBucket !== undefined);
  c.membership.hold(cBucket)?.();
  await c.stop();
  assert.equal(leases.size, 1, "c's Lease is deleted as it leaves");
  await b.stop();
});

test("a stopped member's writes may not be sent once its claim ends, before any other member takes its buckets", async () => {
  const clock = new FakeClock();
  const leases = new FakeLeases(clock);
  const a = member(leases, clock, 'a');
  const b = member(leases, clock, 'b');
  await run(clock, 8000, [a.membership, b.membership]);
  const bucket = [...a.membership.state.writes][0];
  assert.ok(bucket !== undefined);
  const release = a.membership.hold(bucket);
  assert.ok(release);
  const claim = a.membership.claim;
  // Stopped (SIGSTOP): its requests never answer.
  leases.hung.add('a');
  let taken = false;
  for (let t = 0; t < 10_000 && !taken; t += 100) {
    await run(clock, 100, [a.membership, b.membership]);
    taken = b.membership.state.writes.has(bucket);
    assert.ok(!(taken && a.membership.writing(bucket)), 'a may send while b writes the bucket');
    if (taken) assert.ok(claim.aborted, "a's writes on the wire were aborted before");
  }
  assert.ok(taken, "b took a's bucket once a's Lease expired");
  release();
  leases.hung.delete('a');
  await a.stop();
  await b.stop();
});

test("a member whose clock differs from the others' by more than two lease durations is neither deleted nor robbed while it renews", async () => {
  const clock = new FakeClock();
  const leases = new FakeLeases(clock);
  const a = member(leases, clock, 'a');
  // b's wall clock runs 9 s behind (or a's ahead): its renewTime looks more than twice its 4 s lease old.
  const store = leases.as('b');
  const skewed = (lease: Lease): Lease => ({
    ...lease,
    spec: { ...lease.spec, renewTime: new Date(Date.parse(lease.spec.renewTime ?? '') - 9000).toISOString() },
  });
  const { membership: b, stop: stopB } = member(leases, clock, 'b', {
    store: {
      ...store,
      create: (lease, signal) => store.create(skewed(lease), signal),
      update: (lease, signal) => store.update(skewed(lease), signal),
    },
  });
  await run(clock, 6000, [a.membership, b]);
  const c = member(leases, clock, 'c');
  await run(clock, 10_000, [a.membership, b, c.membership]);
  assert.ok(leases.lease(memberLeaseName('g', 'b')), "b's Lease is still there");
  assert.ok(b.state.writes.size > 0, 'b kept a share');
  assert.equal(written([a.membership, b, c.membership]), BUCKETS);
  await stopB();
  await a.stop();
  await c.stop();
});

test("a member that reads the others' Leases long after it asked (paused, starved) judges them as of the asking: one renewed meanwhile is not judged gone", async () => {
  const clock = new FakeClock();
  const leases = new FakeLeases(clock);
  // b renews every 3 s, so two of a's looks in a row may find its Lease at one version.
  const { membership: b, stop: stopB } = member(leases, clock, 'b', { retryPeriodMs: 3000 });
  // Once told, a's next list that finds b's Lease as the one before did is answered at once but
  // read 10 s later: as a process stopped in between reads it.
  const store = leases.as('a');
  const said: string[] = [];
  let pauseNext = false;
  let before: string | undefined;
  const versionOfB = (answer: readonly Lease[]) =>
    answer.find((lease) => lease.metadata.name === memberLeaseName('g', 'b'))?.metadata.resourceVersion;
  const { membership: a, stop: stopA } = member(leases, clock, 'a', {
    store: {
      ...store,
      list: async (namespace, selector, signal) => {
        const answer = await store.list(namespace, selector, signal);
        const version = versionOfB(answer);
        if (pauseNext && version === before) {
          pauseNext = false;
          await clock.sleep(10_000);
        }
        before = version;
        return answer;
      },
    },
    log: createLogger({ level: 'info', format: 'json', write: (line) => said.push(line) }),
  });
  await run(clock, 8000, [a, b]);
  assert.ok(a.state.writes.size > 0 && b.state.writes.size > 0, 'both write a share');
  pauseNext = true;
  await run(clock, 15_000, [a, b]);
  assert.equal(pauseNext, false, 'the pause happened');
  assert.ok(leases.lease(memberLeaseName('g', 'b')), "b's Lease is still there");
  assert.deepEqual(said.filter((line) => line.includes('member gone')), [], 'b was never judged gone');
  assert.equal(written([a, b]), BUCKETS);
  await Promise.all([stopA(), stopB()]);
});

test('a write refused while the claim had run out is told its bucket taken once the claim is renewed, whether or not the lapse ran first', async () => {
  const clock = new FakeClock();
  const leases = new FakeLeases(clock);
  // The clock a's holder reads runs ahead of its timers by `late`: as an event loop that, back
  // from a SIGSTOP or a long task, reads a watch event before the timer of the claim's lapse runs.
  let late = 0;
  const { membership: a, stop } = member(leases, clock, 'a', {
    clock: { now: () => clock.now() + late, sleep: (ms, signal) => clock.sleep(ms, signal) },
  });
  await run(clock, 5000, [a]);
  const taken: number[][] = [];
  a.subscribe((change) => taken.push([...change.taken]));
  late = 10_000;
  assert.equal(a.hold(7), undefined, 'refused: the claim ran out');
  assert.ok(a.state.writes.has(7), 'its lapse not told yet: the bucket is still written');
  // The renewal (in flight, or the next) is answered before the lapse's timer runs.
  await clock.advance(1000);
  assert.ok(a.writing(7), 'renewed, with no lapse between');
  assert.deepEqual(taken, [[7]], 'the bucket refused is told taken');
  await stop();
});

test('a member on another config: within the skew allowed it writes its share; past it, the members on the newest config write every bucket, and every member says so', async () => {
  const clock = new FakeClock();
  const leases = new FakeLeases(clock);
  const configs = new Map<string, MemberConfig>();
  const splits: string[] = [];
  const join = (identity: string, config: MemberConfig) => {
    configs.set(identity, config);
    return member(leases, clock, identity, {
      config: () => configs.get(identity) ?? config,
      configSkewMs: 10_000,
      split: (note) => splits.push(`${identity}: ${note}`),
    });
  };
  const newest = { generation: 7, fingerprint: 'sha256:new' };
  const a = join('a', newest);
  const b = join('b', newest);
  await run(clock, 8000, [a.membership, b.membership]);
  // A third member of an older config joins (a pod stuck on an old ConfigMap).
  const c = join('c', { generation: 6, fingerprint: 'sha256:old' });
  const all = [a.membership, b.membership, c.membership];
  await run(clock, 8000, all);
  assert.ok(c.membership.state.writes.size > 0, 'within the skew allowed it writes its share');
  assert.equal(splits.length, 0, 'nothing to report yet');
  await run(clock, 6000, all);
  assert.equal(c.membership.state.writes.size, 0, 'past it, it gives every bucket up');
  assert.equal(written([a.membership, b.membership]), BUCKETS, 'the members on the newest config write them all');
  assert.deepEqual(splits.map((s) => s.slice(0, 2)).sort(), ['a:', 'b:', 'c:'], 'every member reports it once');
  assert.match(splits[0] ?? '', /members c \(config 6\/sha256:old\) .* newest \(7\/sha256:new\)/);
  for (const m of all) assert.equal(m.staleConfigs, 1);
  assert.match(a.membership.notes()[0] ?? '', /^shard group: members c/);
  // It loads the newest config: it joins again and takes a share.
  configs.set('c', newest);
  await run(clock, 8000, all);
  assert.ok(c.membership.state.writes.size > 0);
  assert.equal(written(all), BUCKETS);
  for (const m of all) assert.deepEqual(m.notes(), []);
  for (const { stop } of [a, b, c]) await stop();
});
