import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type LabelledObject, NOT_ADMITTED } from './object.ts';
import { countObject, noObjects, objectCounter } from './counts.ts';
import type { Plan } from './reconcile.ts';
import { fieldPlan } from './testing/plans.ts';

const object = (owned: readonly string[], deleting = false): LabelledObject => ({
  key: 'o',
  name: 'o',
  namespace: '',
  uid: 'u',
  resourceVersion: '1',
  labels: {},
  annotations: {},
  ownedLabels: owned,
  ownedAnnotations: [],
  admitted: NOT_ADMITTED,
  deleting,
});
const plan = (
  fields: { contested?: string[]; stale?: string[]; missing?: string[]; held?: string[]; waiting?: boolean },
): Plan => {
  const { waiting = false, ...lists } = fields;
  return { labels: fieldPlan(lists), annotations: fieldPlan(), waiting, problems: [], markers: [] };
};

test('an object counts as managed when labeller owns a label, pending when an apply would change it, in conflict when another manager set a wanted key', () => {
  const counts = noObjects();
  countObject(counts, object([]), plan({}));
  countObject(counts, object(['team']), plan({}));
  countObject(counts, object(['team']), plan({ stale: ['team'] }));
  countObject(counts, object([]), plan({ missing: ['team'] }));
  countObject(counts, object([]), plan({ contested: ['team'], missing: ['team'] }));
  countObject(counts, object([]), plan({ contested: ['team'] }));
  countObject(counts, object(['team']), { field: 'labels', problem: 'bad value' });
  assert.deepEqual(counts, { seen: 7, managed: 3, pending: 3, conflicts: 2, invalid: 1, held: 0 });
});

test('held labels: pending while a cache has still to list, held for good when a related kind cannot be read; an object being deleted is only seen', () => {
  const counts = noObjects();
  countObject(counts, object([]), plan({ held: ['root'], waiting: true }));
  countObject(counts, object(['root']), plan({ held: ['root'] }));
  countObject(counts, object(['team'], true), plan({ missing: ['team'] }));
  assert.deepEqual(counts, { seen: 3, managed: 1, pending: 1, conflicts: 0, invalid: 0, held: 1 });
});

test('objectCounter plans each cached object once, and again only when it was replaced', () => {
  let planned = 0;
  const count = objectCounter(() => {
    planned++;
    return plan({ missing: ['team'] });
  });
  const cache = [object([]), object(['team'])];
  assert.deepEqual(count(cache).counts, { seen: 2, managed: 1, pending: 2, conflicts: 0, invalid: 0, held: 0 });
  assert.deepEqual(count(cache).counts, { seen: 2, managed: 1, pending: 2, conflicts: 0, invalid: 0, held: 0 });
  assert.equal(planned, 2);
  cache[0] = object(['team']);
  assert.equal(count(cache).counts.managed, 2);
  assert.equal(planned, 3);
});

test('objectCounter plans again an object whose verdict waits on a cache of related objects', () => {
  let waiting = true;
  let planned = 0;
  const count = objectCounter(() => {
    planned++;
    return plan({ held: ['root'], waiting });
  });
  const cache = [object([])];
  assert.equal(count(cache).counts.pending, 1);
  waiting = false;
  assert.deepEqual([count(cache).counts.pending, count(cache).counts.held], [0, 1]);
  assert.equal(planned, 2, 'planned again once, then kept');
});

test('an object carrying only keys labeller admission policies set counts as managed', () => {
  const counts = noObjects();
  countObject(counts, Object.assign(object([]), { admitted: { labels: ['team'], annotations: [] } }), plan({}));
  assert.equal(counts.managed, 1);
});
