// The admission path never blocks a create and never leaks a key (issue 46, items 2-6), against
// the real API server: a catalogue entry or the request's own annotations near the API server's
// 256 KiB limit cost the create nothing (the policy sets what fits, the controller reports the
// rest); a key a policy forced over the request's value is labeller's and goes when the config
// drops it; a marker the request carries is replaced and one written since vouches for nothing;
// prune deletes the policies before it removes a label.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, describe, test } from 'node:test';
import { markerKeys, markerValues } from '../../src/labelling/admitted.ts';
import { ConfigMapVolume } from '../cluster/configmapvolume.ts';
import { assertCleanExit } from '../process/crash.ts';
import { Labeller, runLabeller } from '../process/labeller.ts';
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

interface Metadata {
  readonly name: string;
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
}

/** Creates ConfigMap `name` in `ns` with `metadata`; answers what the create response carries. */
async function createConfigMap(ns: string, name: string, metadata: Partial<Metadata> = {}): Promise<Metadata> {
  return (await create<{ metadata: Metadata }>(`/api/v1/namespaces/${ns}/configmaps`, {
    metadata: { ...metadata, name },
  })).metadata;
}

/** Applies the policies `labeller admission` renders for `config` under `fieldManager`, and waits until they label creates. */
async function policiesInForce(ns: string, config: string, fieldManager: string, key: string): Promise<void> {
  await apply((await admission(['--config', config, '--field-manager', fieldManager])).stdout, fieldManager);
  let probes = 0;
  await eventually(
    async () => (await createConfigMap(ns, `probe-${probes++}`)).labels?.[key] !== undefined,
    'the policies in force',
  );
}

