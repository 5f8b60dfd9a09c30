// The election algorithm on a fake clock and an in-memory lease: acquire, renew, expiry judged
// by the standby's own clock, lost renewal (leadership ends exactly at the renew deadline and
// the round in flight is aborted), release, and renewing on after the intake stopped.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createLogger } from '../util/log.ts';
import { LeaderElector, LeadershipLost } from './leader.ts';
import { FakeClock, FakeLeases as Server } from '../lease/testing/fakes.ts';

const LEASE = 4000;
const RENEW = 2500;
const RETRY = 500;

const log = createLogger({ level: 'error', format: 'json', write: () => {} });

interface Candidate {
  readonly elector: LeaderElector;
  /** Its identity: what the server's faults are keyed by. */
  readonly identity: string;
  /** acquire()'s answer. */
  readonly acquired: Promise<boolean>;
  /** When (fake clock) it became leader. */
  leadsAt: number | undefined;
}

/** A candidate campaigning from now on, until `intake` aborts. */
function candidate(identity: string, server: Server, intake = new AbortController().signal): Candidate {
  const elector = new LeaderElector(server.as(identity), {
    namespace: 'test',
    name: 'lease',
    identity,
    leaseDurationMs: LEASE,
    renewDeadlineMs: RENEW,
    retryPeriodMs: RETRY,
    log,
  }, server.clock);
  const c: Candidate = { elector, identity, acquired: elector.acquire(intake), leadsAt: undefined };
  void c.acquired.then((leads) => {
    if (leads) c.leadsAt = server.clock.now();
  });
  return c;
}

const spec = (server: Server) => server.lease('lease')?.spec;

function setup(): { clock: FakeClock; server: Server } {
  const clock = new FakeClock();
  return { clock, server: new Server(clock) };
}

test('acquire: a free lease is taken at once and written with our identity and lease duration', async () => {
  const { clock, server } = setup();
  const { elector, acquired } = candidate('a', server);
  await clock.advance(0);
  assert.equal(await acquired, true);
  assert.equal(elector.leading, true);
  assert.equal(elector.leadership.aborted, false);
  assert.equal(spec(server)?.holderIdentity, 'a');
  assert.equal(spec(server)?.leaseDurationSeconds, 4);
  assert.equal(spec(server)?.leaseTransitions, 0);
});

test('renew: the leader renews every retry period and a standby never takes a live lease', async () => {
  const { clock, server } = setup();
  const a = candidate('a', server);
  await clock.advance(0);
  const b = candidate('b', server);
  await clock.advance(LEASE * 5);
  assert.equal(a.elector.leading, true);
  assert.equal(b.leadsAt, undefined);
  const renewals = server.writes.filter((w) => w.identity === 'a');
  assert.ok(renewals.length >= (LEASE * 5) / RETRY - 1, `${renewals.length} renewals`);
  const gaps = renewals.slice(1).map((w, i) => w.at - (renewals[i]?.at ?? 0));
  assert.ok(gaps.every((g) => g === RETRY), `renewal gaps ${gaps.join(',')}`);
});

test('expiry: a standby takes over only after a lease duration without an observed change', async () => {
  const { clock, server } = setup();
  const a = candidate('a', server);
  await clock.advance(0);
  const b = candidate('b', server);
  await clock.advance(RETRY * 3);
  // The leader is cut off: its requests never arrive, the lease stops changing.
  server.hung.add('a');
  const lastRenewal = server.writes.at(-1)?.at ?? 0;
  await clock.advance(LEASE * 3);
  assert.ok(b.leadsAt !== undefined, 'the standby took over');
  assert.ok(b.leadsAt > lastRenewal + LEASE, `took over at ${b.leadsAt}, last renewal at ${lastRenewal}`);
  // It checks every retry period (jittered by up to 1.2×): it notices within about one of them.
  assert.ok(
    b.leadsAt <= lastRenewal + LEASE + RETRY * 2.2 * 2,
    `took over at ${b.leadsAt}, last renewal at ${lastRenewal}`,
  );
  assert.equal(spec(server)?.holderIdentity, 'b');
  assert.equal(spec(server)?.leaseTransitions, 1);
  // The old leader had given up long before.
  assert.equal(a.elector.leading, false);
  assert.ok(a.elector.leadership.reason instanceof LeadershipLost);
});

