import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type LabelledObject, NOT_ADMITTED } from './object.ts';
import fc from 'fast-check';
import { CacheCounter, type CountedCache } from './counts.ts';
import type { Plan } from './reconcile.ts';
import { fieldPlan } from './testing/plans.ts';

let made = 0;
const object = (owned: readonly string[], deleting = false, labels: Record<string, string> = {}): LabelledObject => ({
  key: `o${made}`,
  name: `o${made++}`,
  namespace: '',
  uid: 'u',
  resourceVersion: '1',
  labels,
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

/** A cache of `objects`, each planned as its pair says. */
function cacheOf(pairs: readonly (readonly [LabelledObject, Plan])[]): CountedCache & {
  readonly objects: Map<string, LabelledObject>;
  readonly plan: (object: LabelledObject) => Plan;
} {
  const plans = new Map(pairs.map(([object, plan]) => [object, plan]));
  const objects = new Map(pairs.map(([object], i) => [`k${i}`, object]));
  return {
    objects,
    get: (key) => objects.get(key),
    keys: () => objects.keys(),
    plan: (object) => plans.get(object) ?? plan({}),
  };
}

const countsOf = (pairs: readonly (readonly [LabelledObject, Plan])[]) => {
  const cache = cacheOf(pairs);
  return new CacheCounter(cache.plan, [], cache).read().counts;
};

test('an object counts as managed when labeller owns a label, pending when an apply would change it, in conflict when another manager set a wanted key', () => {
  assert.deepEqual(
    countsOf([
      [object([]), plan({})],
      [object(['team']), plan({})],
      [object(['team']), plan({ stale: ['team'] })],
      [object([]), plan({ missing: ['team'] })],
      [object([]), plan({ contested: ['team'], missing: ['team'] })],
      [object([]), plan({ contested: ['team'] })],
      [object(['team']), { field: 'labels', problem: 'bad value' }],
    ]),
    { seen: 7, managed: 3, pending: 3, conflicts: 2, invalid: 1, held: 0 },
  );
});

test('held labels: pending while a cache has still to list, held for good when a related kind cannot be read; an object being deleted is only seen', () => {
  assert.deepEqual(
    countsOf([
      [object([]), plan({ held: ['root'], waiting: true })],
      [object(['root']), plan({ held: ['root'] })],
      [object(['team'], true), plan({ missing: ['team'] })],
    ]),
    { seen: 3, managed: 1, pending: 1, conflicts: 0, invalid: 0, held: 1 },
  );
});

test('an object carrying only keys labeller admission policies set counts as managed', () => {
  const admitted = Object.assign(object([]), { admitted: { labels: ['team'], annotations: [], marked: [] } });
  assert.equal(countsOf([[admitted, plan({})]]).managed, 1);
});

test('a read plans only the objects marked changed since the last: replaced, gone, or queued again', () => {
  let planned = 0;
  let missing: string[] = ['team'];
  const objects = new Map([['a', object([])], ['b', object(['team'])]]);
  const counter = new CacheCounter(
    () => {
      planned++;
      return plan({ missing });
    },
    [],
    { get: (key) => objects.get(key), keys: () => objects.keys() },
  );
  assert.deepEqual(counter.read().counts, { seen: 2, managed: 1, pending: 2, conflicts: 0, invalid: 0, held: 0 });
  assert.deepEqual(counter.read().counts.pending, 2);
  assert.equal(planned, 2, 'nothing marked, nothing planned');
  objects.set('a', object(['team']));
  counter.changed('a');
  assert.equal(counter.read().counts.managed, 2);
  assert.equal(planned, 3);
  // Its namespace changed, say: the controller queued it again.
  missing = [];
  counter.changed('b');
  assert.equal(counter.read().counts.pending, 1);
  objects.delete('a');
  counter.changed('a');
  counter.changed('gone before it was ever counted');
  assert.deepEqual(counter.read().counts, { seen: 1, managed: 1, pending: 0, conflicts: 0, invalid: 0, held: 0 });
  counter.changedAll();
  assert.deepEqual(counter.read().counts, { seen: 1, managed: 1, pending: 0, conflicts: 0, invalid: 0, held: 0 });
  assert.equal(planned, 5);
});

test('a verdict that waits on a cache of related objects is planned again at each read until it does not', () => {
  let waiting = true;
  let planned = 0;
  const objects = new Map([['a', object([])]]);
  const counter = new CacheCounter(
    () => {
      planned++;
      return plan({ held: ['root'], waiting });
    },
    [],
    { get: (key) => objects.get(key), keys: () => objects.keys() },
  );
  assert.equal(counter.read().counts.pending, 1);
  assert.equal(counter.read().counts.pending, 1);
  waiting = false;
  assert.deepEqual([counter.read().counts.pending, counter.read().counts.held], [0, 1]);
  assert.equal(planned, 3, 'planned at each read while waiting, then kept');
});

test('coverage past the keys that fit in one number: the same counts as with few', () => {
  const keys = Array.from({ length: 60 }, (_, i) => `k${i}`);
  const labels = Object.fromEntries(keys.filter((_, i) => i % 3 === 0).map((key) => [key, 'v']));
  const carrying = object([], false, labels);
  const wanted: Plan = {
    ...plan({}),
    labels: fieldPlan({ rendered: new Map(keys.map((key) => [key, 'v'])) }),
  } as Plan;
  const objects = new Map([['a', carrying], ['b', object([])]]);
  const counter = new CacheCounter(() => wanted, keys, { get: (key) => objects.get(key), keys: () => objects.keys() });
  const coverage = counter.read().coverage;
  assert.deepEqual(coverage.map((c) => c.covered), keys.map((_, i) => (i % 3 === 0 ? 1 : 0)));
  objects.delete('a');
  counter.changed('a');
  assert.deepEqual(counter.read().coverage.map((c) => [c.objects, c.covered]), keys.map(() => [1, 0]));
});

test('counted as the cache changes, the counts are those of counting it afresh', () => {
  const KEYS = ['team', 'tier'];
  const shapes: Plan[] = [
    plan({}),
    plan({ missing: ['team'] }),
    plan({ contested: ['tier'] }),
    plan({ held: ['team'] }),
    plan({ held: ['team'], waiting: true }),
    { field: 'labels', problem: 'bad' },
  ];
  const op = fc.record({
    key: fc.integer({ min: 0, max: 7 }),
    kind: fc.constantFrom('set', 'delete', 'requeue', 'all'),
    owned: fc.boolean(),
    deleting: fc.boolean(),
    carries: fc.subarray(KEYS),
    shape: fc.integer({ min: 0, max: shapes.length - 1 }),
  });
  fc.assert(fc.property(fc.array(op, { maxLength: 40 }), (ops) => {
    const objects = new Map<string, LabelledObject>();
    const plans = new Map<LabelledObject, number>();
    let shift = 0;
    const planOf = (o: LabelledObject) => shapes[(plans.get(o)! + shift) % shapes.length]!;
    const withCoverage = (p: Plan): Plan =>
      'problem' in p ? p : { ...p, labels: { ...p.labels, rendered: new Map(KEYS.map((k) => [k, 'v'])) } } as Plan;
    const cache = { get: (key: string) => objects.get(key), keys: () => objects.keys() };
    const counter = new CacheCounter((o) => withCoverage(planOf(o)), KEYS, cache);
    for (const { key, kind, owned, deleting, carries, shape } of ops) {
      const name = `k${key}`;
      if (kind === 'set') {
        const made = object(owned ? ['team'] : [], deleting, Object.fromEntries(carries.map((k) => [k, 'v'])));
        plans.set(made, shape);
        objects.set(name, made);
        counter.changed(name);
      } else if (kind === 'delete') {
        objects.delete(name);
        counter.changed(name);
      } else if (kind === 'requeue') {
        // What every object should carry changed; the controller queues each again.
        shift++;
        for (const k of objects.keys()) counter.changed(k);
      } else {
        shift++;
        counter.changedAll();
      }
      const fresh = new CacheCounter((o) => withCoverage(planOf(o)), KEYS, cache).read();
      assert.deepEqual(counter.read(), fresh);
    }
  }));
});

test('settle counts as read does, yielding to the event loop between slices', async () => {
  const objects = new Map(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, object(i % 2 === 0 ? ['team'] : [])]));
  const cache = { get: (key: string) => objects.get(key), keys: () => objects.keys() };
  const slow = () => {
    const until = performance.now() + 0.002;
    while (performance.now() < until);
    return plan({ missing: ['team'] });
  };
  let ticks = 0;
  const ticking = setInterval(() => ticks++, 1);
  try {
    const settled = await new CacheCounter(slow, [], cache).settle(2);
    assert.deepEqual(settled, new CacheCounter(slow, [], cache).read());
    assert.ok(ticks > 0, 'timers ran while it counted');
  } finally {
    clearInterval(ticking);
  }
});

test('marks never read are bounded: past the objects counted, every object is planned again instead', () => {
  const objects = new Map([['a', object(['team'])]]);
  const counter = new CacheCounter(() => plan({}), [], { get: (key) => objects.get(key), keys: () => objects.keys() });
  for (let i = 0; i < 100_000; i++) counter.changed(`churned-${i}`);
  assert.deepEqual(counter.read().counts, { seen: 1, managed: 1, pending: 0, conflicts: 0, invalid: 0, held: 0 });
});
