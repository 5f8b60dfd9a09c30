import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ApiResource } from './resource.ts';
import type { ResolveFailure } from './resolve.ts';
import { everyResource, ResolveError, resolveResource } from './resolve.ts';

const all = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'];

function res(fields: Partial<ApiResource> & Pick<ApiResource, 'resource' | 'kind'>): ApiResource {
  return {
    group: '',
    version: 'v1',
    singular: fields.kind.toLowerCase(),
    shortNames: [],
    namespaced: true,
    verbs: all,
    preferred: true,
    ...fields,
  };
}

const pods = res({ resource: 'pods', kind: 'Pod', shortNames: ['po'] });
const services = res({ resource: 'services', kind: 'Service', shortNames: ['svc'] });
const events = res({ resource: 'events', kind: 'Event', shortNames: ['ev'] });
const deployments = res({ group: 'apps', resource: 'deployments', kind: 'Deployment', shortNames: ['deploy'] });
const scale = res({ group: 'apps', resource: 'deployments/scale', kind: 'Scale', singular: '' });
const deploymentsBeta = { ...deployments, version: 'v1beta1', preferred: false };
const newEvents = res({ group: 'events.k8s.io', resource: 'events', kind: 'Event', shortNames: ['ev'] });
const podMetrics = res({
  group: 'metrics.k8s.io',
  version: 'v1beta1',
  resource: 'pods',
  kind: 'PodMetrics',
  verbs: ['get', 'list'],
});
const fooA = res({ group: 'a.example.com', resource: 'foos', kind: 'Foo', shortNames: ['fo'] });
const fooB = res({ group: 'b.example.com', resource: 'foos', kind: 'Foo', shortNames: ['fo'] });
// A CRD whose short names collide with a built-in plural and a built-in short name.
const widgets = res({
  group: 'c.example.com',
  resource: 'widgets',
  kind: 'Widget',
  shortNames: ['deployments', 'svc'],
});
// Served only outside the group's preferred version, listed in preference order.
const oldsBeta = res({ group: 'x.example.com', version: 'v1beta1', resource: 'olds', kind: 'Old', preferred: false });
const oldsAlpha = { ...oldsBeta, version: 'v1alpha1' };
// Some aggregated API servers publish no singular name; only the kind identifies it.
const gizmos = res({ group: 'x.example.com', version: 'v2', resource: 'gizmos', kind: 'Gizmo', singular: '' });

const discovery: readonly ApiResource[] = [
  pods,
  services,
  events,
  deployments,
  scale,
  deploymentsBeta,
  newEvents,
  podMetrics,
  fooA,
  fooB,
  widgets,
  oldsBeta,
  oldsAlpha,
  gizmos,
];

function rejects(name: string, reason: ResolveFailure, message: string, required?: readonly string[]): void {
  assert.throws(
    () => resolveResource(name, discovery, required),
    (error: unknown) => {
      assert.ok(error instanceof ResolveError);
      assert.equal(error.reason, reason);
      assert.equal(error.message, message);
      return true;
    },
  );
}

test('resolves every kubectl name form, case-insensitively', () => {
  const cases: readonly [string, ApiResource][] = [
    ['deployments', deployments],
    ['deployment', deployments],
    ['deploy', deployments],
    ['Deployment', deployments],
    ['DEPLOYMENTS', deployments],
    ['deployments.apps', deployments],
    ['Deployment.Apps', deployments],
    ['deployments.v1.apps', deployments],
    ['Deployment.v1.apps', deployments],
    ['deploy.v1beta1.apps', deploymentsBeta],
    ['pods', pods],
    ['po', pods],
    ['Pod', pods],
    ['pods.v1', pods],
    ['pods.v1.', pods],
    ['svc', services],
    ['foos.a.example.com', fooA],
    ['Foo.b.example.com', fooB],
    ['fo.v1.b.example.com', fooB],
    ['gizmo', gizmos],
    ['Gizmo.x.example.com', gizmos],
  ];
  for (const [name, expected] of cases) {
    assert.equal(resolveResource(name, discovery), expected, name);
  }
});

test('chooses the preferred version, or the first listed when the preferred one does not serve the resource', () => {
  assert.equal(resolveResource('deployments', [deploymentsBeta, deployments]), deployments);
  assert.equal(resolveResource('olds', discovery), oldsBeta);
});

test('core names win over the same names in other groups, as in kubectl', () => {
  assert.equal(resolveResource('pods', discovery), pods);
  assert.equal(resolveResource('events', discovery), events);
  assert.equal(resolveResource('ev', discovery), events);
  assert.equal(resolveResource('events.events.k8s.io', discovery), newEvents);
});

