import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PartialObjectMetadata } from '../kube/objects.ts';
import { createLogger } from '../util/log.ts';
import { Informer } from './informer.ts';
import { metadataOf, page, pod, ScriptedApi } from './testing/scripted.ts';
import { SharedInformers, watches } from './shared.ts';

type Meta = PartialObjectMetadata['metadata'];
const log = createLogger({ level: 'error', format: 'json', write: () => {} });
const informer = (api: ScriptedApi, name = 'pods'): Informer<Meta> =>
  new Informer({ name, api, project: metadataOf, log });

test('an id is made and started once, however many read it; a shared informer is not started again', () => {
  const started: string[] = [];
  const shared = new SharedInformers<Meta>((i) => started.push(i.name));
  let made = 0;
  const make = () => {
    made++;
    return informer(new ScriptedApi([]), 'replicasets.apps');
  };
  const first = shared.ensure('replicasets.apps', make);
  assert.equal(shared.ensure('replicasets.apps', make), first);
  assert.deepEqual([made, started], [1, ['replicasets.apps']]);
  const own = informer(new ScriptedApi([]), 'deployments.apps');
  shared.share('deployments.apps', own);
  assert.equal(shared.ensure('deployments.apps', make), own, "a controller's own cache serves its readers");
  assert.deepEqual(started, ['replicasets.apps'], 'its controller runs it');
});

test('listOnce fills the store and tells listeners; watches() maps each change to keys to enqueue', async () => {
  const source = informer(new ScriptedApi([page('5', [pod('a'), pod('b')])]));
  const queued: string[] = [];
  watches(
    source,
    (
      change,
    ) => (change.type === 'resync'
      ? change.changed.map((key) => [{ enqueue: (k: string) => queued.push(`x/${k}`) }, key] as const)
      : []),
  );
  await source.listOnce(new AbortController().signal);
  await source.synced;
  assert.deepEqual(queued, ['x/ns/a', 'x/ns/b']);
  assert.equal(source.store.size, 2);
});

test('a failed listOnce rejects it and `synced`, so readers waiting on the cache fail too', async () => {
  const failing = informer(new ScriptedApi([new Error('403 Forbidden')]));
  await assert.rejects(failing.listOnce(new AbortController().signal), /403 Forbidden/);
  await assert.rejects(failing.synced, /403 Forbidden/);
});

test('an informer withdrawn from its id no longer serves it: the next one shared does, or one ensure makes', () => {
  const shared = new SharedInformers<Meta>(() => {});
  const old = informer(new ScriptedApi([]), 'deployments.apps');
  const next = informer(new ScriptedApi([]), 'deployments.apps');
  shared.share('deployments.apps', old);
  shared.unshare('deployments.apps', next);
  assert.equal(shared.get('deployments.apps'), old, 'only the informer shared is withdrawn');
  shared.unshare('deployments.apps', old);
  shared.share('deployments.apps', next);
  assert.equal(shared.get('deployments.apps'), next);
  shared.unshare('deployments.apps', next);
  const made = informer(new ScriptedApi([]), 'deployments.apps');
  assert.equal(shared.ensure('deployments.apps', () => made), made);
});
