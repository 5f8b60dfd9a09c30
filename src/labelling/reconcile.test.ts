import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createLogger } from '../util/log.ts';
import type { ConflictPolicy } from '../config/model.ts';
import { type LabelledObject, projector } from './object.ts';
import { markerKeys } from './admitted.ts';
import { objectKey } from '../runtime/store.ts';
import { digest } from './digest.ts';
import {
  type AppliedMetadata,
  type ApplyTarget,
  LabelConflict,
  type Metadata,
  type MetadataClient,
  ObjectChanged,
  ObjectGone,
  type RelatedView,
} from './ports.ts';
import { needsApply, Reconciler, type ReconcilerOptions } from './reconcile.ts';
import { compileTemplate } from '../config/template.ts';
import { FIGHT_BACKOFF_MS, FIGHT_RETAKES, FightTracker, RETAKES_PER_MINUTE } from './fights.ts';
import { LookupIndex } from './lookupindex.ts';
import { labelledObject } from './testing/objects.ts';
import { fieldPlan } from './testing/plans.ts';

type Labels = Readonly<Record<string, string>>;

interface Call {
  readonly target: ApplyTarget;
  readonly labels: Labels;
  readonly annotations: Labels;
  readonly options: Parameters<MetadataClient['apply']>[2];
}

/**
 * Records every apply; answers `after` (default: the object's labels overlaid with the applied
 * ones), the applied annotations (or `afterAnnotations`), or throws `failure`. `stored` is what
 * a read of annotations answers.
 */
class FakeClient implements MetadataClient {
  readonly calls: Call[] = [];
  readonly reads: (readonly string[])[] = [];
  failure: Error | undefined;
  after: Labels | undefined;
  afterAnnotations: Labels | undefined;
  stored: Labels = {};
  base: Labels = {};
  /** Who a dry run without force finds holding the keys it applies (a 409 naming them), when set. */
  holders: LabelConflict['owners'] | undefined;

  async apply(
    target: ApplyTarget,
    { labels, annotations }: Metadata,
    options: Call['options'],
  ): Promise<AppliedMetadata> {
    this.calls.push({ target, labels, annotations, options });
    if (this.failure) throw this.failure;
    if (options.dryRun && !options.force && this.holders) throw new LabelConflict('conflict', this.holders);
    return {
      labels: this.after ?? { ...this.base, ...labels },
      annotations: this.afterAnnotations ?? annotations,
      resourceVersion: '2',
    };
  }

  /** Records every removal; answers the object's labels without the keys removed, or throws `removeFailure`. */
  readonly removals: {
    readonly version: string;
    readonly keys: Parameters<MetadataClient['remove']>[2];
    readonly options: Parameters<MetadataClient['remove']>[3];
  }[] = [];
  removeFailure: Error | undefined;

  async remove(
    _target: ApplyTarget,
    version: string,
    keys: Parameters<MetadataClient['remove']>[2],
    options: Parameters<MetadataClient['remove']>[3],
  ): Promise<AppliedMetadata> {
    this.removals.push({ version, keys, options });
    if (this.removeFailure) throw this.removeFailure;
    this.base = Object.fromEntries(Object.entries(this.base).filter(([key]) => !keys.labels.includes(key)));
    return { labels: this.base, annotations: {}, resourceVersion: '3' };
  }

  async annotations(_target: ApplyTarget, keys: readonly string[]): Promise<Labels> {
    this.reads.push(keys);
    return Object.fromEntries(keys.flatMap((key) => (this.stored[key] === undefined ? [] : [[key, this.stored[key]]])));
  }
}

interface Setup {
  readonly fights?: FightTracker;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
  readonly conflicts?: ConflictPolicy;
  readonly dryRun?: boolean;
  readonly related?: (object: LabelledObject) => RelatedView;
  readonly protect?: ReconcilerOptions['protect'];
}

function setup({ labels, annotations = {}, conflicts = 'force', dryRun = false, related, fights, protect }: Setup) {
  const client = new FakeClient();
  const lines: Array<Record<string, unknown>> = [];
  const log = createLogger({
    level: 'debug',
    format: 'json',
    write: (line) => lines.push(JSON.parse(line) as Record<string, unknown>),
  });
  const reconciler = new Reconciler({
    kind: { apiVersion: 'apps/v1', kind: 'Deployment', resource: 'deployments', group: 'apps' },
    labels: new Map(Object.entries(labels).map(([key, source]) => [key, compileTemplate(source)])),
    annotations: new Map(Object.entries(annotations).map(([key, source]) => [key, compileTemplate(source)])),
    conflicts,
    dryRun,
    client,
    log,
    related,
    fights,
    protect,
  });
  // What the controller hands each reconcile: aborted when this process may no longer write.
  const writes = new AbortController().signal;
  const reconcile = (object: LabelledObject) => {
    client.base = object.labels;
    return reconciler.reconcile(object, writes);
  };
  return { client, lines, reconcile, writes, reconciler };
}

