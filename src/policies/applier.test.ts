// The applier's decisions, over a store in memory (test/e2e/admission-controller.test.ts has it
// against the real API server): each policy before its binding, a refusal reported once and its
// binding left out, what the config no longer renders deleted, nothing sent again when nothing
// changed, and a server without the policies said once.
import { policyName } from '../admission/names.ts';
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { POLICY_RESOURCES } from '../admission/resources.ts';
import type { Config } from '../config/model.ts';
import { buildConfig } from '../config/overlay.ts';
import type { Discovery } from '../kube/discovery.ts';
import { DiscoveryCache } from '../kube/discoverycache.ts';
import { ApiError } from '../apimachinery/errors.ts';
import { BUILTINS } from '../apimachinery/testing/resources.ts';
import { createLogger } from '../util/log.ts';
import { PolicyApplier, refusalMessage } from './applier.ts';
import { describePolicy, type PolicyObject, type PolicyOnServer } from './store.ts';

const CONFIGMAPS = policyName('labeller', 'configmaps');
const SERVICES = policyName('labeller', 'services');

const config = (yaml: string) => buildConfig({ file: { text: yaml, source: 'kinds.yaml' } });
const CEL_REFUSAL = new ApiError('PATCH', '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies/x', 422, {
  reason: 'Invalid',
  message: 'MutatingAdmissionPolicy "x" is invalid: …',
  details: {
    causes: [{
      field: 'spec.variables[0].expression',
      message:
        'Invalid value: "object.metadata.?labels[?\\"a\\"]": compilation failed: ERROR: <input>:2:9: found no matching overload\n | object…\n | ..^',
    }],
  },
});

/** The field manager's objects on a pretend server; `refuse` names the policies it will not store. */
class Store {
  readonly fieldManager = 'labeller';
  readonly objects = new Map<string, PolicyOnServer>();
  readonly applied: string[] = [];
  readonly deleted: string[] = [];
  refuse = new Set<string>();
  #version = 0;

