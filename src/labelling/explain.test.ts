import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ConflictPolicy } from '../config/model.ts';
import { compileTemplate } from '../config/template.ts';
import { createLogger } from '../util/log.ts';
import { explain, type ReportedFight } from './explain.ts';
import type { KeyOwner, LabelledObject } from './object.ts';
import type { MetadataClient, RelatedView } from './ports.ts';
import { Reconciler } from './reconcile.ts';
import { labelledObject } from './testing/objects.ts';

const noClient: MetadataClient = {
  apply: () => Promise.reject(new Error('explain never writes')),
  remove: () => Promise.reject(new Error('explain never writes')),
  annotations: () => Promise.reject(new Error('explain never reads')),
};

const SOURCE = new Map([['red', { cc: 'cc-1' }]]);

function reconciler(labels: Record<string, string>, conflicts: ConflictPolicy = 'force', view?: RelatedView) {
  return new Reconciler({
    kind: { apiVersion: 'apps/v1', kind: 'Deployment', resource: 'deployments', group: 'apps' },
    labels: new Map(
      Object.entries(labels).map((
        [key, source],
      ) => [key, { ...compileTemplate(source, { sources: new Set(['catalog']) }), where: `kinds[0].labels.${key}` }]),
    ),
    conflicts,
    dryRun: false,
    client: noClient,
    log: createLogger({ level: 'error', format: 'json', write: () => {} }),
    related: view && (() => view),
    sources: {
      lookups: {
        loaded: (name) => name === 'catalog',
        lookup: (_name, key, field) => {
          const entry = SOURCE.get(key);
          return field === undefined ? undefined : entry?.[field as 'cc'];
        },
      },
      index: { record: () => {} } as never,
    },
  });
}

const NAMESPACE: RelatedView = {
  objects: { namespace: { kind: 'Namespace', name: 'shop', labels: { team: 'red' }, annotations: {} } },
  held: new Map(),
};

function explained(
  labels: Record<string, string>,
  object: LabelledObject,
  owners: Record<string, KeyOwner[]>,
  options: { conflicts?: ConflictPolicy; view?: RelatedView; fights?: Map<string, ReportedFight> } = {},
) {
  const r = reconciler(labels, options.conflicts, options.view ?? NAMESPACE);
  return explain({
    traces: r.trace(object),
    plan: r.plan(object),
    values: { labels: object.labels, annotations: {} },
    owners: { labels: new Map(Object.entries(owners)), annotations: new Map() },
    admitted: object.admitted,
    fieldManager: 'labeller',
    conflicts: options.conflicts ?? 'force',
    fights: options.fights ?? new Map(),
  });
}

const OURS: KeyOwner = { manager: 'labeller', operation: 'Apply' };

test('each key: its rule, template, what it read, the value wanted and there, owners, state and next apply', () => {
  const result = explained(
    { cc: '{{catalog[namespace.labels.team].cc}}', app: '{{labels.app}}' },
    labelledObject('web', { labels: { cc: 'cc-1', app: 'web' }, ownedLabels: ['cc', 'app'] }),
    { cc: [OURS], app: [OURS] },
  );
  assert.equal(result.pending, false);
  const [cc, app] = result.keys;
  assert.deepEqual(cc, {
    field: 'labels',
    key: 'cc',
    rule: 'kinds[0].labels.cc',
    template: '{{catalog[namespace.labels.team].cc}}',
    inputs: [
      { from: 'namespace', object: { kind: 'Namespace', name: 'shop' }, read: 'labels.team', value: 'red' },
      { from: 'source', source: 'catalog', key: 'red', field: 'cc', value: 'cc-1' },
    ],
    desired: 'cc-1',
    value: 'cc-1',
    owners: [OURS],
    state: 'applied',
    next: 'nothing',
  });
  assert.deepEqual(app?.inputs, [{ from: 'object', map: 'labels', key: 'app', value: 'web' }]);
});