/** A write's counts (Result.changed) when it touched labels only. */
function labelsChanged(set: number, removed: number) {
  return { labels: { set, removed }, annotations: { set: 0, removed: 0 } };
}

function object(fields: Partial<LabelledObject> = {}): LabelledObject {
  return labelledObject('web', { uid: 'u1', ...fields });
}

test('nothing is sent when the labels are right and no stale label is owned', async () => {
  const { client, reconcile } = setup({ labels: { team: 'payments' } });
  const result = await reconcile(object({ labels: { team: 'payments', app: 'web' }, ownedLabels: ['team'] }));
  assert.deepEqual(result, { outcome: 'unchanged', patch: [] });
  assert.equal(client.calls.length, 0);
});

test('a missing or different label is fixed by one apply of the whole desired set, guarded by uid', async () => {
  const desired = { team: 'payments', 'example.com/tier': 'web' };
  const cases: Array<[string, Labels, unknown[]]> = [
    ['missing', { team: 'payments' }, [{ op: 'add', path: '/metadata/labels/example.com~1tier', value: 'web' }]],
    ['different', { team: 'search', 'example.com/tier': 'web' }, [{
      op: 'replace',
      path: '/metadata/labels/team',
      value: 'payments',
    }]],
  ];
  for (const [name, labels, patch] of cases) {
    const { client, reconcile, writes } = setup({ labels: desired });
    const result = await reconcile(object({ labels }));
    assert.deepEqual(result, { outcome: 'patched', patch, written: '2', changed: labelsChanged(1, 0) }, name);
    assert.deepEqual(client.calls, [
      {
        target: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', namespace: 'shop', uid: 'u1' },
        labels: desired,
        annotations: {},
        options: { force: true, dryRun: false, annotationKeys: [], signal: writes },
      },
    ], name);
  }
});

test('a label labeller owns but no longer wants is left out of the apply, and the patch removes it', async () => {
  const { client, reconcile } = setup({ labels: { team: 'payments' } });
  client.after = { team: 'payments', app: 'web' };
  const result = await reconcile(
    object({ labels: { team: 'payments', app: 'web', retired: 'yes' }, ownedLabels: ['team', 'retired'] }),
  );
  assert.deepEqual(client.calls.map((c) => c.labels), [{ team: 'payments' }]);
  assert.deepEqual(result, {
    outcome: 'patched',
    patch: [{ op: 'remove', path: '/metadata/labels/retired' }],
    written: '2',
    changed: labelsChanged(0, 1),
  });
});

test("templates render from the object's name, namespace, labels and annotations", async () => {
  const { client, reconcile } = setup({
    labels: {
      'app.kubernetes.io/instance': '{{name}}',
      'example.com/team': 'team-{{ namespace }}',
      'example.com/app': '{{labels.app}}',
      'example.com/owner': '{{annotations.example.com/owner}}',
      fixed: 'yes',
    },
  });
  await reconcile(object({ labels: { app: 'storefront' }, annotations: { 'example.com/owner': 'alice' } }));
  assert.deepEqual(client.calls.map((c) => c.labels), [
    {
      'app.kubernetes.io/instance': 'web',
      'example.com/team': 'team-shop',
      'example.com/app': 'storefront',
      'example.com/owner': 'alice',
      fixed: 'yes',
    },
  ]);
});

test('a template that renders an invalid value holds that key only: logged, the rest applied, no throw', async () => {
  const { client, lines, reconcile } = setup({
    labels: { team: 'payments', owner: '{{annotations.example.com/owner}}' },
  });
  const result = await reconcile(object({ annotations: { 'example.com/owner': 'Alice Smith' } }));
  assert.equal(result.outcome, 'invalid');
  assert.deepEqual(result.problems?.map((p) => [p.field, p.key]), [['labels', 'owner']]);
  assert.match(result.problems?.[0]?.problem ?? '', /label owner: .*"Alice Smith"/);
  assert.deepEqual(client.calls.map((c) => c.labels), [{ team: 'payments' }]);
  const [line] = lines;
  assert.equal(line?.['level'], 'error');
  assert.equal(line?.['name'], 'web');
  assert.equal(line?.['namespace'], 'shop');
  assert.match(String(line?.['problems']), /label owner: .*"Alice Smith"/);
});

