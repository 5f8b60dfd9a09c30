// The one path that runs the kinds, on scripted APIs and a scripted discovery: what a config
// starts, what a changed config relabels, restarts, adds and removes, what is refused (two names
// of one resource) without changing anything, the caches of related objects made again and let
// go, and kinds that discovery serves later or no more.
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { ApiResource } from '../apimachinery/resource.ts';
import type { Discovery } from '../kube/discovery.ts';
import { DiscoveryCache } from '../kube/discoverycache.ts';
import { BUILTINS, WIDGETS } from '../apimachinery/testing/resources.ts';
import { buildConfig } from '../config/overlay.ts';
import { ConfigError } from '../config/fields.ts';
import type { LabelledObject } from '../labelling/object.ts';
import { Manager } from '../runtime/manager.ts';
import { Shutdown } from '../runtime/shutdown.ts';
import { page, ScriptedApi } from '../runtime/testing/scripted.ts';
import { ApiError } from '../apimachinery/errors.ts';
import { createLogger } from '../util/log.ts';
import { noOutcomes } from '../labelling/reconcile.ts';
import type { AccessCheck } from './access.ts';
import { KindSet, type KindSetOptions } from './kindset.ts';

const log = createLogger({ level: 'error', format: 'json', write: () => {} });
const config = (yaml: string) => buildConfig({ file: { text: yaml, source: 'kinds.yaml' } });

/** A kind set over scripted APIs (each lists nothing, then waits) and a discovery serving `served`. */
async function setup(
  t: TestContext,
  served: readonly ApiResource[] = BUILTINS,
  access?: AccessCheck,
  claim?: KindSetOptions['claim'],
  extra: { apis?: (resource: ApiResource) => ScriptedApi; accessRecheckMs?: number } = {},
) {
  let resources = served;
  const discovery = new DiscoveryCache(
    async (): Promise<Discovery> => ({ resources, failedGroups: [] }),
    log,
    { server: 'https://cluster', context: 'test' },
  );
  const stop = new AbortController();
  await discovery.load(stop.signal);
  const shutdown = new Shutdown({ signals: [] });
  const manager = new Manager<LabelledObject>({ once: false, gracePeriodMs: 1000, log }, shutdown);
  const apis = extra.apis ?? (() => new ScriptedApi([page('1', [])]));
  const options = {
    fieldManager: 'labeller',
    concurrency: 1,
    requeueAfterMs: 0,
    dryRun: false,
    watchTimeoutSeconds: 290,
  };
  const kinds = new KindSet({
    manager,
    discovery,
    wiring: { apis, options, log, counts: noOutcomes() },
    access,
    accessRecheckMs: extra.accessRecheckMs,
    claim,
    log,
  });
  const running = manager.run();
  t.after(async () => {
    shutdown.stop();
    await running;
    await kinds.release();
    stop.abort();
  });
  const names = () => manager.controllers.map((c) => c.name).sort();
  /** Discovery now serves `next`, and the kind set has heard of it. */
  const serve = async (next: readonly ApiResource[]) => {
    resources = next;
    await discovery.refresh(stop.signal);
    await kinds.apply(kinds.config!);
  };
  /** Discovery now serves `next`; the kind set hears of it and applies the config in force again. */
  const rediscover = async (next: readonly ApiResource[]) => {
    resources = next;
    await discovery.refresh(stop.signal);
  };
  return { kinds, manager, names, serve, rediscover };
}

