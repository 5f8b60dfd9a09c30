import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PartialObjectMetadata } from '../apimachinery/objects.ts';
import { StoreIndex } from './storeindex.ts';
import { objectKey, type Projection, Store } from './store.ts';

function pod(
  name: string,
  namespace?: string,
  labels: Record<string, string> = {},
  resourceVersion = '1',
): PartialObjectMetadata {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, ...(namespace === undefined ? {} : { namespace }), uid: `uid-${name}`, resourceVersion, labels },
  };
}

/** What appStore caches of an object: its label `app` and its resourceVersion. */
interface App {
  readonly app: string;
  readonly version: string;
}

const app: Projection<App> = Object.assign(
  (object: PartialObjectMetadata): App => ({
    app: object.metadata.labels?.['app'] ?? '',
    version: object.metadata.resourceVersion,
  }),
  { version: (cached: App) => cached.version },
);

/** A store whose projection is the label `app`, so tests see that the projection is what is cached. */
function appStore(): Store<App> {
  return new Store(app);
}

/** Runs a complete relist of `objects` and returns the resync change. */
function relist<T>(store: Store<T>, objects: readonly PartialObjectMetadata[]): ReturnType<Store<T>['apply']> {
  store.apply({ type: 'init' });
  for (const object of objects) store.apply({ type: 'initApply', object });
  return store.apply({ type: 'initDone' });
}

test('objectKey is namespace/name, or the bare name for cluster-scoped objects', () => {
  assert.equal(objectKey({ name: 'web', namespace: 'shop' }), 'shop/web');
  assert.equal(objectKey({ name: 'node-1' }), 'node-1');
  assert.equal(objectKey({ name: 'node-1', namespace: '' }), 'node-1');
  assert.equal(objectKey({ name: 'node-1', namespace: undefined }), 'node-1');
});

test('apply upserts the projection and reports it; delete removes the key and reports it', () => {
  const store = appStore();
  assert.deepEqual(store.apply({ type: 'apply', object: pod('web', 'shop', { app: 'a' }) }), {
    type: 'upsert',
    key: 'shop/web',
    object: { app: 'a', version: '1' },
    previous: undefined,
  });
  assert.deepEqual(store.apply({ type: 'apply', object: pod('web', 'shop', { app: 'b' }) }), {
    type: 'upsert',
    key: 'shop/web',
    object: { app: 'b', version: '1' },
    previous: { app: 'a', version: '1' },
  });
  assert.deepEqual(store.get('shop/web'), { app: 'b', version: '1' });
  assert.equal(store.size, 1);

  assert.deepEqual(store.apply({ type: 'delete', object: pod('web', 'shop') }), {
    type: 'delete',
    key: 'shop/web',
    previous: { app: 'b', version: '1' },
  });
  assert.equal(store.get('shop/web'), undefined);
  assert.equal(store.size, 0);
});

test('a relist is buffered: reads during it see the old state, initDone swaps the new one in whole', () => {
  const store = appStore();
  relist(store, [pod('old', 'ns', { app: 'o' }), pod('kept', 'ns', { app: 'k1' }), pod('same', 'ns', { app: 's' })]);

  store.apply({ type: 'init' });
  store.apply({ type: 'initApply', object: pod('kept', 'ns', { app: 'k2' }, '2') });
  store.apply({ type: 'initApply', object: pod('same', 'ns', { app: 's' }) });
  store.apply({ type: 'initApply', object: pod('new', 'ns', { app: 'n' }) });
  assert.deepEqual([...store.keys()].sort(), ['ns/kept', 'ns/old', 'ns/same']);
  assert.equal(store.get('ns/kept')?.app, 'k1');
  assert.equal(store.get('ns/new'), undefined);

  const change = store.apply({ type: 'initDone' });
  // Only what changed is reported for requeueing: 'same' kept its resourceVersion.
  assert.ok(change?.type === 'resync');
  assert.deepEqual({ changed: change.changed, removed: change.removed }, {
    changed: ['ns/kept', 'ns/new'],
    removed: ['ns/old'],
  });
  assert.deepEqual(
    [...change.previous.keys()].sort(),
    ['ns/kept', 'ns/old', 'ns/same'],
    'what the store held before the relist',
  );
  assert.deepEqual([...store.keys()].sort(), ['ns/kept', 'ns/new', 'ns/same']);
  assert.equal(store.get('ns/kept')?.app, 'k2');
  assert.equal(store.get('ns/old'), undefined);
});

