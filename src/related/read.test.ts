import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PartialObjectMetadata } from '../apimachinery/objects.ts';
import { StoreIndex } from '../runtime/storeindex.ts';
import { Store } from '../runtime/store.ts';
import { type ControllerRef, type LabelledObject, projector } from '../labelling/object.ts';
import {
  type Consumer,
  MAX_CHAIN,
  namespaceRequeues,
  ownerRequeues,
  readsChanged,
  type RelatedCaches,
  relatedReads,
  RelatedUnreadable,
  resolveRelated,
} from './read.ts';
import { compileTemplate } from '../config/template.ts';
import { labelledObject } from '../labelling/testing/objects.ts';

const ref = (kind: string, name: string): ControllerRef => ({ apiVersion: 'apps/v1', kind, name, uid: `uid-${name}` });
const object = labelledObject;

/** Caches over a list of objects, found by uid. */
function caches(objects: readonly LabelledObject[], namespaces: Record<string, LabelledObject> = {}): RelatedCaches {
  return {
    namespace: (name) => namespaces[name],
    owner: (owner) => objects.find((o) => o.uid === owner.uid),
    referenced: () => undefined,
  };
}

const reads = (...sources: string[]) => relatedReads(sources.map((source) => compileTemplate(source)));

test('the namespace, the controller owner and the root of the chain come from the caches', () => {
  const deployment = object('web', { labels: { 'app.kubernetes.io/part-of': 'shop' } });
  const replicaSet = object('web-1', { owner: ref('Deployment', 'web'), labels: { tier: 'front' } });
  const pod = object('web-1-a', { owner: ref('ReplicaSet', 'web-1') });
  const team = object('shop', { namespace: '', labels: { team: 'payments' } });
  const related = resolveRelated(
    pod,
    'Pod',
    reads('{{namespace.labels.team}}', '{{owner.name}}', '{{root.name}}'),
    caches([deployment, replicaSet], { shop: team }),
  ).objects;
  assert.equal(related.namespace?.labels['team'], 'payments');
  assert.deepEqual([related.owner?.kind, related.owner?.name, related.owner?.labels['tier']], [
    'ReplicaSet',
    'web-1',
    'front',
  ]);
  assert.deepEqual([related.root?.kind, related.root?.name, related.root?.labels['app.kubernetes.io/part-of']], [
    'Deployment',
    'web',
    'shop',
  ]);
  // Only what the templates read is looked up.
  assert.deepEqual(resolveRelated(pod, 'Pod', reads('{{owner.name}}'), caches([replicaSet])), {
    objects: { owner: { kind: 'ReplicaSet', name: 'web-1', labels: { tier: 'front' }, annotations: {} } },
    held: new Map(),
  });
});

test('an object without a controller is its own root; a looping or too long chain has none', () => {
  const rootReads = reads('{{root.name}}');
  const root = (o: LabelledObject, kind: string, objects: readonly LabelledObject[]) =>
    resolveRelated(o, kind, rootReads, caches(objects)).objects.root;
  assert.equal(root(object('bare'), 'Pod', [])?.name, 'bare');
  assert.equal(root(object('bare'), 'Pod', [])?.kind, 'Pod');
  const a = object('a', { owner: ref('X', 'b') });
  const b = object('b', { owner: ref('X', 'a') });
  assert.equal(root(a, 'X', [a, b]), undefined, 'a cycle is harmless');
  const chain = Array.from(
    { length: MAX_CHAIN + 2 },
    (_, i) => object(`o${i}`, i === MAX_CHAIN + 1 ? {} : { owner: ref('X', `o${i + 1}`) }),
  );
  assert.equal(root(chain[0]!, 'X', chain), undefined, 'longer than MAX_CHAIN');
  assert.equal(root(chain[2]!, 'X', chain)?.name, `o${MAX_CHAIN + 1}`, 'MAX_CHAIN links up');
});

test('what cannot be read is held, never absent: a cache not listed, a kind not followed, an owner not in its cache', () => {
  const listing: RelatedCaches = {
    namespace: () => {
      throw new RelatedUnreadable('pending', 'waiting for namespaces');
    },
    owner: () => {
      throw new RelatedUnreadable('unavailable', 'owner kind Node (v1) is not followed');
    },
    referenced: () => undefined,
  };
  const mirror = object('etcd-node-1', {
    owner: { apiVersion: 'v1', kind: 'Node', name: 'node-1', uid: 'uid-node-1' },
  });
  const view = resolveRelated(
    mirror,
    'Pod',
    reads('{{namespace.labels.team}}', '{{root.name}}', '{{owner.name}}'),
    listing,
  );
  assert.deepEqual(view.objects, {});
  assert.deepEqual(
    [...view.held],
    [['namespace', 'pending'], ['owner', 'unavailable'], ['root', 'unavailable']],
  );
  // The owner is not in its (listed) cache: not seen yet, or being deleted. Not "no root": held.
  const orphan = object('p', { owner: ref('ReplicaSet', 'gone') });
  assert.deepEqual([...resolveRelated(orphan, 'Pod', reads('{{root.name}}'), caches([])).held], [['root', 'pending']]);
  // A relation the templates do not read is not looked up, so it holds nothing.
  assert.deepEqual(resolveRelated(mirror, 'Pod', reads('{{name}}'), listing).held.size, 0);
});

