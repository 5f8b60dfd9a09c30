import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PartialObjectMetadata, WatchEvent } from '../apimachinery/objects.ts';
import { ApiError } from '../apimachinery/errors.ts';
import { Backoff } from '../util/backoff.ts';
import { createLogger } from '../util/log.ts';
import { Informer } from './informer.ts';
import type { Partition, PartitionChange } from './partition.ts';
import type { StoreChange } from './store.ts';
import { bookmark, metadataOf, page, ScriptedApi } from './testing/scripted.ts';

type Meta = PartialObjectMetadata['metadata'];
const log = createLogger({ level: 'error', format: 'json', write: () => {} });

function object(namespace: string, name: string, resourceVersion = '1'): PartialObjectMetadata {
  return { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace, uid: `uid-${name}`, resourceVersion } };
}

/** A partition by namespace, its selector the namespaces kept joined with `||`; grow() and shrink() change it. */
function byNamespace(...kept: string[]) {
  const keeps = new Set(kept);
  const listeners: ((change: PartitionChange) => void)[] = [];
  const partition: Partition = {
    keeps: (meta) => keeps.has(meta.namespace ?? ''),
    selector: () => [...keeps].join(' || '),
    subscribe: (listener) => {
      listeners.push(listener);
      return () => listeners.splice(listeners.indexOf(listener), 1);
    },
  };
  return {
    partition,
    grow(namespace: string) {
      keeps.add(namespace);
      const added = { adds: (meta: { namespace?: string }) => meta.namespace === namespace, selector: namespace };
      for (const listener of listeners) listener({ added });
    },
    shrink(namespace: string) {
      keeps.delete(namespace);
      for (const listener of listeners) listener({});
    },
  };
}

/** A server that filters by the partition's selector (it honours shardSelector). */
class Filtering extends ScriptedApi {
  async honoursShardSelector(): Promise<boolean> {
    return true;
  }
}

const settle = async (condition: () => boolean): Promise<void> => {
  for (let i = 0; i < 200 && !condition(); i++) await new Promise((resolve) => setImmediate(resolve));
  assert.ok(condition(), 'settled');
};

test('a partition that grows lists only what it adds, at the watch version, and is current once that is in; one that shrinks drops what it gave up', async (t) => {
  const { promise: held } = Promise.withResolvers<readonly WatchEvent[]>();
  const { promise: widerHeld } = Promise.withResolvers<readonly WatchEvent[]>();
  const { promise: listed, resolve: answer } = Promise.withResolvers<ReturnType<typeof page>>();
  const api = new Filtering(
    [page('10', [object('a', 'one'), object('a', 'two')]), listed],
    [{ events: [bookmark('12')], until: held }, { events: [], until: widerHeld }],
  );
  const shard = byNamespace('a');
  const informer = new Informer<Meta>({
    name: 'configmaps',
    api,
    project: metadataOf,
    partition: shard.partition,
    log,
  });
  const changes: StoreChange<Meta>[] = [];
  informer.subscribe((change) => changes.push(change));
  const stop = new AbortController();
  t.after(() => stop.abort());
  const running = informer.run(stop.signal);
  await informer.synced;
  assert.equal(informer.filtering, 'server');
  await settle(() => api.watches.length === 1);

  shard.grow('b');
  assert.equal(informer.current(() => false), false, 'not current while what it adds is listed');
  await settle(() => api.lists.length === 2);
  assert.deepEqual(
    [api.lists[1]!.shardSelector, api.lists[1]!.resourceVersion, api.lists[1]!.resourceVersionMatch],
    ['b', '12', 'NotOlderThan'],
  );
  answer(page('12', [object('b', 'three')]));
  await settle(() => api.watches.length === 2);
  assert.equal(informer.current(() => false), true);
  assert.deepEqual([api.watches[1]!.shardSelector, api.watches[1]!.resourceVersion], ['a || b', '12']);
  assert.deepEqual([...informer.store.keys()], ['a/one', 'a/two', 'b/three']);
  const merged = changes.at(-1);
  assert.deepEqual(merged?.type === 'resync' ? [merged.changed, merged.removed] : [], [['b/three'], []]);

  shard.shrink('a');
  assert.deepEqual([...informer.store.keys()], ['b/three']);
  const dropped = changes.at(-1);
  assert.deepEqual(dropped?.type === 'resync' ? dropped.removed : [], ['a/one', 'a/two']);
  assert.equal(api.lists.length, 2, 'no list for a shrink');

  stop.abort();
  await running;
});

test('a watch that failed and resumes is told to onWatchRecovered once, with what it brings in the store: a resumed watch that brings nothing says so too', async (t) => {
  const api = new ScriptedApi([page('10', [object('a', 'one')])], [
    { events: [bookmark('11')], end: new Error('connection reset') },
    // Resumed from 11: nothing changed meanwhile, so no event but the bookmark.
    { events: [bookmark('12')], until: new Promise(() => {}) },
  ]);
  const heard: string[] = [];
  const informer: Informer<Meta> = new Informer<Meta>({
    name: 'configmaps',
    api,
    project: metadataOf,
    watch: { backoff: new Backoff({ initialMs: 0, jitter: 0 }) },
    onWatchError: (error) => heard.push(`error ${error.message}`),
    onWatchRecovered: () => heard.push(`recovered ${[...informer.store.keys()].join()}`),
    log,
  });
  const stop = new AbortController();
  t.after(() => stop.abort());
  const running = informer.run(stop.signal);
  await settle(() => heard.length === 2);
  assert.deepEqual(heard, ['error connection reset', 'recovered a/one']);
  assert.deepEqual(api.watches.map((o) => o.resourceVersion), ['10', '11'], 'resumed, not listed again');
  assert.equal(informer.watchFailure, undefined);
  stop.abort();
  await running;
});

test('a one-off list tries again when the server asks it to come back later, and gives up at once on a refusal', async () => {
  const initializing = new ApiError(
    'GET',
    '/apis/wgpolicyk8s.io/v1alpha2/clusterpolicyreports',
    429,
    { reason: 'TooManyRequests', message: 'storage is (re)initializing' },
    '1',
  );
  const api = new ScriptedApi([initializing, page('7', [object('a', 'one')])], []);
  const informer = new Informer<Meta>({ name: 'clusterpolicyreports', api, project: metadataOf, log });
  await informer.listOnce(new AbortController().signal);
  await informer.synced;
  assert.equal(api.lists.length, 2);
  assert.deepEqual([...informer.store.keys()], ['a/one']);

  const forbidden = new ApiError('GET', '/api/v1/secrets', 403, { reason: 'Forbidden', message: 'no' });
  const refusing = new ScriptedApi([forbidden], []);
  const refused = new Informer<Meta>({ name: 'secrets', api: refusing, project: metadataOf, log });
  await assert.rejects(refused.listOnce(new AbortController().signal), forbidden);
  await assert.rejects(refused.synced, forbidden);
  assert.equal(refusing.lists.length, 1);
  assert.equal(refused.watchFailure, forbidden);
});
