import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ApiResource } from '../kube/resource.ts';
import { prunable } from './prune.ts';

const resource = (fields: Partial<ApiResource>): ApiResource => ({
  group: 'apps',
  version: 'v1',
  resource: 'deployments',
  singular: 'deployment',
  kind: 'Deployment',
  shortNames: [],
  namespaced: true,
  verbs: ['list', 'watch', 'patch'],
  preferred: true,
  ...fields,
});

test('prunable: one version per resource (the preferred one), only with list and patch, only namespaced ones when namespaces are given', () => {
  const resources = [
    resource({ version: 'v1beta1', preferred: false }),
    resource({}),
    resource({ group: 'autoscaling', resource: 'horizontalpodautoscalers', version: 'v1', preferred: false }),
    resource({ group: 'autoscaling', resource: 'horizontalpodautoscalers', version: 'v2', preferred: true }),
    resource({ group: 'x.example.com', resource: 'olds', version: 'v1beta1', preferred: false }),
    resource({ group: '', resource: 'componentstatuses', verbs: ['list', 'get'], namespaced: false }),
    resource({ group: 'authentication.k8s.io', resource: 'tokenreviews', verbs: ['create'], namespaced: false }),
    resource({ group: '', resource: 'namespaces', namespaced: false }),
  ];
  const key = (r: ApiResource) => `${r.resource}.${r.group}/${r.version}`;
  assert.deepEqual(prunable(resources, false).map(key), [
    'deployments.apps/v1',
    'horizontalpodautoscalers.autoscaling/v2',
    'olds.x.example.com/v1beta1',
    'namespaces./v1',
  ]);
  assert.deepEqual(prunable(resources, true).map(key), [
    'deployments.apps/v1',
    'horizontalpodautoscalers.autoscaling/v2',
    'olds.x.example.com/v1beta1',
  ]);
});
