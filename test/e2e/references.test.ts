// Relations by reference (issue 48) on the bare API server, with hand-made Nodes and pods whose
// spec.nodeName is set (no scheduler needed): `labeller status` and its coverage count the pods
// labelled from their node, and the pod whose node lacks the label as short of it; `--dry-run`
// prints the patch that would set the reference-derived label and writes nothing; `prune` (and
// `prune --dry-run`) removes (would remove) it; and a labeller whose RBAC refuses it the nodes
// holds the key on the pods that carry it, says which kind it may not read, and labels the
// other kinds and keys as usual. test/e2e/references-realshapes.test.ts follows the same
// references on objects the cluster's own scheduler, binder and controllers make.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PartialObjectMetadata } from '../../src/apimachinery/objects.ts';
import type { StatusReport } from '../../src/commands/status.ts';
import { ownedKeys } from '../../src/labelling/object.ts';
import { byLabeller } from '../cluster/audit.ts';
import { freePorts } from '../controlplane/controlplane.ts';
import { assertCleanExit } from '../process/crash.ts';
import { Labeller } from '../process/labeller.ts';
import { sample } from '../process/metrics.ts';
import {
  adminClient,
  auditEvents,
  auditSkip,
  configFile,
  create,
  createNamespace,
  eventually,
  labelsOf,
  patchLabels,
  serviceAccountKubeconfig,
} from './cluster.ts';

/** This file's labellers write as their own field manager, so no other test file's labeller is counted. */
const FIELD_MANAGER = 'labeller-references-bare-e2e';
const ZONE_KEY = 'topology.kubernetes.io/zone';
const ZONE = 'example.com/zone';
const MANAGED = 'example.com/managed';
const CONFIG = `
kinds:
  - resource: pods
    labels:
      ${ZONE}: "{{node.labels.${ZONE_KEY}}}"
`;

/**
 * In a fresh namespace: Node `<ns>-a` in zone-a, Node `<ns>-b` without a zone label, pods a1 and
 * a2 on the first, b1 on the second and `pending` on none, each labelled app=web by its creator.
 * The Nodes are deleted when `t` ends.
 */
