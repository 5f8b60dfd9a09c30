import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { RelatedView } from '../labelling/ports.ts';
import { labelledObject } from '../labelling/testing/objects.ts';
import { testKind } from './testing/kinds.ts';
import { FindingTracker } from './tracker.ts';

const TEAM = { team: '{{namespace.labels.team}}' };
const CONTESTED = (name: string, namespace = 'shop') =>
  labelledObject(name, { key: `${namespace}/${name}`, namespace, labels: { team: 'blue' } });

test('findings are kept by namespace; a round looks again only at the objects that changed', async () => {
  let wakes = 0;
  const tracker = new FindingTracker('labeller', () => wakes++);
  const pods = testKind({ labels: TEAM });
  for (let i = 0; i < 100; i++) pods.set(labelledObject(`ok-${i}`, { labels: { team: 'red' }, ownedLabels: ['team'] }));
  pods.set(CONTESTED('web'));
  pods.set(CONTESTED('api', 'billing'));
  tracker.track([pods]);
  assert.equal(wakes, 1);
  await tracker.settle(5);
  assert.deepEqual([...tracker.takeChanged()].sort(), ['billing', 'shop']);
  assert.deepEqual(tracker.findings('shop').map((f) => `${f.object.name} ${f.rule} ${f.state}`), ['web team conflict']);
  assert.deepEqual(tracker.namespaces().sort(), ['billing', 'shop']);
  assert.deepEqual(tracker.results(), { fail: 2, warn: 0 });

  // One object of 102 changes: one plan.
  const before = pods.planned;
  pods.set(labelledObject('ok-7', { labels: { team: 'red' }, ownedLabels: ['team'], resourceVersion: '2' }));
  assert.ok(tracker.pending);
  await tracker.settle(5);
  assert.equal(pods.planned - before, 1);
  assert.deepEqual([...tracker.takeChanged()], [], 'no findings changed');

  // Fixed: its namespace's findings change, and it has none left.
  pods.set(labelledObject('web', { labels: { team: 'red' }, ownedLabels: ['team'] }));
  await tracker.settle(5);
  assert.deepEqual([...tracker.takeChanged()], ['shop']);
  assert.deepEqual(tracker.findings('shop'), []);
  assert.deepEqual(tracker.namespaces(), ['billing']);
  assert.deepEqual(tracker.results(), { fail: 1, warn: 0 });

  // Gone from the cache: its findings go with it.
  pods.drop('billing/api');
  await tracker.settle(5);
  assert.deepEqual([...tracker.takeChanged()], ['billing']);
  assert.deepEqual(tracker.namespaces(), []);
  assert.deepEqual(tracker.results(), { fail: 0, warn: 0 });
  tracker.stop();
});

test("a Namespace's own findings go in its namespace's report; other cluster-scoped objects' in the cluster report ('')", async () => {
  const tracker = new FindingTracker('labeller', () => {});
  const namespaces = testKind({
    labels: { team: '{{labels.owner}}' },
    plural: 'namespaces',
    kind: 'Namespace',
    namespaced: false,
  });
  namespaces.set(labelledObject('shop', { key: 'shop', namespace: '' }));
  const nodes = testKind({ labels: { zone: '{{labels.region}}' }, plural: 'nodes', kind: 'Node', namespaced: false });
  nodes.set(labelledObject('node-1', { key: 'node-1', namespace: '' }));
  tracker.track([namespaces, nodes]);
  await tracker.settle(5);
  assert.deepEqual([...tracker.takeChanged()].sort(), ['', 'shop']);
  assert.deepEqual(tracker.findings('shop').map((f) => `${f.object.kind} ${f.object.name}`), ['Namespace shop']);
  assert.deepEqual(tracker.findings('').map((f) => `${f.object.kind} ${f.object.name}`), ['Node node-1']);
  tracker.stop();
});

test('a kind that stops running takes its findings away; one relabelled is looked at whole', async () => {
  const tracker = new FindingTracker('labeller', () => {});
  const pods = testKind({ labels: TEAM });
  pods.set(CONTESTED('web'));
  tracker.track([pods]);
  await tracker.settle(5);
  tracker.takeChanged();
  tracker.track([]);
  assert.deepEqual([...tracker.takeChanged()], ['shop']);
  assert.deepEqual(tracker.findings('shop'), []);
  pods.set(CONTESTED('api'));
  assert.equal(tracker.pending, false, 'no longer followed');
});

test('an object held until a cache lists is looked at again at each round, and reported once it is held for good', async () => {
  let why: 'pending' | 'unavailable' = 'pending';
  const view = (): RelatedView => ({ objects: {}, held: new Map([['namespace', why]]) });
  const tracker = new FindingTracker('labeller', () => {});
  const pods = testKind({ labels: TEAM, view });
  pods.set(labelledObject('web'));
  tracker.track([pods]);
  await tracker.settle(5);
  assert.deepEqual([...tracker.takeChanged()], []);
  assert.ok(tracker.pending, 'waiting on a cache');
  why = 'unavailable';
  await tracker.settle(5);
  assert.deepEqual(tracker.findings('shop').map((f) => `${f.result} ${f.state}`), ['warn held']);
  assert.equal(tracker.pending, false);
  tracker.stop();
});
