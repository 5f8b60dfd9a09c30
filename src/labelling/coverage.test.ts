import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compileTemplate } from '../config/template.ts';
import { createLogger } from '../util/log.ts';
import { keysCut, keyStates, shortfallReason } from './coverage.ts';
import { CacheCounter } from './counts.ts';
import type { LabelledObject } from './object.ts';
import type { MetadataClient, RelatedView } from './ports.ts';
import { Reconciler } from './reconcile.ts';
import { labelledObject } from './testing/objects.ts';

const noClient: MetadataClient = {
  apply: () => Promise.reject(new Error('no writes')),
  remove: () => Promise.reject(new Error('no writes')),
  annotations: () => Promise.reject(new Error('no reads')),
};

function reconciler(labels: Record<string, string>, view: RelatedView) {
  return new Reconciler({
    kind: { apiVersion: 'v1', kind: 'Pod', resource: 'pods', group: '' },
    labels: new Map(Object.entries(labels).map(([key, source]) => [key, compileTemplate(source)])),
    conflicts: 'skip',
    dryRun: false,
    client: noClient,
    log: createLogger({ level: 'error', format: 'json', write: () => {} }),
    related: () => view,
  });
}

const LABELS = { team: '{{namespace.labels.team}}', tier: 'web', app: '{{labels.app}}' };
const KEYS = Object.keys(LABELS);
const namespace = (labels: Record<string, string>): RelatedView => ({
  objects: { namespace: { kind: 'Namespace', name: 'shop', labels, annotations: {} } },
  held: new Map(),
});

test('each key of an object: covered, or pending, contested, held, invalid or unwanted', () => {
  const r = reconciler(LABELS, namespace({ team: 'red' }));
  const states = (object: LabelledObject) => keyStates(r.plan(object), object, KEYS);
  assert.deepEqual(states(labelledObject('a', { labels: { team: 'red', tier: 'web', app: 'a' } })), [
    'covered',
    'covered',
    'covered',
  ]);
  // tier set by someone else to another value (skip leaves it); app not on the object: not wanted.
  assert.deepEqual(states(labelledObject('b', { labels: { tier: 'db' } })), ['pending', 'contested', 'unwanted']);
  const held = reconciler(LABELS, { objects: {}, held: new Map([['namespace', 'unavailable']]) });
  const object = labelledObject('c', { labels: { app: 'bad value!' } });
  assert.deepEqual(keyStates(held.plan(object), object, KEYS), ['held', 'pending', 'invalid']);
});

test('the cache counter: per key, objects counted (not those being deleted) and those covered', () => {
  const r = reconciler(LABELS, namespace({ team: 'red' }));
  const objects = new Map(
    [
      labelledObject('a', { labels: { team: 'red', tier: 'web', app: 'a' } }),
      labelledObject('b', { labels: { team: 'red' } }),
      labelledObject('gone', { labels: {}, deleting: true }),
    ].map((object) => [object.key, object]),
  );
  const count = new CacheCounter((object) => r.plan(object), KEYS, {
    get: (key) => objects.get(key),
    keys: () => objects.keys(),
  });
  assert.deepEqual(count.read().coverage, [
    { key: 'team', objects: 2, covered: 2 },
    { key: 'tier', objects: 2, covered: 1 },
    { key: 'app', objects: 2, covered: 1 },
  ]);
});

test('reasons name what is missing, without object names, so many objects share one', () => {
  const r = reconciler(LABELS, namespace({}));
  const object = labelledObject('a');
  const traces = r.trace(object);
  const reason = (key: string) =>
    shortfallReason(
      keyStates(r.plan(object), object, [key])[0] as 'unwanted',
      traces.find((t) => t.key === key),
    );
  assert.equal(reason('team'), 'unwanted: its namespace has no label team');
  assert.equal(reason('app'), 'unwanted: the object has no label app');
  assert.equal(shortfallReason('pending', undefined), 'pending');
});

test('keysCut: the configured keys past the limit in alphabetical order, counting the labels an apply adds', () => {
  const r = reconciler(LABELS, namespace({ team: 'red' }));
  const object = labelledObject('a', { labels: { app: 'a', 'a.example.com/x': '1', 'b.example.com/y': '2' } });
  // After the apply: a.example.com/x, app, b.example.com/y, team, tier (5 labels).
  assert.equal(keysCut(r.plan(object), object, KEYS, 5), undefined, 'within the limit');
  assert.deepEqual(keysCut(r.plan(object), object, KEYS, 3), ['team', 'tier']);
  assert.deepEqual(keysCut(r.plan(object), object, KEYS, 1), ['team', 'tier', 'app']);
});