test('a key another manager set: taken over under force, left under skip, left for a while in a fight', () => {
  const object = labelledObject('web', { labels: { team: 'blue' } });
  const owners = { team: [{ manager: 'argocd-controller', operation: 'Apply' }] };
  const force = explained({ team: 'red' }, object, owners).keys[0];
  assert.equal(force?.state, 'pending');
  assert.equal(force?.next, 'set to "red", taken over from argocd-controller (conflicts: force)');
  const skip = explained({ team: 'red' }, object, owners, { conflicts: 'skip' });
  assert.equal(skip.keys[0]?.state, 'contested');
  assert.equal(skip.keys[0]?.why, 'set to "blue" by argocd-controller');
  assert.equal(skip.pending, false);
  assert.equal(explained({ team: 'red' }, object, owners).pending, true);
  const fighting = explained({ team: 'red' }, object, owners, {
    fights: new Map([['labels/team', { manager: 'argocd-controller', atMs: 0 }]]),
  });
  const fight = fighting.keys[0];
  assert.equal(fight?.state, 'fight');
  assert.match(fight?.next ?? '', /left to argocd-controller until the backoff ends/);
  assert.equal(fighting.pending, false, "a key left in a fight is not the next apply's");
});

test('held, invalid and unwanted keys say why; a stale key labeller owns is removed unless co-owned', () => {
  const unreadable: RelatedView = { objects: {}, held: new Map([['namespace', 'unavailable']]) };
  const object = labelledObject('web', {
    labels: { cc: 'cc-0', old: 'x', shared: 'y' },
    ownedLabels: ['cc', 'old', 'shared'],
  });
  const owners = { cc: [OURS], old: [OURS], shared: [OURS, { manager: 'kubectl', operation: 'Update' }] };
  const held = explained({ cc: '{{catalog[namespace.labels.team].cc}}' }, object, owners, {
    view: unreadable,
  });
  assert.equal(held.keys[0]?.state, 'held');
  assert.equal(held.keys[0]?.next, 'kept as it is');
  assert.match(held.keys[0]?.why ?? '', /namespace object cannot be read/);
  assert.deepEqual(held.stale.map((s) => [s.key, s.next]), [
    ['old', 'removed'],
    ['shared', 'let go; kept, since kubectl owns it too'],
  ]);

  const invalid = explained({ app: '{{labels.app}}-' }, labelledObject('web', { labels: { app: 'web' } }), {});
  assert.equal(invalid.keys[0]?.state, 'invalid');
  assert.equal(invalid.keys[0]?.next, 'not added');

  const unwanted = explained(
    { app: '{{owner.name}}' },
    labelledObject('web', { labels: { app: 'x' }, ownedLabels: ['app'] }),
    {
      app: [OURS],
    },
    { view: { objects: {}, held: new Map() } },
  );
  assert.equal(unwanted.keys[0]?.state, 'unwanted');
  assert.equal(unwanted.keys[0]?.why, 'the object has no owner, so the key is not wanted on this object');
  assert.equal(unwanted.keys[0]?.next, 'removed');
  assert.equal(unwanted.pending, true);
});

test("a key an admission policy set is labeller's: owned by it at admission; dropped from the config, it is stale and removed", () => {
  const object = labelledObject('web', {
    labels: { team: 'red', tier: 'web' },
    admitted: { labels: ['team', 'tier'], annotations: [], marked: ['labels'] },
  });
  const result = explained({ team: '{{namespace.labels.team}}' }, object, {});
  const [team] = result.keys;
  assert.deepEqual([team?.state, team?.owners, team?.next], [
    'applied',
    [{ manager: 'labeller', operation: 'Admission' }],
    'nothing',
  ]);
  assert.deepEqual(result.stale.map((k) => [k.key, k.owners, k.next]), [[
    'tier',
    [{ manager: 'labeller', operation: 'Admission' }],
    'removed',
  ]]);
  assert.equal(result.pending, true);
});

test("a protected key says so: what the API server does with another identity's change of it", () => {
  const r = reconciler({ team: 'payments', tier: 'web' });
  const object = labelledObject('web', { labels: { team: 'payments', tier: 'web' }, ownedLabels: ['team', 'tier'] });
  const { keys } = explain({
    traces: r.trace(object),
    plan: r.plan(object),
    values: { labels: object.labels, annotations: {} },
    owners: { labels: new Map([['team', [OURS]], ['tier', [OURS]]]), annotations: new Map() },
    admitted: object.admitted,
    fieldManager: 'labeller',
    conflicts: 'force',
    fights: new Map(),
    protect: { mode: 'deny', labels: new Set(['team']), annotations: new Set() },
  });
  assert.deepEqual(keys.map((k) => [k.key, k.protection]), [['team', 'deny'], ['tier', undefined]]);
});