test('conflict policy: skip leaves a label another manager set to another value; force takes it over', async () => {
  // What was left alone is reported whether or not other labels were patched.
  const left = [{ field: 'labels', key: 'team', wanted: 'payments', value: 'search' }];
  const cases: Array<
    {
      name: string;
      conflicts: ConflictPolicy;
      ownedLabels: string[];
      desired: Labels;
      outcome: string;
      sent: Array<{ labels: Labels; force: boolean }>;
      contested?: typeof left;
    }
  > = [
    {
      name: 'skip, only the contested label',
      conflicts: 'skip',
      ownedLabels: [],
      desired: { team: 'payments' },
      outcome: 'conflict',
      sent: [],
      contested: left,
    },
    {
      name: 'skip, with another missing label',
      conflicts: 'skip',
      ownedLabels: [],
      desired: { team: 'payments', tier: 'web' },
      outcome: 'patched',
      sent: [{ labels: { tier: 'web' }, force: false }],
      contested: left,
    },
    {
      name: 'skip, but labeller owns it',
      conflicts: 'skip',
      ownedLabels: ['team'],
      desired: { team: 'payments' },
      outcome: 'patched',
      sent: [{ labels: { team: 'payments' }, force: false }],
    },
    {
      name: 'force',
      conflicts: 'force',
      ownedLabels: [],
      desired: { team: 'payments' },
      outcome: 'patched',
      sent: [{ labels: { team: 'payments' }, force: true }],
    },
  ];
  for (const { name, conflicts, ownedLabels, desired, outcome, sent, contested } of cases) {
    const { client, reconcile } = setup({ labels: desired, conflicts });
    const result = await reconcile(object({ labels: { team: 'search' }, ownedLabels }));
    assert.equal(result.outcome, outcome, name);
    assert.deepEqual(client.calls.map((c) => ({ labels: c.labels, force: c.options.force })), sent, name);
    assert.deepEqual(result.contested, contested, name);
  }
});

test('skip does not mistake a label key named like an Object.prototype member for one another manager set', async () => {
  for (const key of ['constructor', 'toString', 'hasOwnProperty']) {
    const { client, reconcile } = setup({ labels: { [key]: 'x' }, conflicts: 'skip' });
    const result = await reconcile(object({ labels: { app: 'web' } }));
    assert.equal(result.outcome, 'patched', key);
    assert.deepEqual(client.calls.map((c) => c.labels), [{ [key]: 'x' }], key);
  }
});

test('client failures: LabelConflict is a conflict, ObjectGone is gone, anything else is rethrown', async () => {
  const cases: Array<[Error, object | undefined]> = [
    // The owner the API server named goes into the result, for the Event's note.
    [
      new LabelConflict('conflict with "kubectl": .metadata.labels.team', [
        { field: 'labels', key: 'team', manager: 'kubectl' },
      ]),
      {
        outcome: 'conflict',
        patch: [],
        contested: [{ field: 'labels', key: 'team', wanted: 'payments', manager: 'kubectl' }],
      },
    ],
    [new ObjectGone('uid mismatch'), { outcome: 'gone', patch: [] }],
    [new Error('503 Service Unavailable'), undefined],
  ];
  for (const [failure, expected] of cases) {
    const { client, reconcile } = setup({ labels: { team: 'payments' } });
    client.failure = failure;
    const result = reconcile(object());
    if (expected === undefined) await assert.rejects(result, failure);
    else assert.deepEqual(await result, expected);
    assert.equal(client.calls.length, 1);
  }
});

test('dry run is passed to the client and logged at info as what would be applied; a write at debug', async () => {
  for (const dryRun of [true, false]) {
    const { client, lines, reconcile } = setup({ labels: { team: 'payments' }, dryRun });
    await reconcile(object());
    assert.equal(client.calls[0]?.options.dryRun, dryRun);
    const line = lines.find((l) => l['level'] === (dryRun ? 'info' : 'debug'));
    assert.equal(line?.['msg'], dryRun ? 'would apply labels (dry run)' : 'labels applied');
    assert.deepEqual(line?.['patch'], [{ op: 'add', path: '/metadata/labels/team', value: 'payments' }]);
  }
});

test('the patch describes the change the server reported, as JSON Patch operations on metadata.labels', async () => {
  const { client, reconcile } = setup({ labels: { 'example.com/x': 'new' } });
  // The server's answer, not the request, is the truth: another manager's label went meanwhile.
  client.after = { 'example.com/x': 'new' };
  const result = await reconcile(object({ labels: { 'example.com/x': 'old', other: 'v' } }));
  assert.deepEqual(result.patch, [
    { op: 'remove', path: '/metadata/labels/other' },
    { op: 'replace', path: '/metadata/labels/example.com~1x', value: 'new' },
  ]);
});

test('a label whose template reads an absent value is not set, and removed when labeller owned it', async () => {
  const { client, reconcile } = setup({ labels: { team: 'payments', app: '{{labels.name}}' } });
  // Not set: nothing to send when the rest is right.
  assert.deepEqual(await reconcile(object({ labels: { team: 'payments' }, ownedLabels: ['team'] })), {
    outcome: 'unchanged',
    patch: [],
  });
  assert.equal(client.calls.length, 0);
  // Owned from when the value was there: the apply leaves it out, so the API server removes it.
  client.after = { team: 'payments' };
  const result = await reconcile(object({ labels: { team: 'payments', app: 'old' }, ownedLabels: ['team', 'app'] }));
  assert.deepEqual(client.calls.map((c) => c.labels), [{ team: 'payments' }]);
  assert.deepEqual(result, {
    outcome: 'patched',
    patch: [{ op: 'remove', path: '/metadata/labels/app' }],
    written: '2',
    changed: labelsChanged(0, 1),
  });
});