  async apply(
    object: PolicyObject,
    options: { readonly dryRun: boolean; readonly resourceVersion?: string; readonly signal?: AbortSignal },
  ) {
    const described = describePolicy({ kind: object.kind, name: object.metadata.name });
    if (this.refuse.has(object.metadata.name) && object.kind === 'MutatingAdmissionPolicy') throw CEL_REFUSAL;
    const current = this.objects.get(described);
    if (options.resourceVersion !== undefined && current?.resourceVersion !== options.resourceVersion) {
      throw new ApiError('PATCH', described, 409, { reason: 'Conflict', message: 'the object has been modified' });
    }
    this.applied.push(described);
    const resourceVersion = String(++this.#version);
    if (!options.dryRun) {
      this.objects.set(described, { kind: object.kind, name: object.metadata.name, uid: described, resourceVersion });
    }
    return {
      apiVersion: object.apiVersion,
      kind: object.kind,
      metadata: { ...object.metadata, uid: described, resourceVersion },
    };
  }

  /** Run between a round's read and its next apply: another writer, say. */
  meanwhile: (() => void) | undefined;

  async list() {
    const listed = [...this.objects.values()];
    this.meanwhile?.();
    this.meanwhile = undefined;
    return listed;
  }

  async prune(kept: ReadonlySet<string>, options: { readonly dryRun: boolean }) {
    const gone = [...this.objects.values()].filter((object) => !kept.has(describePolicy(object)));
    for (const object of gone) {
      this.deleted.push(describePolicy(object));
      if (!options.dryRun) this.objects.delete(describePolicy(object));
    }
    return gone;
  }
}

async function setUp(served: boolean, dryRun = false) {
  const lines: { msg: string; [field: string]: unknown }[] = [];
  const log = createLogger({ level: 'debug', format: 'json', write: (line) => void lines.push(JSON.parse(line)) });
  const resources = served ? [...BUILTINS, ...POLICY_RESOURCES] : BUILTINS;
  const discovery = new DiscoveryCache(async (): Promise<Discovery> => ({ resources, failedGroups: [] }), log, {
    server: 'https://cluster',
    context: 'test',
  });
  await discovery.load(new AbortController().signal);
  const store = new Store();
  const events: string[] = [];
  let current: Config = config('labels: {a: b}\nkinds: [{resource: configmaps}, {resource: services}]\n');
  const applier = new PolicyApplier({
    store,
    discovery,
    config: () => current,
    dryRun,
    events: { policyRefused: (note) => void events.push(note) },
    resyncMs: 0,
    log,
  });
  const stop = new AbortController();
  const running = applier.run(stop.signal);
  /** Lets the applier act on what it was told, then answers. */
  const settle = () => new Promise((resolve) => setTimeout(resolve, 20));
  await settle();
  return {
    store,
    events,
    lines,
    applier,
    settle,
    reload: async (yaml: string) => {
      current = config(yaml);
      applier.changed();
      await settle();
    },
    stop: async () => {
      stop.abort();
      await running;
    },
  };
}

test('each policy is applied before its binding; a change applies again and deletes what is no longer rendered; nothing changed, nothing sent', async () => {
  const run = await setUp(true);
  assert.deepEqual(run.store.applied, [
    `MutatingAdmissionPolicy ${CONFIGMAPS}`,
    `MutatingAdmissionPolicyBinding ${CONFIGMAPS}`,
    `MutatingAdmissionPolicy ${SERVICES}`,
    `MutatingAdmissionPolicyBinding ${SERVICES}`,
  ]);
  assert.deepEqual(run.applier.counts(), { applied: 2, refused: 0 });
  run.applier.changed();
  await run.settle();
  assert.equal(run.store.applied.length, 4, 'the same objects: no request');
  await run.reload('labels: {a: c}\nkinds: [{resource: configmaps}]\n');
  assert.deepEqual(run.store.deleted, [
    `MutatingAdmissionPolicy ${SERVICES}`,
    `MutatingAdmissionPolicyBinding ${SERVICES}`,
  ]);
  assert.deepEqual(run.applier.counts(), { applied: 1, refused: 0 });
  await run.stop();
  assert.deepEqual(run.applier.counts(), { applied: 0, refused: 0 }, 'no longer leading: nothing reported');
});

test('a policy the API server refuses: reported once (log, Event, note, gauge), its binding not applied and its older version deleted; the others apply', async () => {
  const run = await setUp(true);
  run.store.refuse.add(SERVICES);
  await run.reload('labels: {a: c}\nkinds: [{resource: configmaps}, {resource: services}]\n');
  assert.ok(!run.store.objects.has(`MutatingAdmissionPolicy ${SERVICES}`), 'the older version is deleted');
  assert.ok(!run.store.objects.has(`MutatingAdmissionPolicyBinding ${SERVICES}`));
  assert.ok(run.store.objects.has(`MutatingAdmissionPolicyBinding ${CONFIGMAPS}`));
  assert.deepEqual(run.applier.counts(), { applied: 1, refused: 1 });
  const why = 'spec.variables[0].expression: compilation failed: ERROR: <input>:2:9: found no matching overload';
  assert.deepEqual(run.applier.notes(), [
    `admission MutatingAdmissionPolicy ${SERVICES}: refused by the API server: ${why}; the controller labels those objects after their create`,
  ]);
  assert.equal(run.events.length, 1);
  assert.ok(run.events[0]!.startsWith(`MutatingAdmissionPolicy ${SERVICES} refused by the API server: spec.variables`));
  const refusals = () => run.lines.filter((l) => l.msg.startsWith('admission policy refused'));
  assert.equal(refusals().length, 1);
  assert.equal(refusals()[0]?.['name'], SERVICES);

  // Rendered again the same (a resync, a discovery change): the same refusal is not said again.
  await run.reload('labels: {a: c}\nkinds: [{resource: configmaps}, {resource: services}]\n');
  assert.equal(refusals().length, 1);
  assert.equal(run.events.length, 1);
  // Fixed: applied, and no longer noted.
  run.store.refuse.clear();
  await run.reload('labels: {a: d}\nkinds: [{resource: configmaps}, {resource: services}]\n');
  assert.deepEqual(run.applier.counts(), { applied: 2, refused: 0 });
  assert.deepEqual(run.applier.notes(), []);
  await run.stop();
});

test("each apply is fenced by the version the round read: another writer's change in between is not overwritten, and the round is read again", async () => {
  const run = await setUp(true);
  const described = `MutatingAdmissionPolicy ${CONFIGMAPS}`;
  // Between this round's read and its apply, another writer (a successor, an operator) writes.
  run.store.meanwhile = () => {
    const current = run.store.objects.get(described)!;
    run.store.objects.set(described, { ...current, resourceVersion: 'theirs' });
  };
  run.store.applied.length = 0;
  await run.reload('labels: {a: c}\nkinds: [{resource: configmaps}, {resource: services}]\n');
  assert.ok(
    run.lines.some((l) =>
      l.msg === 'admission policies not applied yet; retrying' &&
      String(l['error']).includes('changed since this round read it')
    ),
    'said, and retried',
  );
  assert.equal(run.store.applied.length, 0, 'nothing written over the other writer within that round');
  // The retry comes after the backoff's first step (a second or so).
  for (let waited = 0; !run.store.applied.includes(described) && waited < 10_000; waited += 20) await run.settle();
  assert.ok(run.store.applied.includes(described), 'read again and applied over the new version');
  assert.notEqual(run.store.objects.get(described)?.resourceVersion, 'theirs');
  await run.stop();
});

/** An applier's options over a served API and an in-memory store, logging nothing: for runs started by hand. */
async function quietOptions() {
  const log = createLogger({ level: 'error', format: 'json', write: () => {} });
  const discovery = new DiscoveryCache(
    async (): Promise<Discovery> => ({ resources: [...BUILTINS, ...POLICY_RESOURCES], failedGroups: [] }),
    log,
    { server: 'https://cluster', context: 'test' },
  );
  await discovery.load(new AbortController().signal);
  return {
    store: new Store(),
    discovery,
    config: () => config('labels: {a: b}\nkinds: [{resource: configmaps}]\n'),
    dryRun: false,
    resyncMs: 0,
    log,
  };
}

test('a run whose signal aborts a write under way ends cut short; the next run applies what it did not, and starts clean', async () => {
  const options = await quietOptions();
  const { store } = options;
  const applier = new PolicyApplier(options);
  // The first run's write hangs on the wire until the run's signal aborts it (a lapse, a handover).
  const apply = store.apply.bind(store);
  let sent!: () => void;
  const onWire = new Promise<void>((resolve) => (sent = resolve));
  store.apply = (_object, { signal }) =>
    new Promise((_, reject) => {
      sent();
      signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
    });
  const first = new AbortController();
  const running = applier.run(first.signal);
  await onWire;
  first.abort(new Error('the Lease lapsed'));
  assert.equal(await running, 'cut short');
  // Taken again: this run's writes all land.
  store.apply = apply;
  const second = new AbortController();
  const again = applier.run(second.signal);
  for (let waited = 0; store.applied.length === 0 && waited < 2000; waited += 20) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  assert.ok(store.applied.length > 0, 'applied in the second run');
  second.abort();
  assert.equal(await again, undefined, 'nothing was under way when it ended');
});

test("told to stop, a run finishes the write under way, not cut short; a round waiting for the guard's Lease ends without a write", async () => {
  const options = await quietOptions();
  const { store } = options;
  // The first write is answered only when let through; the writes' signal never aborts here.
  const apply = store.apply.bind(store);
  const held = Promise.withResolvers<void>();
  const onWire = Promise.withResolvers<void>();
  store.apply = async (object, applyOptions) => {
    onWire.resolve();
    await held.promise;
    return apply(object, applyOptions);
  };
  const stop = new AbortController();
  const running = new PolicyApplier(options).run(stop.signal, new AbortController().signal);
  await onWire.promise;
  stop.abort();
  held.resolve();
  assert.equal(await running, undefined, 'the write under way finished: not cut short');
  assert.ok(store.applied.length > 0, 'and landed');
  // The guard's Lease not held: the round waits for it until told to stop, and writes nothing.
  store.apply = apply;
  const before = store.applied.length;
  const waiting = new PolicyApplier({
    ...options,
    writable: (signal?: AbortSignal) =>
      new Promise<void>((_, reject) => signal?.addEventListener('abort', () => reject(signal.reason), { once: true })),
  });
  const stopWaiting = new AbortController();
  const waited = waiting.run(stopWaiting.signal, new AbortController().signal);
  await new Promise((resolve) => setTimeout(resolve, 20));
  stopWaiting.abort();
  assert.equal(await waited, undefined);
  assert.equal(store.applied.length, before, 'nothing written');
});

test('a server without the policies is said once; the applier sends nothing', async () => {
  const run = await setUp(false);
  await run.reload('labels: {a: c}\nkinds: [{resource: configmaps}]\n');
  assert.deepEqual(run.store.applied, []);
  assert.equal(run.lines.filter((l) => /does not serve .*MutatingAdmissionPolicies/.test(l.msg)).length, 1);
  assert.match(run.applier.notes()[0] ?? '', /does not serve admissionregistration\.k8s\.io\/v1/);
  assert.equal(run.lines.filter((l) => l.level !== 'info').length, 0, 'no warning, no error');
  await run.stop();
});

test('--dry-run: each object checked by the API server and logged, nothing kept, what would go logged', async () => {
  const run = await setUp(true, true);
  assert.equal(run.store.objects.size, 0);
  assert.deepEqual(
    run.lines.filter((l) => l.msg === 'admission policy would be applied (dry run)').map((l) => l['name']),
    [CONFIGMAPS, CONFIGMAPS, SERVICES, SERVICES],
  );
  await run.stop();
});

test("refusalMessage: each field's cause without the value it echoes; undefined for failures that pass", () => {
  assert.equal(
    refusalMessage(CEL_REFUSAL),
    'spec.variables[0].expression: compilation failed: ERROR: <input>:2:9: found no matching overload',
  );
  assert.equal(refusalMessage(new ApiError('PATCH', '/x', 503, { message: 'unavailable' })), undefined);
  assert.equal(refusalMessage(new Error('socket hang up')), undefined);
  assert.match(refusalMessage(new ApiError('PATCH', '/x', 403, { message: 'forbidden' })) ?? '', /403.*forbidden/);
});
