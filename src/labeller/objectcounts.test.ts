import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { LabelledObject } from './object.ts';
import { countObject, noObjects, objectCounter } from './objectcounts.ts';
import type { Plan } from './reconcile.ts';

const object = (owned: readonly string[]): LabelledObject => ({
  key: 'o',
  name: 'o',
  namespace: '',
  uid: 'u',
  resourceVersion: '1',
  labels: {},
  annotations: {},
  owned,
});
const plan = (fields: { contested?: string[]; stale?: string[]; missing?: string[] }): Plan => ({
  rendered: new Map(),
  desired: new Map(),
  contested: [],
  stale: [],
  missing: [],
  ...fields,
});

test('an object counts as managed when labeller owns a label, pending when an apply would change it, in conflict when another manager set a wanted key', () => {
  const counts = noObjects();
  countObject(counts, object([]), plan({}));
  countObject(counts, object(['team']), plan({}));
  countObject(counts, object(['team']), plan({ stale: ['team'] }));
  countObject(counts, object([]), plan({ missing: ['team'] }));
  countObject(counts, object([]), plan({ contested: ['team'], missing: ['team'] }));
  countObject(counts, object([]), plan({ contested: ['team'] }));
  countObject(counts, object(['team']), { problem: 'bad value' });
  assert.deepEqual(counts, { seen: 7, managed: 3, pending: 3, conflicts: 2, invalid: 1 });
});

test('objectCounter plans each cached object once, and again only when it was replaced', () => {
  let planned = 0;
  const count = objectCounter(() => {
    planned++;
    return plan({ missing: ['team'] });
  });
  const cache = [object([]), object(['team'])];
  assert.deepEqual(count(cache), { seen: 2, managed: 1, pending: 2, conflicts: 0, invalid: 0 });
  assert.deepEqual(count(cache), { seen: 2, managed: 1, pending: 2, conflicts: 0, invalid: 0 });
  assert.equal(planned, 2);
  cache[0] = object(['team']);
  assert.equal(count(cache).managed, 2);
  assert.equal(planned, 3);
});
