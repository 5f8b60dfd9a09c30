// One config per field manager, against the real API server. An instance as the chart runs it
// (its own ServiceAccount, leader election in its release namespace) holds the field manager; an
// admin's `--once` from a laptop (context namespace `default`) with another config under that
// field manager refuses to write, naming the holder and the ways out; with the same config it
// runs. A second continuous instance of another config refuses too. A dead holder's Lease
// expires and blocks nobody.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { figure } from '../harness/figures.ts';
import {
  auditSkip,
  auditTail,
  create,
  createNamespace,
  eventually,
  labelsOf,
  serviceAccountKubeconfig,
  skip,
} from './cluster.ts';
import { Labeller, runLabeller } from '../harness/labeller.ts';
import { sleep } from '../harness/sleep.ts';

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
        '--lease-duration',
        '3s',
        '--renew-deadline',
        '2s',
        '--retry-period',
        '500ms',
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
});
