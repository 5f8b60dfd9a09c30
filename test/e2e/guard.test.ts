// One config per field manager, against the real API server. An instance as the chart runs it
// (its own ServiceAccount, leader election in its release namespace) holds the field manager; an
// admin's `--once` from a laptop (context namespace `default`) with another config under that
// field manager refuses to write, naming the holder and the ways out; with the same config it
// runs. A second continuous instance of another config refuses too. A dead holder's Lease
// expires and blocks nobody.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { assertCleanExit } from '../process/crash.ts';
import { figure } from '../process/figures.ts';
import {
  adminClient,
  auditSkip,
  auditTail,
  configFile,
  create,
  createNamespace,
  eventually,
  labelsOf,
  serviceAccountKubeconfig,
  skip,
} from './cluster.ts';
import { Labeller, runLabeller } from '../process/labeller.ts';
import { sleep } from '../process/sleep.ts';

/** Leases short enough for a test to see them expire: 3 s, renewed within 2 s, retried every 0.5 s. */
const SHORT_LEASE = ['--lease-duration', '3s', '--renew-deadline', '2s', '--retry-period', '500ms'];

describe('field-manager guard', { skip }, () => {
  test(
    'a laptop --once and a second instance with another config refuse to write under a held field manager; the same config runs; a dead holder blocks nobody',
    { skip: auditSkip, timeout: 180_000 },
    async (t) => {
      const release = await createNamespace('guard-release');
      const target = await createNamespace('guard-target');
      await create(`/api/v1/namespaces/${target}/configmaps`, { metadata: { name: 'app' } });
      const fieldManager = `rel-${randomBytes(3).toString('hex')}`;
      const kubeconfig = await serviceAccountKubeconfig(release, 'labeller', [
        { apiGroups: [''], resources: ['configmaps'], verbs: ['list', 'watch', 'patch'] },
        {
          apiGroups: ['coordination.k8s.io'],
          resources: ['leases'],
          verbs: ['create', 'list', 'get', 'update', 'delete'],
        },
      ]);
      const writes = auditTail((e) =>
        e.verb === 'patch' && e.objectRef?.namespace === target && (e.userAgent ?? '').startsWith('labeller/')
      );
      const instanceUser = `system:serviceaccount:${release}:labeller`;
      const config = (
        team: string,
      ) => ['--kinds', 'configmaps', '--namespace', target, '--label', `team=${team}`, '--field-manager', fieldManager];

      const instance = new Labeller([
        ...config('platform'),
        '--leader-elect',
        '--leader-election-namespace',
        release,
        ...SHORT_LEASE,
      ], { kubeconfig });
      try {
        await eventually(
          async () => (await labelsOf(`/api/v1/namespaces/${target}/configmaps/app`))['team'] === 'platform',
          'the instance to label',
        );
        writes();

        // The laptop, another config: refused before any write.
        const started = Date.now();
        const refused = await runLabeller([...config('laptop'), '--once']);
        const refusedInMs = Date.now() - started;
        assert.equal(refused.code, 2, refused.stderr);
        t.diagnostic(refused.fatal ?? '');
        assert.match(
          refused.fatal ?? '',
          new RegExp(`field manager "${fieldManager}" is held by another labeller with a different config`),
        );
        assert.match(
          refused.fatal ?? '',
          new RegExp(`Lease ${release}/labeller-field-manager, leader election ${release}/labeller`),
        );
        assert.match(refused.fatal ?? '', /also writes configmaps@/);
        assert.match(refused.fatal ?? '', /--field-manager/);
        assert.match(refused.fatal ?? '', /--ignore-field-manager-guard/);
        assert.doesNotMatch(refused.stderr, /^\s+at /m, 'no stack trace');
        const laptopPatches = writes().filter((e) => e.user?.username !== instanceUser);
        assert.equal(laptopPatches.length, 0, 'the refused once-run sent no PATCH');
        assert.equal((await labelsOf(`/api/v1/namespaces/${target}/configmaps/app`))['team'], 'platform');

        // The laptop, the same config: allowed (and nothing to change).
        const same = await runLabeller([...config('platform'), '--once']);
        assert.equal(same.code, 0, same.stderr);
        assert.match(same.stdout + same.stderr, /unchanged 1/);

        // Told otherwise: it writes, and says what that costs.
        const ignored = await runLabeller([...config('laptop'), '--once', '--ignore-field-manager-guard']);
        assert.equal(ignored.code, 0, ignored.stderr);
        assert.match(ignored.stderr, /writing anyway \(--ignore-field-manager-guard\)/);

        // A second continuous instance of another config refuses; of the same config, it runs.
        const second = await runLabeller(config('other'));
        assert.equal(second.code, 2, second.stderr);
        assert.match(second.fatal ?? '', /is held by another labeller with a different config/);
        const replica = new Labeller(config('platform'));
        await replica.waitForLog((l) => l.msg === 'initial list complete');
        assert.equal((await replica.stop()).code, 0);
        figure(
          t,
          `field-manager guard: a --once with another config exited 2 after ${refusedInMs} ms (process start included), ${laptopPatches.length} PATCHes from it; a second instance with another config exited 2; the same config (--once and a second instance) ran`,
        );

        // The holder dies without releasing: once its Lease has expired (3 s), it blocks nobody.
        instance.process.kill('SIGKILL');
        await instance.exited;
        await sleep(3500);
        const after = await runLabeller([...config('laptop'), '--once']);
        assert.equal(after.code, 0, after.stderr);
        assert.equal((await labelsOf(`/api/v1/namespaces/${target}/configmaps/app`))['team'], 'laptop');
      } finally {
        instance.kill();
      }
    },
  );

  test(
    'the claim follows a live reload both ways; a reload overlapping another holder is rejected naming it; only the leader renews, without conflicts, and leaves the Lease when it stops',
    { skip: auditSkip, timeout: 180_000 },
    async (t) => {
      const release = await createNamespace('guard-reload');
      const [a, b] = [await createNamespace('guard-a'), await createNamespace('guard-b')];
      for (const ns of [a, b]) await create(`/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'app' } });
      const fieldManager = `rel-${randomBytes(3).toString('hex')}`;
      const kubeconfig = await serviceAccountKubeconfig(release, 'labeller', [
        { apiGroups: [''], resources: ['configmaps'], verbs: ['list', 'watch', 'patch'] },
        { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
        {
          apiGroups: ['coordination.k8s.io'],
          resources: ['leases'],
          verbs: ['create', 'list', 'get', 'update', 'delete'],
        },
      ]);
      const yaml = (team: string, namespaces: string[]) =>
        `kinds:\n  - resource: configmaps\n    namespaces: [${namespaces.join(', ')}]\n    labels: { team: ${team} }\n`;
      const file = configFile(yaml('one', [a]));
      const guardLease = `${fieldManager}-lease-field-manager`;
      const leaseWrites = auditTail((e) =>
        e.objectRef?.resource === 'leases' && e.objectRef.namespace === release && e.objectRef.name === guardLease
      );
      const replica = () =>
        new Labeller([
          '--config',
          file,
          '--field-manager',
          fieldManager,
          '--leader-elect',
          '--leader-election-namespace',
          release,
          '--leader-election-id',
          `${fieldManager}-lease`,
          ...SHORT_LEASE,
        ], { kubeconfig });
      const replicas = [replica(), replica()];
      const laptop = (config: string) =>
        runLabeller(['--config', configFile(config), '--field-manager', fieldManager, '--once']);
      try {
        const leader = await Promise.any(
          replicas.map(async (r) => (await r.waitForLog((l) => l.msg === 'became leader', 30_000), r)),
        );
        await eventually(
          async () => (await labelsOf(`/api/v1/namespaces/${a}/configmaps/app`))['team'] === 'one',
          'c1',
        );
        // Two replicas, one writer: only the leader renews the guard Lease, every third of 3 s.
        leaseWrites();
        await sleep(6000);
        const renewals = leaseWrites().filter((e) => e.verb === 'update' || e.verb === 'create');
        assert.ok(renewals.length >= 3 && renewals.length <= 9, `${renewals.length} writes in 6 s`);
        assert.deepEqual(renewals.filter((e) => e.responseStatus?.code !== 200), [], 'no write lost a race');

        // Reloaded to C2: the Lease says C2 at once. A once-run of C2 passes; of C1, the old config, it is refused.
        const from = leader.logs.length;
        writeFileSync(file, yaml('two', [a]));
        await leader.waitForLog((l) => l.msg === 'config reloaded', 30_000, from);
        await eventually(
          async () => (await labelsOf(`/api/v1/namespaces/${a}/configmaps/app`))['team'] === 'two',
          'c2',
        );
        const now = await laptop(yaml('two', [a]));
        assert.equal(now.code, 0, now.stderr);
        const old = await laptop(yaml('one', [a]));
        assert.equal(old.code, 2, old.stderr);
        assert.match(old.fatal ?? '', /is held by another labeller with a different config/);

        // Another holder in namespace b; a reload of the group that reaches into b is rejected, naming it.
        const other = new Labeller([
          '--config',
          configFile(yaml('other', [b])),
          '--field-manager',
          fieldManager,
        ], { kubeconfig });
        try {
          await eventually(
            async () => (await labelsOf(`/api/v1/namespaces/${b}/configmaps/app`))['team'] === 'other',
            'the other holder labels b',
          );
          const before = leader.logs.length;
          writeFileSync(file, yaml('three', [a, b]));
          const rejected = await leader.waitForLog((l) => l.msg.startsWith('config change rejected'), 30_000, before);
          assert.match(
            String(rejected['error']),
            /field manager ".*" is held by another labeller with a different config: /,
          );
          assert.match(String(rejected['error']), /also writes configmaps@/);
          assert.equal((await labelsOf(`/api/v1/namespaces/${a}/configmaps/app`))['team'], 'two', 'C2 stays in force');
          assert.equal((await labelsOf(`/api/v1/namespaces/${b}/configmaps/app`))['team'], 'other');
        } finally {
          assert.equal((await other.stop()).code, 0);
        }

        // The leader stops (a rolling update): the group's Lease stays for its successor, so no other config slips in.
        writeFileSync(file, yaml('two', [a]));
        leaseWrites();
        assert.equal((await leader.stop()).code, 0);
        const meanwhile = await laptop(yaml('laptop', [a]));
        assert.equal(meanwhile.code, 2, 'the successor holds the field manager');
        for (const r of replicas) if (r.running) assert.equal((await r.stop()).code, 0);
        assert.deepEqual(leaseWrites().filter((e) => e.verb === 'delete'), [], 'not deleted');
        figure(t, `guard: 2 replicas, ${renewals.length} guard Lease writes in 6 s, none lost a race`);
      } finally {
        for (const r of replicas) r.kill();
      }
    },
  );

  test(
    'a holder starved of CPU past its lease steps down when it resumes, before it writes again: the config that started meanwhile keeps the field manager',
    { timeout: 120_000 },
    async (t) => {
      const target = await createNamespace('guard-starved');
      await create(`/api/v1/namespaces/${target}/configmaps`, { metadata: { name: 'app' } });
      const fieldManager = `starved-${randomBytes(3).toString('hex')}`;
      const config = (team: string) => [
        '--kinds',
        'configmaps',
        '--namespace',
        target,
        '--label',
        `team=${team}`,
        '--field-manager',
        fieldManager,
        ...SHORT_LEASE,
      ];
      const team = async () => (await labelsOf(`/api/v1/namespaces/${target}/configmaps/app`))['team'];
      const starved = new Labeller(config('a'));
      let successor: Labeller | undefined;
      try {
        await eventually(async () => (await team()) === 'a', 'the first holder to label');
        // Starved: stopped for longer than its lease; meanwhile another config starts, sees the
        // lapsed Lease as expired, and takes over.
        process.kill(starved.pid, 'SIGSTOP');
        await sleep(4000);
        successor = new Labeller(config('b'));
        await eventually(async () => (await team()) === 'b', 'the successor to label');
        const resumedAt = Date.now();
        process.kill(starved.pid, 'SIGCONT');
        // It must find out it lost the claim before it writes again: the label never flips back.
        let flipped = false;
        while (starved.running && Date.now() - resumedAt < 20_000) {
          if ((await team()) !== 'b') flipped = true;
          await sleep(100);
        }
        const exit = await starved.exited;
        figure(
          t,
          `guard: a holder starved for 4 s (lease 3 s) stepped down ${
            Date.now() - resumedAt
          } ms after it resumed, with status ${exit.code}`,
        );
        assert.equal(flipped, false, 'the resumed holder wrote nothing');
        assert.equal(exit.code, 2, exit.stderr);
        assert.match(exit.fatal ?? '', /is held by another labeller with a different config/);
        assert.ok(starved.logs.some((l) => /its Lease lapsed; checking/.test(l.msg)));
        await sleep(2000);
        assert.equal(await team(), 'b');
        assert.ok(successor.running, 'the successor runs on');
      } finally {
        try {
          process.kill(starved.pid, 'SIGCONT');
        } catch { /* gone */ }
        starved.kill();
        if (successor) assertCleanExit(await successor.stop());
      }
    },
  );

  test(
    'a standalone holder that crashed leaves no Lease behind for long: a running holder deletes it once it has seen it unchanged for its lease duration',
    {
      timeout: 120_000,
    },
    async () => {
      const target = await createNamespace('guard-crashed');
      await create(`/api/v1/namespaces/${target}/configmaps`, { metadata: { name: 'app' } });
      const fieldManager = `crashed-${randomBytes(3).toString('hex')}`;
      const args = [
        '--kinds',
        'configmaps',
        '--namespace',
        target,
        '--label',
        'team=a',
        '--field-manager',
        fieldManager,
      ];
      const leases = async () => {
        const client = await adminClient();
        const list = await client.json<{ items: { metadata: { name: string } }[] }>(
          'GET',
          '/apis/coordination.k8s.io/v1/namespaces/default/leases',
          { query: { labelSelector: `labeller/field-manager=${fieldManager}` } },
        );
        return list.items.map((l) => l.metadata.name);
      };
      const crashed = new Labeller([
        ...args,
        ...SHORT_LEASE,
      ]);
      await eventually(async () => (await leases()).length === 1, 'its guard Lease');
      const [left] = await leases();
      crashed.process.kill('SIGKILL');
      await crashed.exited;
      // Judged by the next holder's own clock: unchanged for 3 s from its first look, then deleted.
      const next = new Labeller([...args, ...SHORT_LEASE]);
      try {
        await eventually(async () => !(await leases()).includes(left!), `${left} deleted`, 15_000);
      } finally {
        assertCleanExit(await next.stop());
      }
    },
  );
});