async function podsOnNodes(prefix: string, t: { after: (fn: () => Promise<void>) => void }) {
  const ns = await createNamespace(prefix);
  const nodes = { a: `${ns}-a`, b: `${ns}-b` };
  t.after(async () => {
    for (const node of Object.values(nodes)) {
      await (await adminClient()).request('DELETE', `/api/v1/nodes/${node}`).catch(() => {});
    }
  });
  await create('/api/v1/nodes', { metadata: { name: nodes.a, labels: { [ZONE_KEY]: 'zone-a' } } });
  await create('/api/v1/nodes', { metadata: { name: nodes.b } });
  const pods = { a1: nodes.a, a2: nodes.a, b1: nodes.b, pending: undefined };
  for (const [name, nodeName] of Object.entries(pods)) {
    await create(`/api/v1/namespaces/${ns}/pods`, {
      // Labelled by their creator, as a workload's pods are: a manager besides labeller owns a
      // label, so an apply of labeller's that carries none leaves the labels it does not own (with
      // no other owner, server-side apply drops the whole map, keys no manager owns with it).
      metadata: { name, labels: { app: 'web' } },
      spec: { ...(nodeName ? { nodeName } : {}), containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10' }] },
    });
  }
  const pod = (name: string) => `/api/v1/namespaces/${ns}/pods/${name}`;
  return { ns, nodes, pod, names: Object.keys(pods) as (keyof typeof pods)[] };
}

/** The label keys `manager` owns on the object at `path`, read from its managedFields. */
async function ownedBy(path: string, manager = FIELD_MANAGER): Promise<readonly string[]> {
  const object = await (await adminClient()).json<PartialObjectMetadata>('GET', path);
  return ownedKeys(object.metadata.managedFields, manager, 'labels');
}

/** The JSON Patch each `would apply labels (dry run)` line of a dry run prints, by object name. */
function planned(stderr: string): Record<string, unknown> {
  const lines = stderr.split('\n').filter((l) => l.includes('would apply labels (dry run)'));
  return Object.fromEntries(
    lines.map((l) => JSON.parse(l) as { name: string; patch: unknown }).map((l) => [
      l.name,
      l.patch,
    ]),
  );
}

describe('references: status, dry run, prune and a related kind refused', { skip: auditSkip }, () => {
  test('status and its coverage count the pods labelled from their node, and a pod whose node lacks the label as short of it', async (t) => {
    const { ns, nodes } = await podsOnNodes('references-status', t);
    const config = configFile(CONFIG);
    const args = ['--config', config, '--namespace', ns, '--field-manager', FIELD_MANAGER];
    const status = async (extra: readonly string[] = []) => {
      const exit = await new Labeller(['status', '--coverage', ...args, ...extra, '-o', 'json']).exited;
      assert.equal(exit.code, 0, exit.stderr);
      const [row] = (JSON.parse(exit.stdout) as StatusReport).kinds;
      return row;
    };
    const counts = (row: Awaited<ReturnType<typeof status>>) => [row?.resource, row?.seen, row?.managed, row?.pending];
    const noZone = `unwanted: its node has no label ${ZONE_KEY}`;
    const noNode = 'unwanted: the object has no node';

    // Before any run: the two pods on the zoned node would be patched; the other two want nothing.
    const before = await status();
    assert.deepEqual(counts(before), ['pods', 4, 0, 2]);
    assert.deepEqual([before?.conflicts, before?.invalid, before?.held], [0, 0, 0]);
    assert.deepEqual(before?.coverage?.map((c) => [c.key, c.covered, c.objects, c.shortfalls]), [
      [ZONE, 0, 4, { pending: 2, [noZone]: 1, [noNode]: 1 }],
    ]);

    const run = await new Labeller([...args, '--once']).exited;
    assert.equal(run.code, 0, run.stderr);
    assert.equal((await labelsOf(`/api/v1/namespaces/${ns}/pods/a1`))[ZONE], 'zone-a');

    // Converged: labeller owns the label on the two pods, nothing would change.
    const after = await status();
    assert.deepEqual(counts(after), ['pods', 4, 2, 0]);
    assert.deepEqual([after?.conflicts, after?.invalid, after?.held], [0, 0, 0]);
    assert.deepEqual(after?.coverage?.map((c) => [c.key, c.covered, c.objects, c.ratio, c.shortfalls]), [
      [ZONE, 2, 4, 0.5, { [noZone]: 1, [noNode]: 1 }],
    ]);
    const table = await new Labeller(['status', '--coverage', ...args]).exited;
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, new RegExp(`^pods +${ns} +4 +2 +0 +0 +0 +0$`, 'm'));
    assert.match(
      table.stdout,
      new RegExp(`^pods +example\\.com/zone +50\\.0 % +2/4 +1 ${noZone.replaceAll('.', '\\.')}; 1 ${noNode}$`, 'm'),
    );

    // The node's zone changes: status reads it from its cache of nodes, so both pods are pending again.
    await patchLabels(`/api/v1/nodes/${nodes.a}`, { [ZONE_KEY]: 'zone-a2' });
    const moved = await status();
    assert.deepEqual(counts(moved), ['pods', 4, 2, 2]);
    assert.deepEqual(moved?.coverage?.[0]?.shortfalls, { pending: 2, [noZone]: 1, [noNode]: 1 });
  });

  test('--dry-run prints the patch setting the label read from the node and writes nothing; prune --dry-run and prune remove what labeller wrote', async (t) => {
    const { ns, pod, names } = await podsOnNodes('references-prune', t);
    // What the pods carry before labeller: their creator's app, and on newer API servers their
    // node's topology.kubernetes.io/zone, which its PodTopologyLabels admission copies, owned by no manager.
    const before = Object.fromEntries(await Promise.all(names.map(async (name) => [name, await labelsOf(pod(name))])));
    const args = ['--config', configFile(CONFIG), '--namespace', ns, '--field-manager', FIELD_MANAGER];
    const patches = () =>
      auditEvents((e) =>
        byLabeller(e) && e.verb === 'patch' && e.objectRef?.resource === 'pods' && e.objectRef.namespace === ns
      );
    const written = () => patches().filter((e) => !e.requestURI.includes('dryRun=All'));

    const dry = await new Labeller([...args, '--once', '--dry-run']).exited;
    assert.equal(dry.code, 0, dry.stderr);
    assert.match(dry.stdout, /^dry run: seen 4, would patch 2, unchanged 2, conflicts 0, failed 0/m);
    const add = [{ op: 'add', path: '/metadata/labels/example.com~1zone', value: 'zone-a' }];
    assert.deepEqual(planned(dry.stderr), { a1: add, a2: add });
    for (const name of names) {
      assert.equal((await labelsOf(pod(name)))[ZONE], undefined, `the dry run wrote nothing to ${name}`);
      assert.deepEqual(await ownedBy(pod(name)), [], `labeller owns nothing on ${name}`);
    }
    assert.deepEqual(written().map((e) => e.requestURI), [], 'no PATCH but dry runs');

    const run = await new Labeller([...args, '--once']).exited;
    assert.equal(run.code, 0, run.stderr);
    for (const name of ['a1', 'a2'] as const) {
      assert.equal((await labelsOf(pod(name)))[ZONE], 'zone-a', name);
      assert.deepEqual(await ownedBy(pod(name)), [ZONE], name);
    }
    assert.deepEqual(
      written().map((e) => e.objectRef?.name).sort(),
      ['a1', 'a2'],
      'one PATCH per pod on the zoned node',
    );

    // prune --dry-run: the patch that would remove it, and nothing written.
    const dryPrune = await new Labeller(['prune', ...args, '--dry-run']).exited;
    assert.equal(dryPrune.code, 0, dryPrune.stderr);
    assert.match(dryPrune.stdout, /^dry run: seen 4, would patch 2, unchanged 2, conflicts 0, failed 0/m);
    const remove = [{ op: 'remove', path: '/metadata/labels/example.com~1zone' }];
    assert.deepEqual(planned(dryPrune.stderr), { a1: remove, a2: remove });
    for (const name of ['a1', 'a2'] as const) {
      assert.equal((await labelsOf(pod(name)))[ZONE], 'zone-a', `prune --dry-run kept it on ${name}`);
    }
    assert.equal(written().length, 2, 'prune --dry-run sent no PATCH but dry runs');

    const pruned = await new Labeller(['prune', ...args]).exited;
    assert.equal(pruned.code, 0, pruned.stderr);
    assert.match(pruned.stdout, /^seen 4, patched 2, unchanged 2, conflicts 0, failed 0/m);
    for (const name of names) {
      assert.deepEqual(await labelsOf(pod(name)), before[name], `prune removed it from ${name}, and nothing else`);
      assert.deepEqual(await ownedBy(pod(name)), [], `labeller owns nothing on ${name}`);
    }
    assert.equal(written().length, 4, 'one PATCH per pod it had labelled');
  });

  test('nodes labeller may not read hold the key on the pods that carry it: kept, reported naming nodes; the other keys and kinds labelled', async (t) => {
    const { ns, nodes, pod } = await podsOnNodes('references-forbidden', t);
    await create(`/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'cm' } });
    const withConfig = (
      yaml: string,
    ) => ['--config', configFile(yaml), '--namespace', ns, '--field-manager', FIELD_MANAGER];
    // Written earlier by labeller, with rights on the nodes.
    const first = await new Labeller([...withConfig(CONFIG), '--once']).exited;
    assert.equal(first.code, 0, first.stderr);
    assert.equal((await labelsOf(pod('a1')))[ZONE], 'zone-a');
    // Since then, the node's zone has changed and a pod has come on it: what labeller cannot see.
    await patchLabels(`/api/v1/nodes/${nodes.a}`, { [ZONE_KEY]: 'zone-a2' });
    await create(`/api/v1/namespaces/${ns}/pods`, {
      metadata: { name: 'a3' },
      spec: { nodeName: nodes.a, containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10' }] },
    });

    // Pods and config maps to list, watch and patch; nothing on nodes.
    const verbs = ['list', 'watch', 'patch'];
    const kubeconfig = await serviceAccountKubeconfig(ns, 'labeller', [
      { apiGroups: [''], resources: ['pods', 'configmaps'], verbs },
    ]);
    const config = `
kinds:
  - resource: pods
    labels:
      ${ZONE}: "{{node.labels.${ZONE_KEY}}}"
      ${MANAGED}: "yes"
  - resource: configmaps
    labels:
      ${MANAGED}: "yes"
`;
    const [port] = await freePorts(1);
    const labeller = new Labeller([...withConfig(config), '--http-port', String(port)], { kubeconfig });
    try {
      const reported = await labeller.waitForLog((l) => /related objects may not be read/.test(l.msg));
      assert.equal(reported['hint'], 'grant list and watch on nodes', 'the grant to add');
      assert.match(String(reported['resource']), /^nodes\b/, 'names the kind refused');
      assert.match(String(reported['error']), /403 Forbidden: .*nodes/);

      // The other kind and the pods' other key: labelled as usual.
      await eventually(
        async () => (await labelsOf(`/api/v1/namespaces/${ns}/configmaps/cm`))[MANAGED] === 'yes',
        'the config map labelled',
      );
      const names = ['a1', 'a2', 'a3', 'b1', 'pending'] as const;
      for (const name of names) {
        await eventually(async () => (await labelsOf(pod(name)))[MANAGED] === 'yes', `pod ${name} labelled`);
      }
      // The key read from the node: kept at its value where labeller owns it, not added where it does not.
      for (const name of ['a1', 'a2'] as const) {
        assert.equal((await labelsOf(pod(name)))[ZONE], 'zone-a', `${name}: held, not removed nor changed`);
        assert.deepEqual([...await ownedBy(pod(name))].sort(), [MANAGED, ZONE], `${name}: still labeller's`);
      }
      for (const name of ['a3', 'b1', 'pending'] as const) {
        assert.equal((await labelsOf(pod(name)))[ZONE], undefined, `${name}: not added`);
      }

      const readyz = await fetch(`http://127.0.0.1:${port}/readyz`);
      const body = await readyz.text();
      assert.equal(readyz.status, 200, body);
      assert.match(body, /related objects may not be read \(resource nodes.*hint grant list and watch on nodes\)/);
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      assert.equal(
        sample(metrics, 'labeller_related_unreadable', { kind: String(reported['resource']), reason: 'forbidden' }),
        1,
      );
      assert.equal(
        sample(metrics, 'labeller_objects_held', { controller: `pods/${ns}` }),
        4,
        'a1, a2, a3 and b1 read a node; the pending pod none',
      );
      assert.equal(sample(metrics, 'labeller_objects_held', { controller: `configmaps/${ns}` }), 0);
      assert.ok(labeller.running, 'one kind refused stops nothing');

      // status, as the same identity, counts them held and names the reference that cannot be read.
      const status = await new Labeller(
        ['status', '--coverage', ...withConfig(config), '--preflight=false', '-o', 'json'],
        { kubeconfig },
      ).exited;
      assert.equal(status.code, 0, status.stderr);
      const rows = (JSON.parse(status.stdout) as StatusReport).kinds;
      assert.deepEqual(rows.map((r) => [r.resource, r.seen, r.managed, r.pending, r.held, r.error]), [
        ['pods', 5, 5, 0, 4, undefined],
        ['configmaps', 1, 1, 0, 0, undefined],
      ]);
      assert.deepEqual(rows[0]?.coverage?.map((c) => [c.key, c.covered, c.objects, c.shortfalls]), [
        [ZONE, 0, 5, { 'held: its node cannot be read': 4, 'unwanted: the object has no node': 1 }],
        [MANAGED, 5, 5, {}],
      ]);
    } finally {
      assertCleanExit(await labeller.stop());
    }
  });
});
