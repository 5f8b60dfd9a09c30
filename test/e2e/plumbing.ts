// The API plumbing labeller stands on, exercised through src/kube against a real API server.
// Shared by the Node test and the Deno smoke, so both runtimes prove the same things.
import assert from 'node:assert/strict';
import { MetadataApi } from '../../src/kube/api.ts';
import type { KubeClient } from '../../src/kube/client.ts';
import { ApiError } from '../../src/apimachinery/errors.ts';
import type { PartialObjectMetadata, WatchEvent } from '../../src/apimachinery/objects.ts';
import { CONFIGMAPS as configmaps, DEPLOYMENTS as deployments } from '../cluster/resources.ts';

const json = (body: object) => ({ headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

/** A streaming list of `api`'s objects to the bookmark that ends it (`ADDED <name>`…, `end`), or why it was refused. */
async function streamingList(api: MetadataApi): Promise<string[] | unknown> {
  const abort = new AbortController();
  const seen: string[] = [];
  try {
    const events = await api.watch({
      sendInitialEvents: true,
      timeoutSeconds: 60,
      idleMs: 70_000,
      signal: abort.signal,
    });
    for await (const batch of events) {
      for (const event of batch) {
        if (event.type === 'BOOKMARK') {
          if (event.object.metadata.annotations?.['k8s.io/initial-events-end'] !== 'true') continue;
          seen.push('end');
          abort.abort();
        } else if (event.type !== 'ERROR') seen.push(`${event.type} ${event.object.metadata.name}`);
      }
    }
    return seen.sort();
  } catch (error) {
    return error;
  }
}

/** Runs every step, asserting as it goes; returns the server version it talked to. */
export async function plumbing(client: KubeClient, namespace: string): Promise<string> {
  const { gitVersion } = await client.json<{ gitVersion: string }>('GET', '/version');

  const cms = new MetadataApi(client, configmaps, namespace);
  const deploys = new MetadataApi(client, deployments, namespace);
  await client.json(
    'POST',
    cms.path(),
    json({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'first' }, data: { secret: 'x'.repeat(1000) } }),
  );
  const deployment = await client.json<PartialObjectMetadata>(
    'POST',
    deploys.path(),
    json({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web', labels: { app: 'web' } },
      spec: {
        selector: { matchLabels: { app: 'web' } },
        template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'web', image: 'nginx' }] } },
      },
    }),
  );

  // List, metadata-only: the server projects to PartialObjectMetadata, no data or spec.
  const list = await cms.list({ limit: 500 });
  assert.equal(list.kind, 'PartialObjectMetadataList');
  assert.equal(list.apiVersion, 'meta.k8s.io/v1');
  const first = list.items.find((i) => i.metadata.name === 'first');
  assert.ok(first, 'the ConfigMap is listed');
  assert.equal(first.kind, 'PartialObjectMetadata');
  assert.ok(!('data' in first), 'no data in a metadata-only list');
  // The server answers an empty metadata-only list with `"items": null`; the API layer gives [].
  assert.deepEqual((await cms.list({ labelSelector: 'no-such-label' })).items, []);
  const deployList = await deploys.list();
  assert.ok(deployList.items.every((i) => !('spec' in i)), 'no spec in a metadata-only list');

  // Watch, metadata-only, from the list's resourceVersion: sees the next change only.
  const abort = new AbortController();
  const events: WatchEvent[] = [];
  const watching = (async () => {
    for await (
      const batch of await cms.watch({
        resourceVersion: list.metadata.resourceVersion,
        timeoutSeconds: 60,
        idleMs: 70_000,
        signal: abort.signal,
      })
    ) {
      events.push(...batch);
      if (batch.some((event) => event.type === 'ADDED' && event.object.metadata.name === 'second')) abort.abort();
    }
  })();
  await client.json(
    'POST',
    cms.path(),
    json({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'second' }, data: { big: 'y'.repeat(1000) } }),
  );
  await Promise.race([
    watching,
    new Promise((_, reject) => setTimeout(() => reject(new Error('no watch event within 10 s')), 10_000).unref()),
  ]);
  const added = events.find((e) => e.type === 'ADDED' && e.object.metadata.name === 'second');
  assert.ok(added && added.type === 'ADDED');
  assert.equal(added.object.kind, 'PartialObjectMetadata');
  assert.ok(!('data' in added.object), 'no data in a metadata-only watch event');
  assert.ok(
    !events.some((e) => e.type !== 'BOOKMARK' && 'metadata' in e.object && e.object.metadata.name === 'first'),
    'the watch starts after the list',
  );

  // A streaming list (WatchList): the objects as ADDED events, then the bookmark that ends them; a
  // server with the feature gate off (1.30, 1.31, 1.33) refuses the parameters with 422.
  const minor = Number(/^v1\.(\d+)\./.exec(gitVersion)?.[1]);
  const streamed = await streamingList(cms);
  if (minor === 32 || minor >= 34) {
    assert.ok(Array.isArray(streamed), `${gitVersion} serves streaming lists: ${String(streamed)}`);
    assert.deepEqual(streamed, ['ADDED first', 'ADDED second', 'end'], 'every object, then the bookmark');
  } else {
    assert.ok(streamed instanceof ApiError && streamed.status === 422, `${gitVersion}: ${String(streamed)}`);
  }

  // Server-side apply of one label under labeller's field manager, guarded by the uid.
  const applied = await deploys.apply(
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web', namespace, uid: deployment.metadata.uid, labels: { 'example.com/managed': 'yes' } },
    },
    { fieldManager: 'labeller', force: false },
  );
  assert.equal(applied.kind, 'PartialObjectMetadata');
  assert.deepEqual(applied.metadata.labels, { app: 'web', 'example.com/managed': 'yes' });
  // The answer is read without managedFields (the API server writes them last: writeanswer.ts);
  // the object has them.
  assert.equal(applied.metadata.managedFields, undefined);
  assert.match(applied.metadata.resourceVersion ?? '', /^\d+$/);
  const read = await deploys.get('web');
  assert.equal(read.metadata.resourceVersion, applied.metadata.resourceVersion);
  const entry = read.metadata.managedFields?.find((m) => m.manager === 'labeller');
  assert.ok(entry, 'labeller has a managedFields entry');
  assert.equal(entry.operation, 'Apply');
  assert.deepEqual(Object.keys(entry.fieldsV1?.['f:metadata']?.['f:labels'] ?? {}), ['f:example.com/managed']);

  // The uid guard: an apply for a deleted object fails instead of recreating it.
  await client.request('DELETE', cms.path('first'));
  const gone = await cms.apply(
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'first', namespace, uid: first.metadata.uid, labels: { a: 'b' } },
    },
    { fieldManager: 'labeller', force: true },
  ).then(() => undefined, (error: unknown) => error);
  assert.ok(gone instanceof ApiError, `apply to a deleted object must fail, got ${String(gone)}`);
  const relist = await cms.list();
  assert.ok(!relist.items.some((i) => i.metadata.name === 'first'), 'the deleted ConfigMap was not recreated');

  return gitVersion;
}