test('a label reading a related object that cannot be read is held: kept where labeller owns it, not added elsewhere; the others go on', async () => {
  const held: RelatedView = { objects: {}, held: new Map([['root', 'unavailable']]) };
  const { client, reconcile, reconciler } = setup({
    labels: { team: 'payments', workload: '{{root.kind}}.{{root.name}}' },
    related: () => held,
  });
  // Owned and set: part of the apply at its current value, so it is neither removed nor changed.
  client.after = { team: 'payments', workload: 'Deployment.web' };
  await reconcile(object({ labels: { workload: 'Deployment.web' }, ownedLabels: ['workload'] }));
  assert.deepEqual(client.calls.map((c) => c.labels), [{ team: 'payments', workload: 'Deployment.web' }]);
  // Not owned: left out, and nothing is missing because of it.
  const plan = reconciler.plan(object({ labels: { team: 'payments' }, ownedLabels: ['team'] }));
  assert.ok(!('problem' in plan));
  assert.deepEqual([plan.labels.held, plan.labels.missing, plan.labels.stale, plan.waiting], [
    ['workload'],
    [],
    [],
    false,
  ]);
  // Held only until a cache lists or an owner shows up: nothing is sent now, the rest neither (one apply later, not two).
  const pending = setup({
    labels: { team: 'payments', workload: '{{root.name}}' },
    related: () => ({ ...held, held: new Map([['root', 'pending']]) }),
  });
  const waiting = pending.reconciler.plan(object());
  assert.ok(!('problem' in waiting) && waiting.waiting, 'held until a cache lists');
  assert.deepEqual(await pending.reconcile(object()), { outcome: 'waiting', patch: [] });
  assert.equal(pending.client.calls.length, 0);
});

test('an object being deleted gets no apply', async () => {
  const { client, reconcile } = setup({ labels: { team: 'payments' } });
  assert.deepEqual(await reconcile(object({ deleting: true })), { outcome: 'gone', patch: [] });
  assert.equal(client.calls.length, 0);
});

test('| default "" keeps an explicit empty label when the value is absent', async () => {
  const { client, reconcile } = setup({ labels: { app: '{{labels.name | default ""}}' } });
  await reconcile(object());
  assert.deepEqual(client.calls.map((c) => c.labels), [{ app: '' }]);
});

test('plan: what converging takes, from the cache alone; a contested label is taken over under force and left under skip', () => {
  const labels = { team: 'payments', tier: 'web' };
  const cached = object({ labels: { team: 'ops', tier: 'web', old: '1' }, ownedLabels: ['tier', 'old'] });
  const force = setup({ labels }).reconciler.plan(cached);
  assert.deepEqual(force, {
    labels: {
      rendered: new Map(Object.entries(labels)),
      desired: new Map(Object.entries(labels)),
      contested: ['team'],
      taken: ['team'],
      stale: ['old'],
      missing: ['team'],
      held: [],
      invalid: [],
      unknown: [],
    },
    annotations: fieldPlan(),
    waiting: false,
    problems: [],
    markers: [],
  });
  const skip = setup({ labels, conflicts: 'skip' }).reconciler.plan(cached);
  assert.deepEqual(skip, {
    labels: {
      rendered: new Map(Object.entries(labels)),
      desired: new Map([['tier', 'web']]),
      contested: ['team'],
      taken: [],
      stale: ['old'],
      missing: [],
      held: [],
      invalid: [],
      unknown: [],
    },
    annotations: fieldPlan(),
    waiting: false,
    problems: [],
    markers: [],
  });
  const invalid = setup({ labels: { n: '{{labels.x}}', k: 'v' } }).reconciler.plan(
    object({ labels: { x: 'bad value', n: 'good', k: 'v' }, ownedLabels: ['n', 'k'] }),
  );
  assert.ok(!('problem' in invalid));
  assert.deepEqual(invalid.problems.map((p) => p.key), ['n']);
  assert.match(invalid.problems[0]!.problem, /^label n: "\{\{labels.x\}\}" rendered "bad value": /);
  assert.deepEqual(invalid.labels.invalid, ['n']);
  // Held: the value labeller owns stays as it is, and nothing else needs writing.
  assert.deepEqual([...invalid.labels.desired], [['k', 'v'], ['n', 'good']]);
  assert.deepEqual(invalid.labels.stale, []);
  assert.equal(needsApply(invalid), false);
});