test('lost renewal: leadership ends exactly at the last renewal start + renew deadline, the round in flight aborted', async () => {
  const { clock, server } = setup();
  const a = candidate('a', server);
  await clock.advance(RETRY * 2);
  const lastRenewal = server.writes.at(-1)?.at ?? 0;
  server.hung.add('a');
  let lostAt: number | undefined;
  a.elector.leadership.addEventListener('abort', () => (lostAt = clock.now()));
  await clock.advance(RENEW * 2);
  assert.equal(lostAt, lastRenewal + RENEW);
  assert.ok(lostAt < lastRenewal + LEASE, 'before any standby could take over');
  assert.ok(a.elector.leadership.reason instanceof LeadershipLost);
  assert.match((a.elector.leadership.reason as Error).message, /renew deadline/);
  assert.equal(a.elector.leading, false);
  assert.ok((server.aborted.get('a') ?? 0) >= 1, 'the hung renewal round was aborted');
  // No more rounds after leadership ended.
  const aborted = server.aborted.get('a') ?? 0;
  await clock.advance(LEASE * 2);
  assert.equal(server.aborted.get('a') ?? 0, aborted);
});

test('lost renewal: a renewal that answers only after the deadline does not extend leadership', async () => {
  const { clock, server } = setup();
  const a = candidate('a', server);
  await clock.advance(RETRY);
  // Each round alone is shorter than the renew deadline, but the rounds never succeed: the
  // deadline counts from the last success, not from each round.
  server.hung.add('a');
  const lastRenewal = server.writes.at(-1)?.at ?? 0;
  await clock.advance(RENEW - 1);
  assert.equal(a.elector.leading, true);
  await clock.advance(1);
  assert.equal(a.elector.leading, false);
  assert.equal(clock.now(), lastRenewal + RENEW);
});

test('lost renewal: a leader that sees another holder gives up at once', async () => {
  const { clock, server } = setup();
  const a = candidate('a', server);
  await clock.advance(0);
  // Someone took the lease over (e.g. an admin edited it).
  const lease = server.lease('lease');
  assert.ok(lease);
  await server.as('intruder').update({ ...lease, spec: { ...lease.spec, holderIdentity: 'intruder' } });
  await clock.advance(RETRY);
  assert.equal(a.elector.leading, false);
  assert.match((a.elector.leadership.reason as Error).message, /held by intruder/);
});

test('release: the lease is given up at once and a standby takes over at its next retry', async () => {
  const { clock, server } = setup();
  const a = candidate('a', server);
  await clock.advance(0);
  const b = candidate('b', server);
  await clock.advance(RETRY * 2);
  const releasing = a.elector.release();
  await clock.advance(0);
  await releasing;
  const releasedAt = clock.now();
  assert.equal(a.elector.leading, false);
  assert.equal(a.elector.leadership.aborted, true);
  assert.ok(!(a.elector.leadership.reason instanceof LeadershipLost), 'a release is no loss');
  assert.equal(spec(server)?.holderIdentity, null);
  const writesByA = server.writes.filter((w) => w.identity === 'a').length;
  await clock.advance(RETRY * 2.2 + 1);
  assert.ok(
    b.leadsAt !== undefined && b.leadsAt - releasedAt <= RETRY * 2.2,
    `standby took over ${b.leadsAt === undefined ? 'never' : b.leadsAt - releasedAt} ms after the release`,
  );
  assert.equal(server.writes.filter((w) => w.identity === 'a').length, writesByA, 'no renewal after the release');
});

test('a leader keeps renewing after the intake stopped (draining), until release', async () => {
  const { clock, server } = setup();
  const intake = new AbortController();
  const a = candidate('a', server, intake.signal);
  await clock.advance(0);
  intake.abort();
  await clock.advance(LEASE * 3);
  assert.equal(a.elector.leading, true);
  assert.ok(server.writes.filter((w) => w.identity === 'a').length > (LEASE * 3) / RETRY - 2);
});

test('a standby stops waiting when its intake stops', async () => {
  const { clock, server } = setup();
  candidate('a', server);
  await clock.advance(0);
  const intake = new AbortController();
  const b = candidate('b', server, intake.signal);
  await clock.advance(RETRY * 3);
  intake.abort();
  await clock.advance(0);
  assert.equal(await b.acquired, false);
});
