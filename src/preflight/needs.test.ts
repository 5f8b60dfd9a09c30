import assert from 'node:assert/strict';
import { test } from 'node:test';
import { needsOf } from './needs.ts';
import type { SourceSpec } from '../config/sources.ts';
import { resource } from '../apimachinery/testing/resources.ts';

const source = (name: string, namespace: string, map: string): SourceSpec => ({
  name,
  origin: { type: 'configMap', namespace, name: map, key: undefined },
  required: false,
  allowMassRemoval: false,
  acceptSmallerAfterMs: 600_000,
});

test('needs: each kind where it is watched, related caches, ConfigMap sources, Events and Leases', () => {
  const needs = needsOf({
    kinds: [{ resource: { group: 'apps', resource: 'deployments' }, namespaces: ['shop', 'web'] }],
    related: [{
      resource: resource('', 'namespaces', 'Namespace', { namespaced: false }),
      namespace: '',
      name: 'shop',
    }],
    sources: [source('catalog', 'ops', 'teams')],
    events: true,
    leaseNamespace: 'ops',
    leaderElection: 'labeller',
    shardGroup: undefined,
    guard: { name: 'labeller-field-manager' },
    sourceMemory: 'labeller-sources',
  });
  const brief = needs.map((n) =>
    `${n.verbs.join(',')} ${n.resource}${n.group ? `.${n.group}` : ''}${n.name ? `/${n.name}` : ''}@${
      n.namespace || '*'
    } for ${n.for}`
  );
  assert.deepEqual(brief, [
    'list,watch,patch deployments.apps@shop for kind deployments.apps',
    'list,watch,patch deployments.apps@web for kind deployments.apps',
    'list,watch namespaces/shop@* for templates read namespaces',
    'list,watch configmaps/teams@ops for source catalog',
    'create,patch events.events.k8s.io@shop for Events (or --events=false)',
    'create,patch events.events.k8s.io@web for Events (or --events=false)',
    'create leases.coordination.k8s.io@ops for leader election',
    'get,update leases.coordination.k8s.io/labeller@ops for leader election',
    'list leases.coordination.k8s.io@ops for field-manager guard',
    'create leases.coordination.k8s.io@ops for field-manager guard',
    'get,update leases.coordination.k8s.io/labeller-field-manager@ops for field-manager guard',
    'delete leases.coordination.k8s.io/labeller-field-manager@ops for field-manager guard',
    "create leases.coordination.k8s.io@ops for sources' memory",
    "get,update leases.coordination.k8s.io/labeller-sources@ops for sources' memory",
  ]);
});

test("needs of a shard member: its group's Leases, any name in the lease namespace, before the guard's (a member's guard Lease carries its identity); the namespaces' names for its layout when a kind is watched in all", () => {
  const input = {
    kinds: [{ resource: { group: '', resource: 'configmaps' }, namespaces: [''] }],
    related: [],
    sources: [],
    events: false,
    leaseNamespace: 'ops',
    leaderElection: undefined,
    shardGroup: 'rel-labeller',
    guard: { name: undefined },
    sourceMemory: undefined,
  };
  const needs = needsOf(input);
  assert.deepEqual(
    needs.filter((n) => n.resource === 'namespaces').map((n) => [n.verbs.join(','), n.namespace, n.for]),
    [['list', '', 'shard group rel-labeller layout']],
  );
  const named = needsOf({
    ...input,
    kinds: [{ resource: { group: '', resource: 'configmaps' }, namespaces: ['shop'] }],
  });
  assert.deepEqual(
    named.filter((n) => n.resource === 'namespaces'),
    [],
    'kinds in named namespaces: those are laid out',
  );
  assert.deepEqual(
    needs.filter((n) => n.resource === 'leases').map((n) => [n.verbs.join(','), n.name, n.namespace, n.for]),
    [
      ['get,list,create,update,delete', undefined, 'ops', 'shard group rel-labeller'],
      ['list', undefined, '', 'field-manager guard'],
      ['create', undefined, 'ops', 'field-manager guard'],
      ['get,update', undefined, 'ops', 'field-manager guard'],
      ['delete', undefined, 'ops', 'field-manager guard'],
    ],
  );
});

/** A config that runs no kind and writes nothing of its own: what the optional needs add to. */
const NOTHING = {
  kinds: [],
  related: [],
  sources: [],
  events: false,
  leaseNamespace: 'ops',
  leaderElection: undefined,
  shardGroup: undefined,
  guard: undefined,
  sourceMemory: undefined,
};

test('needs of --admission-policies: list, create, patch and delete on the policies and bindings cluster-wide; get on every ConfigMap when a policy reads one as its params', () => {
  const input = NOTHING;
  const brief = (params: boolean | undefined, protection = false, mutating = true) =>
    needsOf({ ...input, admissionPolicies: params === undefined ? undefined : { params, protection, mutating } }).map((
      n,
    ) => `${n.verbs.join(',')} ${n.resource}${n.group ? `.${n.group}` : ''}@${n.namespace || '*'}`);
  assert.deepEqual(brief(undefined), []);
  const policies = [
    'list,create,patch,delete mutatingadmissionpolicies.admissionregistration.k8s.io@*',
    'list,create,patch,delete mutatingadmissionpolicybindings.admissionregistration.k8s.io@*',
  ];
  const protecting = [
    'list,create,patch,delete validatingadmissionpolicies.admissionregistration.k8s.io@*',
    'list,create,patch,delete validatingadmissionpolicybindings.admissionregistration.k8s.io@*',
  ];
  assert.deepEqual(brief(false), policies);
  assert.deepEqual(brief(true), [...policies, 'get configmaps@*']);
  // Protection: the validating policies too; where the mutating ones are not served (1.30-1.35), those alone.
  assert.deepEqual(brief(false, true), [...policies, ...protecting]);
  assert.deepEqual(brief(false, true, false), protecting);
});

test('needs of --policy-reports: list, create, patch and delete on PolicyReports and ClusterPolicyReports cluster-wide', () => {
  const reports = (policyReports: boolean) =>
    needsOf({ ...NOTHING, policyReports }).filter((n) => n.group === 'wgpolicyk8s.io').map((n) =>
      `${n.verbs.join(',')} ${n.resource}@${n.namespace || '*'} for ${n.for}`
    );
  assert.deepEqual(reports(false), []);
  assert.deepEqual(reports(true), [
    'list,create,patch,delete policyreports@* for policy reports',
    'list,create,patch,delete clusterpolicyreports@* for policy reports',
  ]);
});
