import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ApiResource } from '../apimachinery/resource.ts';
import { BUILTINS, resource, WIDGETS } from '../apimachinery/testing/resources.ts';
import { buildConfig } from '../config/overlay.ts';
import { createLogger } from '../util/log.ts';
import { controllerName, type ResolvedKind } from './resolve.ts';
import { EveryKind, expandEveryKind } from './everykind.ts';
import { KindError } from './resolve.ts';

const SERVED: readonly ApiResource[] = [
  ...BUILTINS,
  WIDGETS,
  resource('', 'events', 'Event', { shortNames: ['ev'] }),
  resource('events.k8s.io', 'events', 'Event', { shortNames: ['ev'] }),
  resource('coordination.k8s.io', 'leases', 'Lease'),
  resource('', 'endpoints', 'Endpoints', { shortNames: ['ep'] }),
  resource('discovery.k8s.io', 'endpointslices', 'EndpointSlice'),
  resource('apiregistration.k8s.io', 'apiservices', 'APIService', { namespaced: false }),
  resource('rbac.authorization.k8s.io', 'clusterroles', 'ClusterRole', { namespaced: false }),
  resource('admissionregistration.k8s.io', 'mutatingwebhookconfigurations', 'MutatingWebhookConfiguration', {
    namespaced: false,
  }),
  resource('apiextensions.k8s.io', 'customresourcedefinitions', 'CustomResourceDefinition', { namespaced: false }),
  // Served but not patchable, and an older version of a resource.
  resource('', 'componentstatuses', 'ComponentStatus', { namespaced: false, verbs: ['get', 'list'] }),
  resource('batch', 'cronjobs', 'CronJob', { version: 'v1beta1', preferred: false }),
];

const every = (entry: string, kinds = '') =>
  buildConfig({
    file: { text: `labels: { a: b }\nkinds:\n  - resource: "*"\n${entry}${kinds}`, source: 'kinds.yaml' },
  });

const names = (kinds: readonly ResolvedKind[]) => kinds.map(controllerName).sort();

test('namespaced (the default), cluster and all: one kind per patchable resource of that scope, default exclusions left out', () => {
  const namespaced = expandEveryKind(every('').everyKind!, [], SERVED);
  assert.deepEqual(names(namespaced.kinds), [
    'configmaps',
    'cronjobs.batch',
    'daemonsets.apps',
    'deployments.apps',
    'jobs.batch',
    'pods',
    'replicasets.apps',
    'replicationcontrollers',
    'services',
    'statefulsets.apps',
    'widgets.example.com',
  ]);
  assert.equal(namespaced.kinds.find((k) => k.resource.resource === 'cronjobs')?.resource.version, 'v1');
  const cluster = expandEveryKind(every('    scope: cluster\n').everyKind!, [], SERVED);
  assert.deepEqual(names(cluster.kinds), ['clusterroles.rbac.authorization.k8s.io', 'namespaces', 'nodes']);
  const all = expandEveryKind(every('    scope: all\n').everyKind!, [], SERVED);
  assert.equal(all.kinds.length, namespaced.kinds.length + cluster.kinds.length);
  // Each expanded kind carries the entry's settings, its resource qualified, and says where it came from.
  const [first] = all.kinds;
  assert.deepEqual([first?.kind.resource, first?.kind.where], ['configmaps', 'kinds.yaml: kinds[0] (configmaps)']);
  assert.deepEqual([...(first?.kind.labels.keys() ?? [])], ['a']);
});

test('the sensitive kinds (Secrets, webhook configurations, admission policies, CRDs) are left out unless named (issue 46, item 8)', () => {
  const all = expandEveryKind(every('    scope: all\n').everyKind!, [], SERVED);
  const sensitive = ['secrets', 'mutatingwebhookconfigurations', 'customresourcedefinitions'];
  assert.deepEqual(all.kinds.filter((k) => sensitive.includes(k.resource.resource)).map(controllerName), []);
  // Named, a kind replaces the every-kind entry for its resource: labelled, as asked.
  const named = buildConfig({
    file: { text: 'labels: { a: b }\nkinds:\n  - resource: "*"\n  - resource: secrets\n', source: 'kinds.yaml' },
  });
  assert.deepEqual(named.kinds.map((k) => k.resource), ['secrets']);
});

test('exclusions are kubectl-style names resolved through discovery; one naming nothing served is kept; an ambiguous one is a KindError', () => {
  const config = every('    exclude: [cm, Deployment, sts.apps, widgets, gadgets.example.com]\n').everyKind!;
  const expansion = expandEveryKind(config, [], SERVED);
  for (const gone of ['configmaps', 'deployments.apps', 'statefulsets.apps', 'widgets.example.com']) {
    assert.ok(!names(expansion.kinds).includes(gone), gone);
  }
  assert.deepEqual(expansion.unmatched, ['gadgets.example.com']);
  const gadgets = resource('example.com', 'gadgets', 'Gadget');
  assert.ok(!names(expandEveryKind(config, [], [...SERVED, gadgets]).kinds).includes('gadgets.example.com'));
  const twoWidgets = [...SERVED, resource('other.io', 'widgets', 'Widget')];
  assert.throws(
    () => expandEveryKind(every('    exclude: [widgets]\n').everyKind!, [], twoWidgets),
    (error: unknown) =>
      error instanceof KindError &&
      /^kinds\.yaml: kinds\[0\]: exclude "widgets": resource "widgets" is ambiguous: widgets\.example\.com, widgets\.other\.io/
        .test(error.message),
  );
});

test('a kind listed explicitly replaces the every-kind entry for its resource, default exclusions included', () => {
  const config = every('', '  - resource: Deployment\n  - resource: ev\n');
  const explicit: ResolvedKind[] = [
    { kind: config.kinds[0]!, resource: SERVED.find((r) => r.resource === 'deployments')! },
    { kind: config.kinds[1]!, resource: SERVED.find((r) => r.resource === 'events' && r.group === '')! },
  ];
  const expanded = names(expandEveryKind(config.everyKind!, explicit, SERVED).kinds);
  assert.ok(!expanded.includes('deployments.apps'));
  assert.ok(!expanded.includes('events') && !expanded.includes('events.events.k8s.io'));
});

test('an exclusion that names nothing served is said once, and again after it was served in between', () => {
  const records: { msg: string }[] = [];
  const log = createLogger({ level: 'info', format: 'json', write: (line) => records.push(JSON.parse(line)) });
  const expander = new EveryKind(log);
  const config = every('    exclude: [gadgets.example.com]\n').everyKind!;
  const warned = () => records.filter((r) => r.msg.startsWith('excluded kind not served')).length;
  expander.expand(config, [], SERVED);
  expander.expand(config, [], SERVED);
  assert.equal(warned(), 1);
  expander.expand(config, [], [...SERVED, resource('example.com', 'gadgets', 'Gadget')]);
  expander.expand(config, [], SERVED);
  assert.equal(warned(), 2);
});
