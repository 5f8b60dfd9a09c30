// `labeller prune` against the real API server: after a run over three kinds (two built-in, a
// CRD), labeller's field manager owns no label anywhere, labels another manager co-owns stay,
// and the requests are one LIST per kind and one PATCH per object labeller had labelled.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  adminClient,
  auditEvents,
  auditSkip,
  create,
  createCrd,
  createNamespace,
  labelsOf,
  patchLabels,
  skip,
} from './cluster.ts';
import { figure } from '../process/figures.ts';
import type { PartialObjectMetadata } from '../../src/apimachinery/objects.ts';
import { ownedKeys } from '../../src/labelling/object.ts';
import { Labeller } from '../process/labeller.ts';

/** The label keys `manager` owns on the object at `path`, read from its managedFields. */
async function ownedBy(path: string, manager = 'labeller'): Promise<readonly string[]> {
  const object = await (await adminClient()).json<PartialObjectMetadata>('GET', path);
  return ownedKeys(object.metadata.managedFields, manager, 'labels');
}

describe('prune', { skip }, () => {
  test(
    'after a run over three kinds, labeller owns no label; co-owned and foreign labels stay; one LIST per kind, one PATCH per labelled object',
    { skip: auditSkip },
    async (t) => {
      const ns = await createNamespace('prune');
      const group = `${ns}.example.com`;
      await createCrd(group, 'widgets', 'Widget');
      const paths: string[] = [];
      for (const name of ['a', 'b']) {
        await create(`/api/v1/namespaces/${ns}/configmaps`, {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name },
        });
        await create(`/api/v1/namespaces/${ns}/services`, {
          apiVersion: 'v1',
          kind: 'Service',
          metadata: { name },
          spec: { ports: [{ port: 80 }] },
        });
        await create(`/apis/${group}/v1/namespaces/${ns}/widgets`, {
          apiVersion: `${group}/v1`,
          kind: 'Widget',
          metadata: { name },
        });
        paths.push(
          `/api/v1/namespaces/${ns}/configmaps/${name}`,
          `/api/v1/namespaces/${ns}/services/${name}`,
          `/apis/${group}/v1/namespaces/${ns}/widgets/${name}`,
        );
      }
      // Not labelled by labeller (outside its selector), so prune must not touch it.
      await create(`/api/v1/namespaces/${ns}/configmaps`, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'other', labels: { skip: 'me' } },
      });
      const kinds = `configmaps,services,widgets.${group}`;
      const labelled = await new Labeller([
        '--kinds',
        kinds,
        '--label',
        'team=platform',
        '--label',
        'example.com/name={{name}}',
        '--namespace',
        ns,
        '--selector',
        '!skip',
        '--once',
      ]).exited;
      assert.equal(labelled.code, 0, labelled.stderr);
      for (const path of paths) assert.deepEqual([...(await ownedBy(path))].sort(), ['example.com/name', 'team'], path);

      // Another manager applies team=platform too (co-owns it) on one object; another sets its own label on one more.
      const shared = `/api/v1/namespaces/${ns}/configmaps/a`;
      await (await adminClient()).json('PATCH', `${shared}?fieldManager=someone-else`, {
        headers: { 'content-type': 'application/apply-patch+yaml' },
        body: JSON.stringify({
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: 'a', labels: { team: 'platform' } },
        }),
      });
      await patchLabels(`/api/v1/namespaces/${ns}/services/b`, { mine: 'yes' });

      const ours = (verb: string) =>
        auditEvents((e) =>
          e.verb === verb && e.objectRef?.namespace === ns && (e.userAgent ?? '').startsWith('labeller/')
        );
      const before = { patch: ours('patch').length, list: ours('list').length };

      // The dry run: one JSON Patch per labelled object, nothing written.
      const dry = await new Labeller(['prune', '--kinds', kinds, '--namespace', ns, '--dry-run']).exited;
      assert.equal(dry.code, 0, dry.stderr);
      assert.match(
        dry.stdout,
        /^dry run: seen 7, would patch 6, unchanged 1, conflicts 0, failed 0 \(3 controllers\)$/m,
      );
      const planned = dry.stderr.split('\n').filter((l) => l.includes('would apply labels (dry run)')).map((l) =>
        JSON.parse(l) as { name: string; kind: string; patch: unknown }
      );
      assert.equal(planned.length, 6);
      assert.deepEqual(planned.find((l) => l.kind === 'ConfigMap' && l.name === 'a')?.patch, [{
        op: 'remove',
        path: '/metadata/labels/example.com~1name',
      }]);
      assert.deepEqual(planned.find((l) => l.kind === 'Widget' && l.name === 'b')?.patch, [{
        op: 'remove',
        path: '/metadata/labels/team',
      }, { op: 'remove', path: '/metadata/labels/example.com~1name' }]);
      for (const path of paths) assert.equal((await ownedBy(path)).length, 2, `dry run wrote nothing to ${path}`);
      const dryPatches = ours('patch').slice(before.patch);
      assert.equal(dryPatches.length, 6);
      assert.ok(dryPatches.every((e) => e.requestURI.includes('dryRun=All')));

      const afterDry = { patch: ours('patch').length, list: ours('list').length };
      const pruned = await new Labeller(['prune', '--kinds', kinds, '--namespace', ns]).exited;
      assert.equal(pruned.code, 0, pruned.stderr);
      assert.match(pruned.stdout, /^seen 7, patched 6, unchanged 1, conflicts 0, failed 0 \(3 controllers\)$/m);
      const counts = { patch: ours('patch').length - afterDry.patch, list: ours('list').length - afterDry.list };
      figure(t, `prune over 3 kinds, 7 objects (6 labelled by labeller): ${counts.patch} PATCH, ${counts.list} LIST`);
      assert.deepEqual(counts, { patch: 6, list: 3 });

      for (const path of [...paths, `/api/v1/namespaces/${ns}/configmaps/other`]) {
        assert.deepEqual(await ownedBy(path), [], `labeller owns nothing on ${path}`);
      }
      assert.deepEqual(
        await labelsOf(shared),
        { team: 'platform' },
        'the co-owned label stays, owned by the other manager',
      );
      assert.deepEqual(await ownedBy(shared, 'someone-else'), ['team']);
      assert.deepEqual(await labelsOf(`/api/v1/namespaces/${ns}/services/b`), { mine: 'yes' });
      assert.deepEqual(await labelsOf(`/apis/${group}/v1/namespaces/${ns}/widgets/a`), {});
      assert.deepEqual(await labelsOf(`/api/v1/namespaces/${ns}/configmaps/other`), { skip: 'me' });

      // Pruning again finds nothing to do: no PATCH.
      const again = await new Labeller(['prune', '--kinds', kinds, '--namespace', ns]).exited;
      assert.equal(again.code, 0, again.stderr);
      assert.match(again.stdout, /^seen 7, patched 0, unchanged 7/m);
      assert.equal(ours('patch').length, afterDry.patch + 6);
    },
  );

  test("--all-kinds finds labeller's labels on kinds it was never told about; usage errors exit 2", async () => {
    const ns = await createNamespace('prune-all');
    await create(`/api/v1/namespaces/${ns}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 's' },
      stringData: { a: 'b' },
    });
    await create(`/api/v1/namespaces/${ns}/serviceaccounts`, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'sa' },
    });
    const labelled = await new Labeller([
      '--kinds',
      'secrets,serviceaccounts',
      '--label',
      'team=platform',
      '--namespace',
      ns,
      '--once',
    ]).exited;
    assert.equal(labelled.code, 0, labelled.stderr);
    const pruned = await new Labeller(['prune', '--all-kinds', '--namespace', ns]).exited;
    assert.equal(pruned.code, 0, pruned.stderr);
    assert.match(pruned.stdout, /^seen \d+, patched 2, unchanged \d+, conflicts 0, failed 0/m);
    assert.deepEqual(await labelsOf(`/api/v1/namespaces/${ns}/secrets/s`), {});
    assert.deepEqual(await labelsOf(`/api/v1/namespaces/${ns}/serviceaccounts/sa`), {});

    const misuse = await new Labeller(['--all-kinds', '--kinds', 'cm', '--label', 'a=b']).exited;
    assert.equal(misuse.code, 2);
    assert.equal(misuse.fatal, '--all-kinds works with labeller prune only');
    const nothing = await new Labeller(['prune']).exited;
    assert.equal(nothing.code, 2);
    assert.match(nothing.fatal ?? '', /^no kinds configured: pass --kinds deployments,services or --config kinds.yaml/);
  });
});