describe('the admission path never blocks a create and never leaks a key', { skip: await policiesSkip(skip) }, () => {
  test(
    'near 256 KiB of annotations, from a catalogue entry or the request itself: the create succeeds with what fits, the controller reports the rest (item 3)',
    {
      timeout: 120_000,
    },
    async () => {
      const ns = await createNamespace('admit-bound');
      await patchLabels(`/api/v1/namespaces/${ns}`, { team: 'payments' });
      const fieldManager = 'labeller-admit-bound';
      const markers = markerKeys(fieldManager);
      // A catalogue entry of 140 KB: with the marker repeating it, the object would pass 256 KiB.
      await createConfigMap(ns, 'docs');
      const client = await adminClient();
      await client.json('PATCH', `/api/v1/namespaces/${ns}/configmaps/docs`, {
        headers: { 'content-type': 'application/merge-patch+json' },
        body: JSON.stringify({ data: { web: 'd'.repeat(140_000), api: 'the api' } }),
      });
      const config = new ConfigMapVolume(`
labels: {team: "{{namespace.labels.team}}"}
annotations: {example.com/doc: "{{docs[labels.app]}}"}
sources: {docs: {configMap: {namespace: ${ns}, name: docs}}}
kinds: [{resource: configmaps, namespaces: [${ns}]}]
`);
      after(() => rmSync(config.dir, { recursive: true, force: true }));
      await policiesInForce(ns, config.path, fieldManager, 'team');

      const small = await createConfigMap(ns, 'small', { labels: { app: 'api' } });
      assert.equal(small.annotations?.['example.com/doc'], 'the api', 'a value that fits is set');
      const web = await createConfigMap(ns, 'web', { labels: { app: 'web' } });
      assert.deepEqual(web.labels, { app: 'web', team: 'payments' }, 'the labels fit');
      assert.equal(web.annotations?.['example.com/doc'], undefined, 'the entry does not, with its marker');
      assert.equal(web.annotations?.[markers.annotations], undefined);
      // The request's own 130 KB, and a catalogue entry that would fit alone: the create still succeeds.
      const own = await createConfigMap(ns, 'own', {
        labels: { app: 'web' },
        annotations: { mine: 'm'.repeat(130_000) },
      });
      assert.equal(own.labels?.['team'], 'payments');
      assert.equal(own.annotations?.['example.com/doc'], undefined);
      // So close to the limit that the labels' marker does not fit either: nothing is set, and the create succeeds.
      const full = await createConfigMap(ns, 'full', { annotations: { mine: 'm'.repeat(256 * 1024 - 40) } });
      assert.deepEqual([full.labels, full.annotations?.[markers.labels]], [undefined, undefined]);

      // The controller writes what fits (the entry alone, with no marker, fits on web), and reports
      // what cannot be written (the entry beside the request's 130 KB), as it did before.
      const once = await runLabeller(['--config', config.path, '--field-manager', fieldManager, '--once']);
      assert.equal(once.code, 1, once.stderr);
      assert.match(
        once.stderr,
        /"msg":"annotations invalid for this object; not labelling it","kind":"ConfigMap","namespace":"[^"]+","name":"own"/,
      );
      const read = async (name: string) =>
        (await client.json<{ metadata: Metadata }>('GET', `/api/v1/namespaces/${ns}/configmaps/${name}`)).metadata;
      assert.equal((await read('web')).annotations?.['example.com/doc']?.length, 140_000);
      assert.equal((await read('full')).labels?.['team'], 'payments', 'the controller labels what admission left');
    },
  );

  test("a key forced at create over the request's value is labeller's: removed when the config drops it (item 4)", {
    timeout: 120_000,
  }, async () => {
    const ns = await createNamespace('admit-forced');
    const fieldManager = 'labeller-admit-forced';
    const config = (labels: string) => `labels: {${labels}}\nkinds: [{resource: configmaps, namespaces: [${ns}]}]\n`;
    const volume = new ConfigMapVolume(config('team: payments, tier: web'));
    after(() => rmSync(volume.dir, { recursive: true, force: true }));
    await policiesInForce(ns, volume.path, fieldManager, 'team');
    const mine = await createConfigMap(ns, 'mine', { labels: { team: 'mine' } });
    assert.equal(mine.labels?.['team'], 'payments');
    assert.equal(mine.annotations?.[markerKeys(fieldManager).labels], '!team=payments,tier=web');

    const labeller = new Labeller(['--config', volume.path, '--field-manager', fieldManager, '--requeue-after', '0']);
    try {
      await labeller.waitForLog((l) => l.msg === 'initial list complete', 60_000);
      volume.update(config('tier: web'));
      await eventually(
        async () => (await labelsOfConfigMap(ns, 'mine'))['team'] === undefined,
        'the forced key removed with the config',
      );
      assert.deepEqual(await labelsOfConfigMap(ns, 'mine'), { tier: 'web' });
    } finally {
      assertCleanExit(await labeller.stop());
    }
  });

  test('a marker the request carries is replaced; one written since vouches for nothing (item 2)', {
    timeout: 120_000,
  }, async () => {
    const ns = await createNamespace('admit-forged');
    const fieldManager = 'labeller-admit-forged';
    const marker = markerKeys(fieldManager).labels;
    const config = configText(ns, 'tier: web', 'skip');
    const volume = new ConfigMapVolume(config);
    after(() => rmSync(volume.dir, { recursive: true, force: true }));
    await policiesInForce(ns, volume.path, fieldManager, 'tier');

    // Forged at create: the policy keeps none of it.
    const forged = await createConfigMap(ns, 'forged', {
      labels: { team: 'mine', owner: 'b' },
      annotations: { [marker]: 'team=mine,owner=b,zzz=1' },
    });
    assert.deepEqual(markerValues('labels', forged.annotations?.[marker] ?? ''), { tier: 'web' });

    // Forged since, by someone who may annotate the object: it lists a key no manager owns (set
    // by another labeller's policy) and labeller's own. A controller wanting only team=payments,
    // under skip, takes none of them for its own: it removes nothing and leaves the user's team.
    const other = new ConfigMapVolume(configText(ns, 'owner: b', 'force'));
    after(() => rmSync(other.dir, { recursive: true, force: true }));
    await policiesInForce(ns, other.path, `${fieldManager}-b`, 'owner');
    // With data, as ConfigMaps have: an object created with nothing but a name has no managedFields,
    // and the API server then tracks no writer (a marker on it cannot be told from a forgery).
    const later = await create<{ metadata: Metadata }>(`/api/v1/namespaces/${ns}/configmaps`, {
      metadata: { name: 'later' },
      data: { a: '1' },
    });
    assert.deepEqual(later.metadata.labels, { owner: 'b', tier: 'web' });
    const label = await tool('kubectl', [
      '--kubeconfig',
      kubeconfig(),
      'label',
      '-n',
      ns,
      'configmap/later',
      'team=mine',
    ]);
    assert.equal(label.code, 0, label.stderr);
    const annotate = await tool('kubectl', [
      '--kubeconfig',
      kubeconfig(),
      'annotate',
      '-n',
      ns,
      'configmap/later',
      '--overwrite',
      `${marker}=team=mine,tier=web,owner=b`,
    ]);
    assert.equal(annotate.code, 0, annotate.stderr);
    const next = new ConfigMapVolume(configText(ns, 'team: payments', 'skip'));
    after(() => rmSync(next.dir, { recursive: true, force: true }));
    const once = await runLabeller(['--config', next.path, '--field-manager', fieldManager, '--once']);
    assert.equal(once.code, 0, once.stderr);
    assert.deepEqual(await labelsOfConfigMap(ns, 'later'), { team: 'mine', owner: 'b', tier: 'web' });
  });

  test(
    'prune deletes the policies before it removes a label (item 6)',
    { skip: auditSkip, timeout: 120_000 },
    async () => {
      const ns = await createNamespace('admit-prune');
      const fieldManager = 'labeller-admit-prune';
      const volume = new ConfigMapVolume(configText(ns, 'tier: web', 'force'));
      after(() => rmSync(volume.dir, { recursive: true, force: true }));
      await policiesInForce(ns, volume.path, fieldManager, 'tier');
      const once = await runLabeller(['--config', volume.path, '--field-manager', fieldManager, '--once']);
      assert.equal(once.code, 0, once.stderr);
      const started = Date.now();
      const pruned = await runLabeller(['prune', '--config', volume.path, '--field-manager', fieldManager]);
      assert.equal(pruned.code, 0, pruned.stderr);
      const ofPrune = (verb: string, resource: string) =>
        auditEvents((e) =>
          e.verb === verb && e.objectRef?.resource === resource && e.stage === 'ResponseComplete' &&
          (e.userAgent ?? '').startsWith('labeller/') && Date.parse(e.requestReceivedTimestamp ?? '') >= started &&
          (resource !== 'configmaps' || e.objectRef.namespace === ns)
        );
      const deletes = ofPrune('delete', 'mutatingadmissionpolicies');
      const patches = ofPrune('patch', 'configmaps');
      assert.ok(deletes.length > 0 && patches.length > 0, `${deletes.length} deletes, ${patches.length} patches`);
      const lastDelete = Math.max(...deletes.map((e) => Date.parse(e.stageTimestamp ?? '')));
      const firstPatch = Math.min(...patches.map((e) => Date.parse(e.requestReceivedTimestamp ?? '')));
      assert.ok(lastDelete <= firstPatch, 'every policy gone before the first label is removed');
    },
  );
});

function configText(ns: string, labels: string, conflicts: 'force' | 'skip'): string {
  return `labels: {${labels}}\nkinds: [{resource: configmaps, namespaces: [${ns}], conflicts: ${conflicts}}]\n`;
}

async function labelsOfConfigMap(ns: string, name: string): Promise<Record<string, string>> {
  const client = await adminClient();
  return (await client.json<{ metadata: Metadata }>('GET', `/api/v1/namespaces/${ns}/configmaps/${name}`)).metadata
    .labels ?? {};
}