test('a relist restarted by a new init drops what the interrupted one buffered', () => {
  const store = appStore();
  store.apply({ type: 'init' });
  store.apply({ type: 'initApply', object: pod('partial', 'ns') });
  assert.deepEqual(relist(store, [pod('a', 'ns')]), {
    type: 'resync',
    changed: ['ns/a'],
    removed: [],
    previous: new Map(),
  });
  assert.deepEqual([...store.keys()], ['ns/a']);
});

test('an empty relist removes everything', () => {
  const store = appStore();
  relist(store, [pod('a', 'ns'), pod('node')]);
  assert.deepEqual(relist(store, []), {
    type: 'resync',
    changed: [],
    removed: ['ns/a', 'node'],
    previous: new Map([['ns/a', { app: '', version: '1' }], ['node', { app: '', version: '1' }]]),
  });
  assert.equal(store.size, 0);
});

test('synced flips after the first initDone, not at init', () => {
  const store = appStore();
  assert.equal(store.synced, false);
  store.apply({ type: 'apply', object: pod('a', 'ns') });
  store.apply({ type: 'init' });
  store.apply({ type: 'initApply', object: pod('a', 'ns') });
  assert.equal(store.synced, false);
  store.apply({ type: 'initDone' });
  assert.equal(store.synced, true);
  store.apply({ type: 'init' });
  assert.equal(store.synced, true, 'a later relist does not unsync the store');
});

test('error events change nothing', () => {
  const store = appStore();
  relist(store, [pod('a', 'ns', { app: 'x' })]);
  assert.equal(store.apply({ type: 'error', error: new Error('boom'), retryInMs: 10 }), undefined);
  assert.equal(store.get('ns/a')?.app, 'x');
});

test('indexes follow upserts, deletes and relists', () => {
  const byApp = new StoreIndex<App>('app', (cached) => cached.app || undefined);
  const store = new Store(app, [byApp]);
  store.apply({ type: 'apply', object: pod('a', 'ns', { app: 'web' }) });
  store.apply({ type: 'apply', object: pod('b', 'ns', { app: 'web' }) });
  store.apply({ type: 'apply', object: pod('c', 'ns', {}) });
  assert.deepEqual([...byApp.get('web')], ['ns/a', 'ns/b']);
  store.apply({ type: 'apply', object: pod('a', 'ns', { app: 'api' }) });
  assert.deepEqual([...byApp.get('web')], ['ns/b']);
  assert.deepEqual([...byApp.get('api')], ['ns/a']);
  store.apply({ type: 'delete', object: pod('b', 'ns') });
  assert.deepEqual([...byApp.get('web')], []);
  relist(store, [pod('d', 'ns', { app: 'web' }), pod('e', 'ns', { app: 'web' }), pod('f', 'ns', { app: 'web' })]);
  assert.deepEqual([...byApp.get('web')], ['ns/d', 'ns/e', 'ns/f']);
  assert.deepEqual([...byApp.get('api')], []);
});

test('each projection is released when it leaves the cache: replaced, deleted, missing from a relist, or from an abandoned relist', () => {
  const live = new Map<string, number>();
  const count = (name: string, by: number) => live.set(name, (live.get(name) ?? 0) + by);
  const project = Object.assign((object: PartialObjectMetadata) => {
    count(object.metadata.name, 1);
    return object.metadata.name;
  }, { version: () => '1', release: (name: string) => count(name, -1) });
  const store = new Store(project);
  const uses = () => Object.fromEntries([...live].filter(([, n]) => n !== 0));

  relist(store, [pod('a', 'ns'), pod('b', 'ns')]);
  assert.deepEqual(uses(), { a: 1, b: 1 });
  store.apply({ type: 'apply', object: pod('a', 'ns', {}, '2') });
  store.apply({ type: 'apply', object: pod('c', 'ns') });
  store.apply({ type: 'delete', object: pod('b', 'ns') });
  assert.deepEqual(uses(), { a: 1, c: 1 });

  // A relist that fails half-way and starts over, then completes without c.
  store.apply({ type: 'init' });
  store.apply({ type: 'initApply', object: pod('a', 'ns') });
  store.apply({ type: 'initApply', object: pod('d', 'ns') });
  relist(store, [pod('a', 'ns'), pod('e', 'ns')]);
  assert.deepEqual(uses(), { a: 1, e: 1 });
  assert.deepEqual([...store.keys()], ['ns/a', 'ns/e']);

  store.apply({ type: 'delete', object: pod('a', 'ns') });
  store.apply({ type: 'delete', object: pod('e', 'ns') });
  assert.deepEqual(uses(), {});
});