test('readsChanged: only a change to a field the templates read counts', () => {
  const teamReads = reads('{{namespace.labels.team}}').get('namespace');
  const before = object('shop', { labels: { team: 'a', other: '1' } });
  assert.equal(readsChanged(teamReads, before, object('shop', { labels: { team: 'a', other: '2' } })), false);
  assert.equal(readsChanged(teamReads, before, object('shop', { labels: { team: 'b' } })), true);
  assert.equal(readsChanged(teamReads, before, object('shop', { labels: {} })), true, 'removed');
  assert.equal(readsChanged(teamReads, before, undefined), true, 'deleted');
  assert.equal(readsChanged(teamReads, undefined, before), true, 'created');
  assert.equal(readsChanged(undefined, before, undefined), false, 'not read at all');
});

const meta = (
  name: string,
  namespace: string,
  labels: Record<string, string>,
  owner?: string,
): PartialObjectMetadata => ({
  apiVersion: 'v1',
  kind: 'X',
  metadata: {
    name,
    namespace,
    uid: `uid-${name}`,
    resourceVersion: '1',
    labels,
    ...(owner
      ? { ownerReferences: [{ apiVersion: 'apps/v1', kind: 'X', name: owner, uid: `uid-${owner}`, controller: true }] }
      : {}),
  },
});

function consumer(
  sources: string[],
  store: Store<LabelledObject>,
  inNamespace?: (name: string) => Iterable<string>,
  byOwner?: StoreIndex<LabelledObject>,
) {
  const queued: string[] = [];
  const value: Consumer = {
    kind: 'Pod',
    reads: reads(...sources),
    stores: [store],
    target: { enqueue: (key) => queued.push(key) },
    inNamespace,
    byOwner: byOwner && [byOwner],
  };
  return { value, queued };
}

test('a namespace change requeues only the objects in it whose templates read the changed label', () => {
  const namespaces = new Store(projector({ fieldManager: 'labeller' }));
  const byNamespace = new StoreIndex<LabelledObject>('namespace', (o) => o.namespace || undefined);
  const pods = new Store(projector({ fieldManager: 'labeller' }), [byNamespace]);
  for (const [name, ns] of [['a', 'shop'], ['b', 'shop'], ['c', 'other']] as const) {
    pods.apply({ type: 'apply', object: meta(name, ns, {}) });
  }
  namespaces.apply({ type: 'apply', object: meta('shop', '', { team: 'a' }) });
  const readers = consumer(['{{namespace.labels.team}}'], pods, (name) => byNamespace.get(name));
  const map = (labels: Record<string, string>) =>
    [...namespaceRequeues(namespaces.apply({ type: 'apply', object: meta('shop', '', labels) })!, namespaces, [
      readers.value,
    ])].map(([, key]) => key);
  assert.deepEqual(map({ team: 'a', unrelated: 'x' }), [], 'a label nobody reads');
  assert.deepEqual(map({ team: 'b', unrelated: 'x' }), ['shop/a', 'shop/b']);
  assert.deepEqual(map({ unrelated: 'x' }), ['shop/a', 'shop/b'], 'removed');
});

test('an owner change requeues its children reading owner.*, and every descendant reading root.*', () => {
  const project = projector({ fieldManager: 'labeller', owners: true });
  const index = () => new StoreIndex<LabelledObject>('owner', (o) => o.owner?.uid);
  const [deployIndex, rsIndex, podIndex] = [index(), index(), index()];
  const deployments = new Store(project, [deployIndex]);
  const replicaSets = new Store(project, [rsIndex]);
  const pods = new Store(project, [podIndex]);
  deployments.apply({ type: 'apply', object: meta('web', 'shop', { part: 'shop' }) });
  replicaSets.apply({ type: 'apply', object: meta('web-1', 'shop', {}, 'web') });
  replicaSets.apply({ type: 'apply', object: meta('api-1', 'shop', {}, 'api') });
  for (const pod of ['p1', 'p2']) pods.apply({ type: 'apply', object: meta(pod, 'shop', {}, 'web-1') });
  const chain = [{ store: deployments, byOwner: deployIndex }, { store: replicaSets, byOwner: rsIndex }, {
    store: pods,
    byOwner: podIndex,
  }];
  const rsReaders = consumer(['{{owner.labels.part}}'], replicaSets, undefined, rsIndex);
  const podReaders = consumer(['{{root.labels.part}}'], pods, undefined, podIndex);
  const consumers = [rsReaders.value, podReaders.value];
  const requeued = (store: Store<LabelledObject>, object: PartialObjectMetadata) =>
    [...ownerRequeues(store.apply({ type: 'apply', object })!, store, consumers, chain)].map(([, key]) => key);

  assert.deepEqual(
    requeued(deployments, meta('web', 'shop', { part: 'shop', other: 'x' })),
    [],
    'a label nobody reads',
  );
  assert.deepEqual(requeued(deployments, meta('web', 'shop', { part: 'mall' })), ['shop/web-1', 'shop/p1', 'shop/p2']);
  // Orphaned: the replica set is no longer below the deployment; its pods' root changes.
  assert.deepEqual(requeued(replicaSets, meta('web-1', 'shop', {})), ['shop/p1', 'shop/p2']);
  assert.deepEqual(requeued(deployments, meta('web', 'shop', { part: 'again' })), []);
});
