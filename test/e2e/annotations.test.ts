// Annotations against the real API server, next to labels and under the same field manager:
// planned by --dry-run and `status` (nothing written), applied in one apply with the labels,
// changed by a live reload without a relist, left to another manager under `skip` (an
// AnnotationConflict Event), co-owned ones kept and labeller's own removed when dropped from the
// config, one that would take an object past the API server's 256 KiB invalid (an
// InvalidAnnotations Event, nothing sent), and all of labeller's removed by `labeller prune`.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, describe, test } from 'node:test';
import { adminClient, auditEvents, auditSkip, create, createNamespace, eventually, skip } from './cluster.ts';
import type { StatusReport } from '../../src/commands/status.ts';
import { metadataClient } from '../../src/kinds/metadataclient.ts';
import { MetadataApi } from '../../src/kube/api.ts';
import type { PartialObjectMetadata } from '../../src/apimachinery/objects.ts';
import { ObjectGone } from '../../src/labelling/ports.ts';
import { ownedKeys } from '../../src/labelling/object.ts';
import { freePorts } from '../controlplane/controlplane.ts';
import { ConfigMapVolume } from '../cluster/configmapvolume.ts';
import { assertCleanExit } from '../process/crash.ts';
import { CONFIGMAPS } from '../cluster/resources.ts';
import { figure } from '../process/figures.ts';
import { Labeller, type LogLine } from '../process/labeller.ts';
import { scrape } from '../process/metrics.ts';
import { sleep } from '../process/sleep.ts';

const RUNBOOK = 'example.com/runbook';
const NOTE = 'example.com/note';
const CONTACT = 'example.com/contact';

async function metadataOf(path: string): Promise<PartialObjectMetadata['metadata']> {
  return (await (await adminClient()).json<PartialObjectMetadata>('GET', path)).metadata;
}

/** A server-side apply of `annotations` by another field manager. */
async function applyAs(manager: string, path: string, annotations: Record<string, string>): Promise<void> {
  const { name, namespace } = await metadataOf(path);
  await (await adminClient()).json('PATCH', path, {
    headers: { 'content-type': 'application/apply-patch+yaml' },
    query: { fieldManager: manager, force: true },
    body: JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace, annotations } }),
  });
}

interface Event {
  readonly reason: string;
  readonly note: string;
  readonly regarding: { readonly name: string };
}