test('no desired labels (prune): one apply of the empty set where labeller owns a label, nothing elsewhere', async () => {
  const { client, reconcile } = setup({ labels: {} });
  assert.equal((await reconcile(object({ labels: { app: 'web' } }))).outcome, 'unchanged');
  assert.equal(client.calls.length, 0);
  client.after = { shared: '1' };
  const result = await reconcile(
    object({ labels: { team: 'payments', shared: '1' }, ownedLabels: ['team', 'shared'] }),
  );
  assert.deepEqual(client.calls.map((c) => [c.labels, c.annotations, c.options.force]), [[{}, {}, true]]);
  assert.deepEqual(result, {
    outcome: 'patched',
    patch: [{ op: 'remove', path: '/metadata/labels/team' }],
    written: '2',
    changed: labelsChanged(0, 1),
  });
});

/** An object carrying annotations labeller writes, as the cache keeps them: digests in key order. */
function annotated(annotations: Labels, written: readonly string[], fields: Partial<LabelledObject> = {}) {
  const digests = [...written].sort().map((key) => (annotations[key] === undefined ? NaN : digest(annotations[key])));
  return object({ written: { digests, otherBytes: 0 }, ...fields });
}

test('annotations: rendered with the same templates, sent in the same apply as the labels, compared by digest', async () => {
  const annotations = { 'example.com/runbook': 'https://runbooks.example.com/{{namespace}}/{{name}}', note: 'kept' };
  const written = Object.keys(annotations);
  const { client, reconcile } = setup({ labels: { team: 'payments' }, annotations });
  // Right already: nothing sent.
  const right = annotated({ 'example.com/runbook': 'https://runbooks.example.com/shop/web', note: 'kept' }, written, {
    labels: { team: 'payments' },
    ownedLabels: ['team'],
    ownedAnnotations: written,
  });
  assert.deepEqual(await reconcile(right), { outcome: 'unchanged', patch: [] });
  // One different (the cache knows only that it differs): one apply of both maps.
  const stale = annotated({ 'example.com/runbook': 'https://old', note: 'kept' }, written, {
    labels: { team: 'payments' },
    ownedLabels: ['team'],
    ownedAnnotations: written,
  });
  const result = await reconcile(stale);
  assert.deepEqual(client.calls.map((c) => [c.labels, c.annotations, c.options.annotationKeys]), [[
    { team: 'payments' },
    { 'example.com/runbook': 'https://runbooks.example.com/shop/web', note: 'kept' },
    ['example.com/runbook', 'note'],
  ]]);
  assert.deepEqual(result.patch, [
    {
      op: 'replace',
      path: '/metadata/annotations/example.com~1runbook',
      value: 'https://runbooks.example.com/shop/web',
    },
  ]);
});

test('annotations: one dropped from the config is left out (removed); one another manager set is contested', async () => {
  const { client, reconcile, reconciler } = setup({ labels: {}, annotations: { a: 'x' }, conflicts: 'skip' });
  client.afterAnnotations = { a: 'x' };
  const result = await reconcile(annotated({ a: 'x' }, ['a'], { ownedAnnotations: ['a', 'retired'] }));
  assert.deepEqual(client.calls.map((c) => c.annotations), [{ a: 'x' }]);
  assert.deepEqual(result.patch, [{ op: 'remove', path: '/metadata/annotations/retired' }]);
  const plan = reconciler.plan(annotated({ a: 'theirs' }, ['a']));
  assert.ok(!('problem' in plan));
  assert.deepEqual([plan.annotations.contested, plan.annotations.missing], [['a'], []]);
  const skipped = await reconcile(annotated({ a: 'theirs' }, ['a']));
  assert.deepEqual(skipped.contested, [{ field: 'annotations', key: 'a', wanted: 'x' }], 'the value is not kept');
});

test('annotations: a held one labeller owns is read and sent at its value; the cache keeps no value', async () => {
  const held: RelatedView = { objects: {}, held: new Map([['owner', 'unavailable']]) };
  const { client, reconcile } = setup({
    labels: { team: 'payments' },
    annotations: { workload: '{{owner.name}}' },
    related: () => held,
  });
  client.stored = { workload: 'web-1' };
  await reconcile(annotated({ workload: 'web-1' }, ['workload'], { ownedAnnotations: ['workload'] }));
  assert.deepEqual(client.reads, [['workload']]);
  assert.deepEqual(client.calls.map((c) => [c.labels, c.annotations]), [[{ team: 'payments' }, { workload: 'web-1' }]]);
});

test('annotations: more than the API server takes on one object is invalid, nothing sent', async () => {
  const { client, reconcile } = setup({ labels: {}, annotations: { big: '{{labels.big}}' } });
  const huge = annotated({}, ['big'], { labels: { big: 'x' }, written: { digests: [NaN], otherBytes: 256 * 1024 } });
  const result = await reconcile(huge);
  assert.equal(result.outcome, 'invalid');
  assert.deepEqual(result.problems?.map((p) => [p.field, p.key]), [['annotations', undefined]]);
  assert.match(result.problems?.[0]?.problem ?? '', /262148 bytes, more than the 262144/);
  assert.equal(client.calls.length, 0);
});