test('a changed config relabels in place, restarts what lists or reads otherwise, adds and removes kinds', async (t) => {
  const { kinds, manager, names } = await setup(t);
  await kinds.apply(config(`
labels: { team: a }
kinds:
  - resource: configmaps
  - resource: deploy
    namespaces: [shop]
  - resource: secrets
`));
  assert.deepEqual(names(), ['configmaps', 'deployments.apps/shop', 'secrets']);
  const [configmaps, deployments] = [manager.get('configmaps'), manager.get('deployments.apps/shop')];
  const applied = await kinds.apply(config(`
labels: { team: b }
kinds:
  - resource: configmaps
  - resource: deployments.apps
    namespaces: [shop, web]
  - resource: services
`));
  assert.deepEqual(applied, {
    added: ['deployments.apps', 'services'],
    removed: ['deploy', 'secrets'],
    relabelled: ['configmaps'],
    restarted: [],
    relatedCachesRebuilt: [],
  });
  assert.equal(manager.get('configmaps'), configmaps, 'relabelled in place, its cache kept');
  assert.notEqual(manager.get('deployments.apps/shop,web'), deployments);
  assert.deepEqual(names(), ['configmaps', 'deployments.apps/shop,web', 'services']);
  const restarted = await kinds.apply(config(`
labels: { team: b }
kinds:
  - resource: configmaps
    selector: app
  - resource: deployments.apps
    namespaces: [web, shop]
  - resource: svc
`));
  assert.deepEqual([restarted.restarted, restarted.relabelled, restarted.added, restarted.removed], [
    ['configmaps'],
    [],
    [],
    [],
  ], 'another selector lists otherwise; namespaces in another order and another name of services change nothing');
  const again = await kinds.apply(kinds.config!);
  assert.deepEqual(
    [...again.added, ...again.removed, ...again.relabelled, ...again.restarted],
    [],
    'the same config twice',
  );
});

test('two names of one resource over overlapping namespaces are refused, naming both entries, and nothing changes', async (t) => {
  const { kinds, names } = await setup(t);
  await kinds.apply(config('labels: { a: x }\nkinds: [{ resource: configmaps }]\n'));
  await assert.rejects(
    kinds.apply(config(`
kinds:
  - resource: deployments
    labels: { a: x }
  - resource: deploy
    labels: { b: y }
`)),
    (error: unknown) =>
      error instanceof ConfigError &&
      /kinds\.yaml: kinds\[0\] \("deployments"\) and kinds\[1\] \("deploy"\) are both deployments\.apps in every namespace/
        .test(error.message),
  );
  assert.deepEqual(names(), ['configmaps'], 'the config in force stays');
  // Disjoint namespaces are two controllers of one resource, which is fine.
  await kinds.apply(config(`
kinds:
  - resource: deployments
    namespaces: [a]
    labels: { a: x }
  - resource: deploy
    namespaces: [b]
    labels: { b: y }
`));
  assert.deepEqual(names(), ['deployments.apps/a', 'deployments.apps/b']);
});

test('templates that need more of related objects rebuild their caches and restart every kind; caches no template reads are let go', async (t) => {
  const { kinds, manager } = await setup(t);
  await kinds.apply(config(`
kinds:
  - resource: configmaps
    labels: { team: "{{namespace.labels.team}}" }
  - resource: secrets
    labels: { a: b }
`));
  const informers = () => manager.informers.informers.map((i) => i.name).sort();
  assert.deepEqual(informers(), ['configmaps', 'namespaces', 'secrets']);
  const rebuilt = await kinds.apply(config(`
kinds:
  - resource: configmaps
    labels: { team: "{{namespace.labels.team}}" }
  - resource: pods
    labels: { workload: "{{root.kind}}.{{root.name}}" }
`));
  assert.deepEqual(rebuilt.relatedCachesRebuilt, ['root.* read']);
  assert.deepEqual([...rebuilt.restarted, ...rebuilt.added].sort(), ['configmaps', 'pods']);
  assert.deepEqual(informers(), ['configmaps', 'namespaces', 'pods']);
  // No template reads namespaces any more: their cache goes, and with it its line in /readyz.
  await kinds.apply(config(`
kinds:
  - resource: configmaps
    labels: { team: a }
  - resource: pods
    labels: { workload: "{{root.kind}}.{{root.name}}" }
`));
  assert.deepEqual(informers(), ['configmaps', 'pods']);
});

