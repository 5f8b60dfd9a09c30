import assert from 'node:assert/strict';
import { test } from 'node:test';
import { apiVersion, groupResource } from './resource.ts';

const core = { group: '', version: 'v1', resource: 'services', kind: 'Service' };
const apps = { group: 'apps', version: 'v1', resource: 'deployments', kind: 'Deployment' };

test('apiVersion omits the core group', () => {
  assert.equal(apiVersion(core), 'v1');
  assert.equal(apiVersion(apps), 'apps/v1');
});

test('groupResource names the resource as kubectl and RBAC do', () => {
  assert.equal(groupResource(core), 'services');
  assert.equal(groupResource(apps), 'deployments.apps');
});