test('a lookup whose value is invalid is still recorded, so the entry fixed later requeues the object', async () => {
  const index = new LookupIndex();
  const entries = new Map([['shop', 'bad value!']]);
  const reconciler = new Reconciler({
    kind: { apiVersion: 'v1', kind: 'ConfigMap', resource: 'configmaps', group: '' },
    labels: new Map([
      ['k', compileTemplate('v')],
      ['cost', compileTemplate('{{teams[namespace]}}', { sources: new Set(['teams']) })],
    ]),
    conflicts: 'force',
    dryRun: false,
    client: new FakeClient(),
    log: createLogger({ level: 'error', format: 'json', write: () => {} }),
    sources: { lookups: { loaded: () => true, lookup: (_s, key) => entries.get(key) }, index },
  });
  const plan = reconciler.plan(object());
  assert.ok(!('problem' in plan));
  assert.deepEqual(plan.problems.map((p) => p.key), ['cost']);
  assert.deepEqual([...plan.labels.desired], [['k', 'v']], 'the static key is still applied');
  assert.deepEqual([...index.objects('teams', 'shop')], ['shop/web']);
});

test('under force, a key a manager yielded to takes back every time is yielded: no apply for it, a fight naming the manager, a requeue when the backoff ends', async () => {
  const { client, reconcile, reconciler } = setup({
    labels: { team: 'payments', tier: 'web' },
    fights: new FightTracker(),
  });
  // GitOps keeps team at "ops" (its field manager owns it); labeller wants "payments".
  client.holders = [{ field: 'labels', key: 'team', manager: 'argocd-controller' }];
  const taken = () => object({ labels: { team: 'ops', tier: 'web' }, ownedLabels: ['tier'] });
  const applies = () => client.calls.filter((c) => !c.options.dryRun);
  for (let i = 0; i < FIGHT_RETAKES; i++) {
    const retaken = await reconcile(taken());
    assert.equal(retaken.outcome, 'patched', `retake ${i + 1}`);
    assert.deepEqual([retaken.fights, retaken.retaken], [undefined, undefined], 'a manager yielded to: no retake said');
  }
  assert.ok(applies().every((c) => c.options.force && c.labels['team'] === 'payments'));
  assert.equal(applies().length, FIGHT_RETAKES);
  const calls = client.calls.length;
  const yielded = await reconcile(taken());
  assert.equal(yielded.outcome, 'conflict');
  assert.deepEqual(yielded.fights, [
    {
      field: 'labels',
      key: 'team',
      manager: 'argocd-controller',
      retakes: FIGHT_RETAKES,
      backoffMs: yielded.fights?.[0]?.backoffMs,
    },
  ]);
  assert.ok(Math.abs((yielded.fights?.[0]?.backoffMs ?? 0) - FIGHT_BACKOFF_MS) < 1000);
  // The reconciler reads its clock a moment before the tracker does: under load, a few ms past the backoff.
  assert.ok((yielded.requeueAfterMs ?? 0) > 0 && (yielded.requeueAfterMs ?? 0) < FIGHT_BACKOFF_MS + 1000);
  // The only request: the dry run that asked who holds the key, without force.
  assert.deepEqual(
    client.calls.slice(calls).map((c) => [c.labels, c.options.force, c.options.dryRun]),
    [[{ team: 'payments' }, false, true]],
  );
  const again = await reconcile(taken());
  assert.deepEqual(
    [again.outcome, again.fights, client.calls.length],
    ['conflict', undefined, calls + 1],
    'still yielded: no request',
  );
  // The plan status and the gauges count says so too: contested, not pending, while it is yielded.
  const plan = reconciler.plan(taken());
  assert.ok(!('problem' in plan));
  assert.deepEqual([plan.labels.contested, plan.labels.missing, needsApply(plan)], [['team'], [], false]);
});

test('a tenant flipping a key cannot wear labeller down: put back every time, said each time, at a bounded rate (issue 46)', async () => {
  const { client, reconcile } = setup({ labels: { team: 'payments' }, fights: new FightTracker() });
  client.holders = [{ field: 'labels', key: 'team', manager: 'kubectl-label' }];
  const flipped = () => object({ labels: { team: 'nobody' } });
  for (let i = 0; i < RETAKES_PER_MINUTE; i++) {
    const result = await reconcile(flipped());
    assert.equal(result.outcome, 'patched', `retake ${i + 1}`);
    assert.deepEqual(result.retaken, [{ field: 'labels', key: 'team', manager: 'kubectl-label' }]);
    assert.equal(result.fights, undefined, 'never a fight: never yielded');
  }
  const calls = client.calls.length;
  const waiting = await reconcile(flipped());
  assert.equal(waiting.outcome, 'conflict');
  assert.ok((waiting.requeueAfterMs ?? 0) > 0 && (waiting.requeueAfterMs ?? 0) <= 60_000, 'back within the minute');
  assert.equal(client.calls.length, calls, 'the minute spent: no request, not even the dry run');
});

