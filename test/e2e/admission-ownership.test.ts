// One semantics whichever path wrote a key (issue 36, item 3), against the real API server: keys
// labeller's admission policies set at create belong to no field manager, yet the controller
// treats them as its own through the marker the policies leave. An object created right costs
// the controller no PATCH; a key dropped from the config is removed from objects that got it at
// admission (a JSON Patch, as an apply cannot), the marker with the last key it vouched for; a
// value changed under `skip` is updated; a key another manager set since is left alone; status
// counts them, --dry-run shows the removal, explain names the owner, and prune removes them.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, describe, test } from 'node:test';
import { markerKeys, markerValues } from '../../src/labelling/admitted.ts';
import { ConfigMapVolume } from '../cluster/configmapvolume.ts';
import { assertCleanExit } from '../process/crash.ts';
import { Labeller } from '../process/labeller.ts';
import { sleep } from '../process/sleep.ts';
import { admission, apply, policiesSkip } from './admission.ts';
import {
  adminClient,
  auditEvents,
  auditSkip,
  create,
  createNamespace,
  eventually,
  kubeconfig,
  patchLabels,
  skip,
} from './cluster.ts';
import { tool } from './helm.ts';

const FIELD_MANAGER = 'labeller-admission-owners';
/** The marker annotations of this field manager's policies. */
const MARKERS = markerKeys(FIELD_MANAGER);

interface Metadata {
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
  readonly managedFields?: readonly { readonly manager?: string; readonly fieldsV1?: unknown }[];
}

