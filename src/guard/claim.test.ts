// Which of the live guard Leases stop a labeller from writing: those of the same field manager, with
// another config, whose scope overlaps, outside the labeller's own leader-election group.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Lease } from '../kube/lease.ts';
import { blockers, type Claim, claimOf, guardLeaseName } from './claim.ts';

const NOW = Date.parse('2026-01-01T00:00:00Z');

function holder(
  fields: {
    config?: string;
    scope?: string;
    group?: string;
    fieldManager?: string;
    holder?: string | null;
  } = {},
): Lease {
  return {
    metadata: {
      name: 'field-manager-labeller',
      namespace: 'labeller',
      annotations: {
        'labeller/field-manager': fields.fieldManager ?? 'labeller',
        'labeller/config': fields.config ?? 'sha256:other',
        'labeller/scope': fields.scope ?? 'configmaps@*',
        'labeller/leader-election': fields.group ?? '',
      },
    },
    spec: {
      holderIdentity: fields.holder === undefined ? 'pod-1' : fields.holder,
      leaseDurationSeconds: 15,
      renewTime: new Date(NOW - 1000).toISOString(),
    },
  };
}

const me: Claim = {
  fieldManager: 'labeller',
  fingerprint: 'sha256:mine',
  scope: ['configmaps@default', 'deployments.apps@*'],
  identity: 'laptop_1',
};

test('a live holder of another config writing the same kinds in an overlapping namespace blocks', () => {
  assert.equal(blockers([holder()], me).length, 1);
  assert.equal(blockers([holder({ scope: 'configmaps@default' })], me).length, 1);
  assert.equal(
    blockers([holder({ scope: 'deployments.apps@shop' })], me).length,
    1,
    'all namespaces overlap any one',
  );
});

test("the same config, another field manager, a disjoint scope do not block (expiry is the observer's: lease/observer.ts)", () => {
  assert.deepEqual(
    blockers([holder({ config: 'sha256:mine' })], me),
    [],
    'same config (replicas, a once-run of it)',
  );
  assert.deepEqual(blockers([holder({ fieldManager: 'other' })], me), [], 'another field manager');
  assert.deepEqual(
    blockers([holder({ scope: 'configmaps@shop,secrets@*' })], me),
    [],
    'other namespace, other kind',
  );
});

test('replicas of one leader-election group do not block each other, whatever their configs (a rolling update)', () => {
  const replica: Claim = { ...me, group: 'labeller/rel-labeller' };
  assert.deepEqual(blockers([holder({ group: 'labeller/rel-labeller' })], replica), []);
  assert.equal(blockers([holder({ group: 'labeller/another' })], replica).length, 1);
  assert.equal(
    blockers([holder({ group: 'labeller/rel-labeller' })], me).length,
    1,
    'a process outside the group is blocked',
  );
});

test('guard Lease names are valid Kubernetes names whatever the field manager', () => {
  assert.match(guardLeaseName(me), /^field-manager-labeller-[0-9a-f]{10}$/);
  assert.notEqual(
    guardLeaseName(me),
    guardLeaseName({ ...me, identity: 'laptop_2' }),
    'standalone: one Lease per holder',
  );
  assert.equal(guardLeaseName({ ...me, group: 'ops/rel-labeller' }), 'rel-labeller-field-manager');
  assert.match(
    guardLeaseName({ ...me, fieldManager: 'Team A:Labeller' }),
    /^field-manager-team-a-labeller-[0-9a-f]{10}$/,
  );
});

test("a holder's own Lease never blocks it, whatever config it last wrote (a reload)", () => {
  assert.deepEqual(blockers([holder({ holder: 'laptop_1', config: 'sha256:before' })], me), []);
});

test("with --admission-policies the claim covers the field manager's policies: two such configs always overlap, one without them does not", () => {
  const config = { kinds: [], ownerKinds: [], sources: new Map(), references: new Map() };
  const kinds = { resolved: [], unknown: [] };
  const policies = claimOf(config, kinds, true).scope;
  assert.deepEqual(policies, ['mutatingadmissionpolicies.admissionregistration.k8s.io@*']);
  assert.deepEqual(claimOf(config, kinds).scope, []);
  const keeping = holder({ scope: policies.join(',') });
  assert.equal(blockers([keeping], { ...me, scope: policies }).length, 1);
  assert.deepEqual(blockers([keeping], me), []);
});