test("references: a pod's node is watched metadata-only in a cache of its own; a reference of another kind is refused, naming the fix; new references rebuild the caches", async (t) => {
  const { kinds, manager } = await setup(t);
  await kinds.apply(config(`
kinds:
  - resource: pods
    labels: { zone: "{{node.labels.topology.kubernetes.io/zone}}" }
`));
  const informers = () => manager.informers.informers.map((i) => i.name).sort();
  assert.deepEqual(informers(), ['nodes by reference', 'pods']);
  await assert.rejects(
    kinds.apply(config(`
kinds:
  - resource: deployments
    labels: { zone: "{{node.labels.topology.kubernetes.io/zone}}" }
`)),
    /reads node\.\*, a reference of pods \(pods' spec\.nodeName names an object of nodes\), not of deployments\.apps: declare one of deployments\.apps under "references:"/,
  );
  assert.deepEqual(informers(), ['nodes by reference', 'pods'], 'nothing changes');
  const rebuilt = await kinds.apply(config(`
references:
  runsOn: { of: deployments, field: spec.template.spec.nodeName, to: nodes }
kinds:
  - resource: deployments
    labels: { zone: "{{runsOn.labels.topology.kubernetes.io/zone}}" }
`));
  assert.deepEqual(rebuilt.relatedCachesRebuilt, ['other references']);
  assert.deepEqual(informers(), ['deployments.apps', 'nodes by reference']);
  await kinds.apply(config(`
references:
  runsOn: { of: deployments, field: spec.template.spec.nodeName, to: nodes }
kinds:
  - resource: deployments
    labels: { zone: a }
`));
  assert.deepEqual(informers(), ['deployments.apps'], 'no template reads a reference: its cache goes');
});

test('a kind not served waits and starts once discovery serves it; a kind no longer served stops', async (t) => {
  const { kinds, names, serve } = await setup(t);
  await kinds.apply(config('labels: { a: x }\nkinds: [{ resource: configmaps }, { resource: widgets }]\n'));
  assert.deepEqual(names(), ['configmaps']);
  assert.deepEqual(kinds.unknown.map((u) => u.kind.resource), ['widgets']);
  assert.match(kinds.notes().join('\n'), /widgets: not served by the API server \(yet\)/);
  await serve([...BUILTINS, WIDGETS]);
  assert.deepEqual(names(), ['configmaps', 'widgets.example.com']);
  assert.deepEqual(kinds.unknown, []);
  await serve(BUILTINS);
  assert.deepEqual(names(), ['configmaps']);
});

test('the every-kind entry: a kind per resource served, explicit entries replacing it; CRDs served later start, removed ones stop', async (t) => {
  const { kinds, names, serve } = await setup(t);
  await kinds.apply(config(`
labels: { a: x }
kinds:
  - resource: "*"
    exclude: [pods, rs, rc, sts, ds]
  - resource: deploy
    namespaces: [shop]
    labels: { b: y }
`));
  assert.deepEqual(names(), [
    'configmaps',
    'cronjobs.batch',
    'deployments.apps/shop',
    'jobs.batch',
    'services',
  ]);
  assert.equal(
    kinds.kinds.find((k) => k.controller.name === 'deployments.apps/shop')?.resolved.kind.labels.has('b'),
    true,
  );
  await serve([...BUILTINS, WIDGETS]);
  assert.ok(names().includes('widgets.example.com'));
  await serve(BUILTINS);
  assert.ok(!names().includes('widgets.example.com'));
  // Excluding a kind stops it; dropping the explicit entry hands its resource to the every-kind entry.
  const applied = await kinds.apply(config(`
labels: { a: x }
kinds:
  - resource: "*"
    exclude: [pods, rs, rc, sts, ds, services]
`));
  assert.deepEqual([applied.added, applied.removed], [['deployments.apps'], ['deploy', 'services']]);
});

test('every-kind kinds labeller may not use are skipped, reported in /readyz, and start once allowed; explicit kinds are not asked about', async (t) => {
  let forbidden = new Set(['configmaps', 'services']);
  const asked: string[] = [];
  const access: AccessCheck = async (resource, namespaces) => {
    asked.push(resource.resource);
    return forbidden.has(resource.resource) ? namespaces.map((namespace) => ({ verb: 'patch', namespace })) : [];
  };
  const { kinds, names, serve } = await setup(t, BUILTINS, access);
  await kinds.apply(config(`
labels: { a: x }
kinds:
  - resource: "*"
    scope: cluster
  - resource: services
`));
  assert.deepEqual(names(), ['namespaces', 'nodes', 'services']);
  assert.deepEqual(asked.sort(), ['namespaces', 'nodes']);
  await kinds.apply(config(`
labels: { a: x }
kinds:
  - resource: "*"
`));
  assert.ok(!names().includes('configmaps') && !names().includes('services'));
  assert.deepEqual(kinds.skipped.map((s) => s.resource).sort(), ['configmaps', 'services']);
  assert.match(kinds.notes().join('\n'), /configmaps: skipped, labeller may not patch/);
  // Without the every-kind entry nothing is skipped; with it again, they are.
  await kinds.apply(config('labels: { a: x }\nkinds: [{ resource: configmaps }]\n'));
  assert.deepEqual([kinds.skipped, names()], [[], ['configmaps']]);
  await kinds.apply(config('labels: { a: x }\nkinds: [{ resource: "*" }]\n'));
  assert.equal(kinds.skipped.length, 2);
  forbidden = new Set();
  await serve([...BUILTINS, WIDGETS]);
  assert.ok(names().includes('configmaps') && names().includes('services') && names().includes('widgets.example.com'));
  assert.deepEqual(kinds.skipped, []);
});

test('a reload that overlaps a discovery change stays in force: the re-application reads the config in force when it runs', async (t) => {
  const claimed = Promise.withResolvers<void>();
  let claims = 0;
  // The first config is claimed at once; the reload waits on the guard's claim.
  const claim = async () => (claims++ === 0 ? undefined : await claimed.promise);
  const { kinds, rediscover } = await setup(t, BUILTINS, undefined, claim);
  await kinds.apply(config('labels: { team: old }\nkinds: [{ resource: configmaps }]'));
  // Meanwhile a CRD is installed.
  const reload = kinds.apply(config('labels: { team: new }\nkinds: [{ resource: configmaps }]'));
  await rediscover([...BUILTINS, WIDGETS]);
  claimed.resolve();
  await reload;
  // Let the re-application queued by the discovery change run.
  for (let i = 0; i < 50; i++) await new Promise((resolve) => setTimeout(resolve, 2));
  assert.equal(kinds.config?.kinds[0]?.labels.get('team')?.source, 'new', 'the config in force is the reloaded one');
  assert.equal(kinds.kinds[0]?.resolved.kind.labels.get('team')?.source, 'new', 'the running kind labels with it');
});

test('kinds skipped for want of rights are asked about again now and then, and start once granted', async (t) => {
  let denied = true;
  const access: AccessCheck = async (resource, namespaces) =>
    denied && resource.resource === 'nodes' ? namespaces.map((namespace) => ({ verb: 'patch', namespace })) : [];
  const { kinds, names } = await setup(t, BUILTINS, access, undefined, { accessRecheckMs: 20 });
  await kinds.apply(config('labels: { a: x }\nkinds: [{ resource: "*", scope: cluster }]'));
  assert.deepEqual([names(), kinds.skipped.map((s) => s.resource)], [['namespaces'], ['nodes']]);
  denied = false;
  for (let i = 0; i < 100 && !names().includes('nodes'); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.deepEqual([names(), kinds.skipped], [['namespaces', 'nodes'], []], 'granted: started with no reload');
});

test('a running every-kind kind whose watch is refused (403) is asked about again and skipped, not failing for ever', async (t) => {
  let revoked = false;
  const access: AccessCheck = async (resource, namespaces) =>
    revoked && resource.resource === 'nodes' ? namespaces.map((namespace) => ({ verb: 'watch', namespace })) : [];
  const refuse = Promise.withResolvers<readonly never[]>();
  const forbidden = new ApiError('GET', '/api/v1/nodes', 403, { reason: 'Forbidden', message: 'nodes is forbidden' });
  const apis = (resource: ApiResource) =>
    resource.resource === 'nodes'
      ? new ScriptedApi([page('1', [])], [{ until: refuse.promise, end: forbidden }])
      : new ScriptedApi([page('1', [])]);
  const { kinds, names, manager } = await setup(t, BUILTINS, access, undefined, { apis });
  await kinds.apply(config('labels: { a: x }\nkinds: [{ resource: "*", scope: cluster }]'));
  assert.deepEqual(names(), ['namespaces', 'nodes']);
  await manager.get('nodes')?.ready();
  revoked = true;
  refuse.resolve([]);
  for (let i = 0; i < 100 && names().includes('nodes'); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.deepEqual(names(), ['namespaces'], 'skipped: stopped, not retrying for ever');
  assert.match(kinds.notes().join('\n'), /nodes: skipped, labeller may not watch/);
  assert.deepEqual(manager.problems(), [], 'readiness does not wait for it');
});