describe("keys set at admission are labeller's", { skip: await policiesSkip(skip) }, () => {
  test(
    'created right: no PATCH; dropped: removed, marker too; changed under skip: updated; set since by another manager: left; status, dry run, explain and prune agree',
    { skip: auditSkip, timeout: 240_000 },
    async () => {
      const ns = await createNamespace('admit-own');
      await patchLabels(`/api/v1/namespaces/${ns}`, { team: 'payments' });
      const config = (labels: string, annotations: string) =>
        `labels: {${labels}}\nannotations: {${annotations}}\nkinds:\n  - resource: configmaps\n    namespaces: [${ns}]\n    conflicts: skip\n`;
      const first = config(
        '"example.com/team": "{{namespace.labels.team}}", "example.com/tier": web',
        '"example.com/runbook": "https://runbooks.example.com/{{namespace}}"',
      );
      // The config of the next step: tier and the annotation dropped, team a constant now.
      const second = config('"example.com/team": platform', '');
      const volume = new ConfigMapVolume(first);
      after(() => rmSync(volume.dir, { recursive: true, force: true }));
      const common = ['--field-manager', FIELD_MANAGER];
      await apply((await admission(['--config', volume.path, ...common])).stdout, FIELD_MANAGER);

      const client = await adminClient();
      const path = (name: string) => `/api/v1/namespaces/${ns}/configmaps/${name}`;
      const read = async (name: string) => (await client.json<{ metadata: Metadata }>('GET', path(name))).metadata;
      let probes = 0;
      await eventually(async () => {
        const made = await create<{ metadata: Metadata }>(`/api/v1/namespaces/${ns}/configmaps`, {
          metadata: { name: `probe-${probes++}` },
        });
        return made.metadata.labels?.['example.com/tier'] === 'web';
      }, 'the policies in force');
      for (const name of ['one', 'two', 'three']) {
        await create(`/api/v1/namespaces/${ns}/configmaps`, { metadata: { name } });
      }
      const one = await read('one');
      assert.deepEqual(one.labels, { 'example.com/team': 'payments', 'example.com/tier': 'web' });
      assert.deepEqual(
        markerValues('labels', one.annotations?.[MARKERS.labels] ?? ''),
        one.labels,
      );
      // Set on purpose by another manager after the create: that key is theirs now.
      const label = await tool('kubectl', [
        '--kubeconfig',
        kubeconfig(),
        'label',
        '-n',
        ns,
        'configmap/three',
        'example.com/tier=custom',
        '--overwrite',
      ]);
      assert.equal(label.code, 0, label.stderr);

      const patches = (name?: string) =>
        auditEvents((e) =>
          e.verb === 'patch' && e.objectRef?.resource === 'configmaps' && e.objectRef.namespace === ns &&
          (name === undefined || e.objectRef.name === name) && (e.userAgent ?? '').startsWith('labeller/') &&
          e.stage === 'ResponseComplete' && !e.requestURI.includes('dryRun=')
        );

      // The controller over objects created right: nothing to write.
      const labeller = new Labeller(['--config', volume.path, ...common, '--requeue-after', '0']);
      try {
        await labeller.waitForLog((l) => l.msg === 'initial list complete', 60_000);
        await sleep(3000);
        // Probes created before the policies were in force are labelled by the controller, as any object.
        const created = ['one', 'two', 'three'];
        const written = () => patches().filter((e) => created.includes(e.objectRef?.name ?? ''));
        assert.deepEqual(written().map((e) => e.objectRef?.name), [], 'no PATCH of objects created right');

        // What status counts, and what a dry run of the next config would do, before it is in force.
        const status = JSON.parse(
          (await new Labeller(['status', '--config', volume.path, ...common, '-o', 'json']).exited).stdout,
        ) as { kinds: { managed: number }[] };
        assert.equal(status.kinds[0]?.managed, 3 + probes, 'keys set at admission are managed');
        const next = new ConfigMapVolume(second);
        after(() => rmSync(next.dir, { recursive: true, force: true }));
        const dry = await new Labeller(['--config', next.path, ...common, '--once', '--dry-run']).exited;
        assert.equal(dry.code, 0, dry.stderr);
        assert.match(dry.stderr, /"name":"one".*"op":"remove","path":"\/metadata\/labels\/example.com~1tier"/);
        assert.deepEqual(written(), [], 'a dry run writes nothing');

        // explain: the owner of a key set at admission.
        const explained = JSON.parse(
          (await new Labeller(['explain', 'configmap/one', '-n', ns, '--config', volume.path, ...common, '-o', 'json'])
            .exited).stdout,
        ) as { explanation: { keys: { key: string; owners: { manager: string; operation: string }[] }[] } };
        assert.deepEqual(
          explained.explanation.keys.find((k) => k.key === 'example.com/tier')?.owners,
          [{ manager: FIELD_MANAGER, operation: 'Admission' }],
        );

        // The next config: tier and the annotation removed where admission set them, team updated.
        volume.update(second);
        await eventually(async () => {
          const now = await read('one');
          return now.labels?.['example.com/team'] === 'platform' && now.labels['example.com/tier'] === undefined &&
            now.annotations?.['example.com/runbook'] === undefined;
        }, 'one relabelled');
        await sleep(2000);
        const after1 = await read('one');
        assert.deepEqual(after1.labels, { 'example.com/team': 'platform' });
        assert.equal(after1.annotations?.[MARKERS.annotations], undefined, 'the marker of the last annotation went');
        assert.deepEqual(
          (await read('three')).labels,
          { 'example.com/team': 'platform', 'example.com/tier': 'custom' },
          'the key kubectl set since is left alone',
        );
        assert.equal(patches('one').length, 2, 'a removal and an apply');
        assert.equal(patches('three').length, 2, 'a removal of the annotation, an apply of team: tier is not touched');
        assertCleanExit(await labeller.stop('SIGTERM', 30_000));

        // A new object, labelled at admission by the first config's policies (still applied).
        await create(`/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'four' } });
        assert.equal((await read('four')).labels?.['example.com/tier'], 'web');
        // Another labeller (another field manager) takes none of them for its own: its prune leaves them.
        const theirs = await new Labeller(['prune', '--config', next.path, '--field-manager', 'another-labeller'])
          .exited;
        assert.equal(theirs.code, 0, theirs.stderr);
        assert.match(theirs.stdout, /^seen \d+, patched 0,/m);
        assert.equal((await read('four')).labels?.['example.com/tier'], 'web', "another labeller's prune");
        const prune = await new Labeller(['prune', '--config', next.path, ...common]).exited;
        assert.equal(prune.code, 0, prune.stderr);
        const four = await read('four');
        assert.deepEqual([four.labels ?? {}, four.annotations ?? {}], [{}, {}], 'prune leaves nothing of labeller');
        // A marker that vouched for keys labeller took over since (one) or another manager did (three) goes too.
        const pruned = await read('one');
        assert.deepEqual([pruned.labels ?? {}, pruned.annotations ?? {}], [{}, {}]);
        const three = await read('three');
        assert.deepEqual([three.labels, three.annotations ?? {}], [{ 'example.com/tier': 'custom' }, {}]);
      } finally {
        labeller.kill();
        await client.close();
      }
    },
  );
});