describe('annotations', { skip }, () => {
  test(
    'planned by --dry-run and status, applied with the labels, changed, co-owned kept, dropped removed, contested left, too large invalid, pruned',
    { skip: auditSkip },
    async (t) => {
      const ns = await createNamespace('annotations');
      const cm = (name: string) => `/api/v1/namespaces/${ns}/configmaps/${name}`;
      for (const name of ['c1', 'c2', 'big']) {
        await create(`/api/v1/namespaces/${ns}/configmaps`, {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name },
        });
      }
      // c2's contact is somebody else's; big's annotations leave less room than labeller's need.
      await applyAs('kubectl-annotate', cm('c2'), { [CONTACT]: 'ops@example.com' });
      await applyAs('kubectl-annotate', cm('big'), { 'example.com/blob': 'x'.repeat(256 * 1024 - 100) });
      await create(`/apis/apps/v1/namespaces/${ns}/deployments`, {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'd1' },
        spec: {
          selector: { matchLabels: { app: 'd1' } },
          template: { metadata: { labels: { app: 'd1' } }, spec: { containers: [{ name: 'c', image: 'nginx' }] } },
        },
      });
      const config = (runbook: string, note: boolean) =>
        [
          'labels: {team: platform}',
          'annotations:',
          `  ${RUNBOOK}: "${runbook}"`,
          ...(note ? [`  ${NOTE}: "kept by labeller: with colons, and commas"`] : []),
          'kinds:',
          '  - resource: configmaps',
          '    conflicts: skip',
          `    annotations: {${CONTACT}: platform@example.com}`,
          '  - resource: deployments',
        ].join('\n');
      const volume = new ConfigMapVolume(config('https://runbooks.example.com/{{namespace}}/{{name}}', true));
      after(() => rmSync(volume.dir, { recursive: true, force: true }));
      const common = ['--config', volume.path, '--namespace', ns];
      const patches = () =>
        auditEvents((e) =>
          e.verb === 'patch' && e.objectRef?.namespace === ns && e.objectRef.resource !== 'events' &&
          (e.userAgent ?? '').startsWith('labeller/')
        ).length;

      // --dry-run: the plan names each annotation as a JSON Patch operation; nothing is written.
      const dryRun = new Labeller([...common, '--once', '--dry-run']);
      const planned = await dryRun.exited;
      // big cannot be written: a failure, as --once counts them.
      assert.equal(planned.code, 1, planned.stderr);
      assert.match(planned.stdout, /would patch 3, .* failed 1/);
      const plans = dryRun.logs.filter((l: LogLine) => l.msg === 'would apply labels (dry run)');
      const c1Plan = plans.find((l) => l['name'] === 'c1')?.['patch'];
      assert.deepEqual(c1Plan, [
        { op: 'add', path: '/metadata/labels/team', value: 'platform' },
        { op: 'add', path: '/metadata/annotations/example.com~1contact', value: 'platform@example.com' },
        {
          op: 'add',
          path: '/metadata/annotations/example.com~1note',
          value: 'kept by labeller: with colons, and commas',
        },
        {
          op: 'add',
          path: '/metadata/annotations/example.com~1runbook',
          value: `https://runbooks.example.com/${ns}/c1`,
        },
      ]);
      assert.equal((await metadataOf(cm('c1'))).annotations, undefined, 'a dry run writes nothing');

      // status: everything pending; c2's contact is contested (skip), big's annotations invalid.
      const status = async () => {
        const run = new Labeller(['status', ...common, '-o', 'json']);
        const exit = await run.exited;
        assert.equal(exit.code, 0, exit.stderr);
        return (JSON.parse(run.stdout) as StatusReport).kinds.map((
          { resource, managed, pending, conflicts, invalid },
        ) => ({
          resource,
          managed,
          pending,
          conflicts,
          invalid,
        }));
      };
      assert.deepEqual(await status(), [
        { resource: 'configmaps', managed: 0, pending: 2, conflicts: 1, invalid: 1 },
        { resource: 'deployments.apps', managed: 0, pending: 1, conflicts: 0, invalid: 0 },
      ]);

      const before = patches();
      const [port = 0] = await freePorts(1);
      const labeller = new Labeller(
        [...common, '--requeue-after', '0', '--metrics-bind-address', `127.0.0.1:${port}`],
        {
          env: { POD_NAME: 'labeller-0', POD_NAMESPACE: ns },
        },
      );
      const settle = () => sleep(1500);
      try {
        await eventually(async () => (await metadataOf(cm('c1'))).annotations?.[RUNBOOK] !== undefined, 'c1 annotated');
        await eventually(
          async () =>
            (await metadataOf(`/apis/apps/v1/namespaces/${ns}/deployments/d1`)).annotations?.[RUNBOOK] !== undefined,
          'd1 annotated',
        );
        await settle();
        const c1 = await metadataOf(cm('c1'));
        assert.equal(c1.labels?.['team'], 'platform');
        assert.deepEqual(
          [c1.annotations?.[RUNBOOK], c1.annotations?.[NOTE], c1.annotations?.[CONTACT]],
          [
            `https://runbooks.example.com/${ns}/c1`,
            'kept by labeller: with colons, and commas',
            'platform@example.com',
          ],
        );
        assert.deepEqual([...ownedKeys(c1.managedFields, 'labeller', 'annotations')].sort(), [CONTACT, NOTE, RUNBOOK]);
        // Under skip, c2's contact stays theirs; the rest is applied.
        const c2 = await metadataOf(cm('c2'));
        assert.equal(c2.annotations?.[CONTACT], 'ops@example.com');
        assert.equal(c2.annotations?.[RUNBOOK], `https://runbooks.example.com/${ns}/c2`);
        // Labels and annotations in one apply: one PATCH per object written (c1, c2, d1), none for big.
        assert.equal(patches() - before, 3, 'one PATCH per object');
        assert.equal((await metadataOf(cm('big'))).labels?.['team'], undefined, 'nothing sent to an invalid object');
        const events = await eventually(async () => {
          const list = await (await adminClient()).json<{ items: Event[] }>(
            'GET',
            `/apis/events.k8s.io/v1/namespaces/${ns}/events`,
          );
          const reasons = list.items.map((e) => `${e.reason} ${e.regarding.name}`);
          return reasons.includes('AnnotationConflict c2') && reasons.includes('InvalidAnnotations big') && list.items;
        }, 'an AnnotationConflict Event on c2 and an InvalidAnnotations Event on big');
        assert.match(
          events.find((e) => e.reason === 'AnnotationConflict')?.note ?? '',
          /annotation example\.com\/contact; labeller wants "platform@example.com"/,
        );
        assert.match(events.find((e) => e.reason === 'InvalidAnnotations')?.note ?? '', /more than the 262144/);
        const applied = await scrape(port, 'labeller_annotations_applied_total', { controller: `configmaps/${ns}` });
        assert.ok((applied ?? 0) >= 5, `labeller_annotations_applied_total ${applied}`);

        // Changed: a new template reaches every object by one PATCH each, no relist.
        const lists = () =>
          auditEvents((e) =>
            e.verb === 'list' && e.objectRef?.namespace === ns && (e.userAgent ?? '').startsWith('labeller/')
          )
            .length;
        const [patchesBefore, listsBefore] = [patches(), lists()];
        volume.update(config('https://wiki.example.com/{{kind}}/{{name}}', true));
        await eventually(
          async () => (await metadataOf(cm('c1'))).annotations?.[RUNBOOK] === 'https://wiki.example.com/ConfigMap/c1',
          'runbook changed',
        );
        await settle();
        assert.deepEqual([patches() - patchesBefore, lists() - listsBefore], [3, 0], 'changed: 3 PATCH, no LIST');

        // Co-owned: another manager applies the same note on c1. Dropped from the config, the note
        // is removed where only labeller owned it (c2, d1) and kept where it is co-owned (c1).
        await applyAs('gitops', cm('c1'), { [NOTE]: 'kept by labeller: with colons, and commas' });
        volume.update(config('https://wiki.example.com/{{kind}}/{{name}}', false));
        await eventually(
          async () => (await metadataOf(cm('c2'))).annotations?.[NOTE] === undefined,
          'note removed from c2',
        );
        await settle();
        const [c1After, c2After] = [await metadataOf(cm('c1')), await metadataOf(cm('c2'))];
        assert.equal(c1After.annotations?.[NOTE], 'kept by labeller: with colons, and commas', 'co-owned: kept');
        assert.ok(!ownedKeys(c1After.managedFields, 'labeller', 'annotations').includes(NOTE));
        assert.equal(c2After.annotations?.[CONTACT], 'ops@example.com', 'still theirs');
        const removed = await scrape(port, 'labeller_annotations_removed_total', { controller: `configmaps/${ns}` });
        assert.ok((removed ?? 0) >= 1, `labeller_annotations_removed_total ${removed}`);
        assertCleanExit(await labeller.stop());
      } finally {
        labeller.kill();
      }
      assert.deepEqual(await status(), [
        { resource: 'configmaps', managed: 2, pending: 0, conflicts: 1, invalid: 1 },
        { resource: 'deployments.apps', managed: 1, pending: 0, conflicts: 0, invalid: 0 },
      ]);

      // prune: labeller owns no annotation anywhere; the co-owned note and the foreign contact stay.
      const pruned = await new Labeller(['prune', ...common]).exited;
      assert.equal(pruned.code, 0, pruned.stderr);
      const [c1Pruned, c2Pruned] = [await metadataOf(cm('c1')), await metadataOf(cm('c2'))];
      for (const object of [c1Pruned, c2Pruned, await metadataOf(`/apis/apps/v1/namespaces/${ns}/deployments/d1`)]) {
        assert.deepEqual(ownedKeys(object.managedFields, 'labeller', 'annotations'), [], object.name);
        assert.equal(object.annotations?.[RUNBOOK], undefined, object.name);
      }
      assert.equal(c1Pruned.annotations?.[NOTE], 'kept by labeller: with colons, and commas');
      assert.equal(c2Pruned.annotations?.[CONTACT], 'ops@example.com');
      // A held annotation labeller owns is read before an apply (its value is not cached): by a
      // list of one, which needs no right beyond labeller's.
      const admin = await adminClient();
      const read = metadataClient((namespace) => new MetadataApi(admin, CONFIGMAPS, namespace), 'labeller');
      const target = { apiVersion: 'v1', kind: 'ConfigMap', name: 'c2', namespace: ns, uid: c2Pruned.uid };
      assert.deepEqual(await read.annotations(target, [CONTACT, 'example.com/none']), { [CONTACT]: 'ops@example.com' });
      await assert.rejects(read.annotations({ ...target, uid: 'another' }, [CONTACT]), ObjectGone);
      figure(
        t,
        'annotations: 1 PATCH per object for labels and annotations together; a template change 1 PATCH each, no LIST',
      );
    },
  );
});