test('a single overwrite under force is retaken as before, and skip never fights', async () => {
  const force = setup({ labels: { team: 'payments' }, fights: new FightTracker() });
  const once = await force.reconcile(object({ labels: { team: 'ops' } }));
  const applies = force.client.calls.filter((c) => !c.options.dryRun);
  assert.deepEqual([once.outcome, applies.length, once.fights], ['patched', 1, undefined]);
  const skip = setup({ labels: { team: 'payments' }, conflicts: 'skip', fights: new FightTracker() });
  for (let i = 0; i < FIGHT_RETAKES + 2; i++) {
    const left = await skip.reconcile(object({ labels: { team: 'ops' } }));
    assert.deepEqual([left.outcome, left.fights], ['conflict', undefined]);
  }
});

/** An object admitted with `team=payments` and `tier=web` (no manager owns them: admitted.ts). */
function admittedObject(fields: Partial<LabelledObject> = {}): LabelledObject {
  return object({
    labels: { team: 'payments', tier: 'web', app: 'shop' },
    admitted: { labels: ['team', 'tier'], annotations: [], marked: ['labels'] },
    ...fields,
  });
}

test('an object created with the labels the config wants (set at admission) costs no write', async () => {
  for (const conflicts of ['force', 'skip'] as const) {
    const { client, reconcile } = setup({ labels: { team: 'payments', tier: 'web' }, conflicts });
    assert.deepEqual(await reconcile(admittedObject()), { outcome: 'unchanged', patch: [] }, conflicts);
    assert.equal(client.calls.length + client.removals.length, 0, conflicts);
  }
});

test("an admitted key whose value the config changed is labeller's: applied under skip too (forced: the API server may hold it for before-first-apply), not left as contested", async () => {
  const { client, reconcile } = setup({ labels: { team: 'search', tier: 'web' }, conflicts: 'skip' });
  const result = await reconcile(admittedObject());
  assert.equal(result.outcome, 'patched');
  assert.equal(result.contested, undefined);
  assert.deepEqual(client.calls.map((c) => [c.labels, c.options.force]), [[{ team: 'search', tier: 'web' }, true]]);
  assert.equal(client.removals.length, 0);
  // Forced only for that: under skip, an apply that changes no admitted key takes nothing over.
  const other = setup({ labels: { team: 'payments', tier: 'web', zone: 'a' }, conflicts: 'skip' });
  await other.reconcile(admittedObject());
  assert.deepEqual(other.client.calls.map((c) => c.options.force), [false]);
});

test('an admitted key dropped from the config is removed by a JSON Patch guarded by the cached version; its marker goes with the last key it vouched for', async () => {
  const { client, reconcile } = setup({ labels: { tier: 'web' } });
  const result = await reconcile(admittedObject());
  assert.deepEqual(client.calls, [], 'nothing to apply: tier is right');
  assert.deepEqual(client.removals.map((r) => [r.version, r.keys, r.options.markers]), [[
    '1',
    { labels: ['team'], annotations: [] },
    [],
  ]]);
  assert.deepEqual(result, {
    outcome: 'patched',
    patch: [{ op: 'remove', path: '/metadata/labels/team' }],
    written: '3',
    changed: labelsChanged(0, 1),
  });

  // Dropping every admitted key (prune's empty config) takes the marker too; so does prune for a
  // marker that vouches for nothing any more (its key changed by another manager), and nothing else.
  const stale = setup({ labels: {} });
  await stale.reconcile(
    object({ labels: { tier: 'custom' }, admitted: { labels: [], annotations: [], marked: ['labels'] } }),
  );
  assert.deepEqual(stale.client.removals.map((r) => [r.keys.labels, r.options.markers]), [[[], ['labels']]]);
  const kept = setup({ labels: { tier: 'web' }, conflicts: 'skip' });
  await kept.reconcile(
    object({ labels: { tier: 'custom' }, admitted: { labels: [], annotations: [], marked: ['labels'] } }),
  );
  assert.deepEqual(kept.client.removals, [], 'while the config wants something of it, such a marker stays');
  const prune = setup({ labels: {} });
  await prune.reconcile(admittedObject());
  assert.deepEqual(prune.client.removals.map((r) => [r.keys.labels, r.options.markers]), [[['team', 'tier'], [
    'labels',
  ]]]);
  assert.deepEqual(prune.client.calls, []);
});

test('an admitted key dropped while another key changes: the removal first, then one apply', async () => {
  const { client, reconcile } = setup({ labels: { tier: 'api' } });
  const result = await reconcile(admittedObject());
  assert.deepEqual(client.removals.map((r) => r.keys.labels), [['team']]);
  assert.deepEqual(client.calls.map((c) => c.labels), [{ tier: 'api' }]);
  assert.equal(result.written, '2', 'the version of the last write');
});