test('a plural or singular wins over a short name, which wins over a kind', () => {
  assert.equal(resolveResource('deployments', discovery), deployments);
  assert.equal(resolveResource('svc', discovery), services);
  const kindOfWidget = res({ group: 'y.example.com', resource: 'things', kind: 'Widget', singular: 'thing' });
  assert.equal(resolveResource('widget', [kindOfWidget, widgets]), widgets);
});

test('the same name in several non-core groups is ambiguous', () => {
  const message =
    'resource "foos" is ambiguous: foos.a.example.com, foos.b.example.com. Qualify it with its group, e.g. "foos.a.example.com"';
  rejects('foos', 'ambiguous', message);
  rejects('fo', 'ambiguous', message.replace('"foos"', '"fo"'));
  rejects('Foo', 'ambiguous', message.replace('"foos"', '"Foo"'));
});

test('an unknown name suggests the nearest spelling, qualified as the user qualified it', () => {
  rejects(
    'deploymnts',
    'unknown',
    'unknown resource "deploymnts": not served by the API server. Did you mean "deployments"? (list them with: kubectl api-resources)',
  );
  rejects(
    'deploymnts.apps',
    'unknown',
    'unknown resource "deploymnts.apps": not served by the API server. Did you mean "deployments.apps"? (list them with: kubectl api-resources)',
  );
  rejects(
    'deployments.v2.apps',
    'unknown',
    'unknown resource "deployments.v2.apps": not served by the API server. Did you mean "deployments.v1.apps"? (list them with: kubectl api-resources)',
  );
  rejects(
    'xyzzy',
    'unknown',
    'unknown resource "xyzzy": not served by the API server (list them with: kubectl api-resources)',
  );
});

test('subresources are never candidates', () => {
  rejects(
    'scale',
    'unknown',
    'unknown resource "scale": not served by the API server (list them with: kubectl api-resources)',
  );
  assert.throws(() => resolveResource('deployments/scale', discovery), { reason: 'unknown' });
});

test('a resource without a required verb names what is missing and what labeller needs', () => {
  rejects(
    'pods.metrics.k8s.io',
    'verbs',
    'resource "pods.metrics.k8s.io" does not support "watch" or "patch" (it supports: get, list); labeller needs list, watch and patch',
  );
  rejects(
    'PodMetrics',
    'verbs',
    'resource "pods.metrics.k8s.io" does not support "watch" (it supports: get, list); labeller needs get and watch',
    ['get', 'watch'],
  );
  assert.equal(resolveResource('PodMetrics', discovery, ['list']), podMetrics);
});

test('everyResource: one version per resource (the preferred one when it has the verbs), only with list, watch and patch, no subresources', () => {
  const resources = [
    deploymentsBeta,
    deployments,
    scale,
    res({ group: 'autoscaling', resource: 'horizontalpodautoscalers', kind: 'HPA', version: 'v1', preferred: false }),
    res({ group: 'autoscaling', resource: 'horizontalpodautoscalers', kind: 'HPA', version: 'v2' }),
    res({ group: 'x.example.com', resource: 'olds', kind: 'Old', version: 'v1beta1', preferred: false }),
    res({ group: 'x.example.com', resource: 'olds', kind: 'Old', version: 'v1beta2', preferred: false }),
    // The preferred version lacks patch: the next one that has it.
    res({ group: 'y.example.com', resource: 'odd', kind: 'Odd', verbs: ['list', 'watch'] }),
    res({ group: 'y.example.com', resource: 'odd', kind: 'Odd', version: 'v2', preferred: false }),
    res({ resource: 'componentstatuses', kind: 'ComponentStatus', verbs: ['list', 'get'], namespaced: false }),
    res({ group: 'authentication.k8s.io', resource: 'tokenreviews', kind: 'TokenReview', verbs: ['create'] }),
    res({ resource: 'namespaces', kind: 'Namespace', namespaced: false }),
  ];
  const key = (r: ApiResource) => `${r.resource}.${r.group}/${r.version}`;
  assert.deepEqual(everyResource(resources).map(key), [
    'deployments.apps/v1',
    'horizontalpodautoscalers.autoscaling/v2',
    'olds.x.example.com/v1beta1',
    'odd.y.example.com/v2',
    'namespaces./v1',
  ]);
  assert.deepEqual(everyResource(resources, ['list']).map(key).slice(-3), [
    'odd.y.example.com/v1',
    'componentstatuses./v1',
    'namespaces./v1',
  ]);
});