test("a projection is handed the object's key; one that keeps it gets the cached key back for later versions", () => {
  const handed: string[] = [];
  const asked: string[] = [];
  const keyed: Projection<{ readonly key: string; readonly version: string }> = Object.assign(
    (object: PartialObjectMetadata, key: string) => {
      handed.push(key);
      return { key, version: object.metadata.resourceVersion };
    },
    {
      version: (cached: { readonly version: string }) => cached.version,
      key: (cached: { readonly key: string }) => {
        asked.push(cached.key);
        return cached.key;
      },
    },
  );
  const store = new Store(keyed);
  relist(store, [pod('a', 'ns'), pod('node')]);
  store.apply({ type: 'apply', object: pod('a', 'ns', {}, '2') });
  relist(store, [pod('a', 'ns', {}, '3'), pod('node', undefined, {}, '2'), pod('b', 'ns')]);
  assert.deepEqual(handed, ['ns/a', 'node', 'ns/a', 'ns/a', 'node', 'ns/b']);
  assert.deepEqual(asked, ['ns/a', 'ns/a', 'node'], 'asked only for objects already cached');
  assert.deepEqual([...store.values()].map((o) => o.version), ['3', '2', '1']);
});

test('a list of what a widened selector adds merges: nothing leaves, unchanged objects are no change, indexes and releases follow', () => {
  const live = new Map<string, number>();
  const count = (name: string, by: number) => live.set(name, (live.get(name) ?? 0) + by);
  const project = Object.assign((object: PartialObjectMetadata): App & { readonly name: string } => {
    count(object.metadata.name, 1);
    return {
      app: object.metadata.labels?.['app'] ?? '',
      version: object.metadata.resourceVersion,
      name: object.metadata.name,
    };
  }, {
    version: (cached: App) => cached.version,
    release: (cached: { readonly name: string }) => count(cached.name, -1),
  });
  const byApp = new StoreIndex<App>('app', (cached) => cached.app || undefined);
  const store = new Store(project, [byApp]);
  relist(store, [pod('a', 'ns', { app: 'web' }), pod('b', 'ns', { app: 'web' })]);

  store.apply({ type: 'init', merge: true });
  store.apply({ type: 'initApply', object: pod('a', 'ns', { app: 'web' }) });
  store.apply({ type: 'initApply', object: pod('c', 'other', { app: 'web' }) });
  assert.equal(store.get('other/c'), undefined, 'buffered until done');
  const change = store.apply({ type: 'initDone' });
  assert.deepEqual(change, { type: 'resync', changed: ['other/c'], removed: [], previous: new Map(), merged: true });
  assert.deepEqual([...store.keys()], ['ns/a', 'ns/b', 'other/c'], 'what the merge did not bring stays');
  assert.deepEqual([...byApp.get('web')], ['ns/a', 'ns/b', 'other/c']);
  assert.deepEqual(Object.fromEntries(live), { a: 1, b: 1, c: 1 }, 'the unchanged copy of a is released');

  // A merge cut short by a full relist: the relist replaces, as ever.
  store.apply({ type: 'init', merge: true });
  store.apply({ type: 'initApply', object: pod('d', 'other') });
  const relisted = relist(store, [pod('a', 'ns', { app: 'web' })]);
  assert.deepEqual(relisted?.type === 'resync' ? relisted.removed : [], ['ns/b', 'other/c']);
  assert.deepEqual([...store.keys()], ['ns/a']);
});