test('a removal that finds the object changed since the cache saw it waits for its new version; one gone is gone', async () => {
  const { client, reconcile } = setup({ labels: {} });
  client.removeFailure = new ObjectChanged('test failed');
  assert.deepEqual(await reconcile(admittedObject()), { outcome: 'changed', patch: [] });
  client.removeFailure = new ObjectGone('uid');
  assert.deepEqual(await reconcile(admittedObject()), { outcome: 'gone', patch: [] });
});

test('a held admitted key is kept at its value; an admitted annotation dropped is removed as a label is', async () => {
  const held = setup({
    labels: { team: '{{namespace.labels.team}}', tier: 'api' },
    related: () => ({ objects: {}, held: new Map([['namespace', 'unavailable']]) }),
  });
  await held.reconcile(admittedObject());
  assert.deepEqual(held.client.calls.map((c) => c.labels), [{ team: 'payments', tier: 'api' }]);
  assert.equal(held.client.removals.length, 0);

  const annotated = setup({ labels: {}, annotations: {} });
  await annotated.reconcile(
    object({ admitted: { labels: [], annotations: ['example.com/runbook'], marked: ['annotations'] } }),
  );
  assert.deepEqual(annotated.client.removals.map((r) => [r.keys, r.options.markers]), [[{
    labels: [],
    annotations: ['example.com/runbook'],
  }, ['annotations']]]);
});

test("a forged marker makes labeller neither remove a key it never set nor force over a user's value (issue 46, item 2)", async () => {
  // A tenant annotates their object with labeller's marker after its create: it lists a key
  // another labeller's policy set (no manager owns it), and the value they gave team themselves.
  const project = projector({ fieldManager: 'labeller' });
  const annotate = {
    manager: 'kubectl-annotate',
    operation: 'Update',
    time: '2026-11-28T10:05:00Z',
    fieldsV1: { 'f:metadata': { 'f:annotations': { [`f:${markerKeys('labeller').labels}`]: {} } } },
  };
  const label = {
    manager: 'kubectl-label',
    operation: 'Update',
    time: '2026-11-28T10:04:00Z',
    fieldsV1: { 'f:metadata': { 'f:labels': { 'f:team': {} } } },
  };
  const forged = project(
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: {
        name: 'web',
        namespace: 'shop',
        uid: 'u1',
        resourceVersion: '7',
        creationTimestamp: '2026-11-28T10:00:00Z',
        labels: { 'example.com/owner': 'b', team: 'mine' },
        annotations: { [markerKeys('labeller').labels]: 'example.com/owner=b,team=mine' },
        managedFields: [label, annotate],
      },
    },
    objectKey({ name: 'web', namespace: 'shop' }),
    undefined,
  );
  const { client, reconcile } = setup({ labels: { team: 'payments' }, conflicts: 'skip' });
  const result = await reconcile(forged);
  assert.deepEqual(client.removals, [], 'no JSON Patch removes example.com/owner');
  assert.deepEqual(client.calls, [], 'no apply takes team over under skip');
  assert.equal(result.outcome, 'conflict');
});

test("a protected key is taken over under skip too, forced; the others stay the other manager's (issue 46)", async () => {
  const protect = { labels: new Set(['team']), annotations: new Set<string>() };
  const { client, reconciler: protecting } = setup({
    labels: { team: 'payments', tier: 'web' },
    conflicts: 'skip',
    protect,
  });
  const cached = object({ labels: { team: 'ops', tier: 'api' } });
  const plan = protecting.plan(cached);
  assert.ok(!('problem' in plan));
  assert.deepEqual([plan.labels.contested, plan.labels.taken, plan.labels.missing], [['team', 'tier'], ['team'], [
    'team',
  ]]);
  const result = await protecting.reconcile(cached);
  assert.deepEqual(result.contested?.map((c) => c.key), ['tier']);
  assert.deepEqual(client.calls.map((c) => [c.labels, c.options.force]), [[{ team: 'payments' }, true]]);
});

test('a marker written since the create vouches for nothing: the keys it may have listed, at the wanted value, are taken over by an apply, so that they go when the config drops them', async () => {
  const { client, reconcile } = setup({ labels: { team: 'payments' } });
  const forged = object({
    labels: { team: 'payments' },
    admitted: { labels: [], annotations: [], marked: ['labels'], distrusted: ['labels'] },
  });
  const result = await reconcile(forged);
  assert.equal(result.outcome, 'patched');
  assert.deepEqual(client.calls.map((c) => c.labels), [{ team: 'payments' }]);
  // Once labeller owns it, nothing more.
  const owned = await reconcile(object({ ...forged, ownedLabels: ['team'] }));
  assert.equal(owned.outcome, 'unchanged');
});
