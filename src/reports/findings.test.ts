import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FightTracker } from '../labelling/fights.ts';
import { labelledObject } from '../labelling/testing/objects.ts';
import { findingsOf, policyOf } from './findings.ts';
import { testKind } from './testing/kinds.ts';

const LABELS = { team: '{{namespace.labels.team}}', 'example.com/cost-center': '{{namespace.labels.cc}}' };

/** The findings of one object, as [rule, result, state, message]. */
function found(kind: ReturnType<typeof testKind>, object = labelledObject('web')) {
  return findingsOf(kind, object, 'labeller').findings.map((f) => [f.rule, f.result, f.state, f.message]);
}

test("a key with no value on the object is a shortfall (fail), in explain's words; a key the next apply sets is none", () => {
  const kind = testKind({ labels: LABELS });
  assert.deepEqual(found(kind), [[
    'example.com/cost-center',
    'fail',
    'shortfall',
    'its namespace has no label cc, so the key is not wanted on this object',
  ]]);
  const [finding] = findingsOf(kind, labelledObject('web'), 'labeller').findings;
  assert.deepEqual(finding?.object, { apiVersion: 'v1', kind: 'Pod', name: 'web', namespace: 'shop', uid: 'uid-web' });
  assert.equal(finding?.policy, 'kinds.yaml: kinds[0]');
});

test("another manager's value is a conflict under skip; under force it is taken over by the next apply, so none", () => {
  const object = labelledObject('web', { labels: { team: 'blue' } });
  assert.deepEqual(found(testKind({ labels: { team: LABELS.team }, conflicts: 'skip' }), object), [
    ['team', 'fail', 'conflict', 'set to "blue" by another field manager'],
  ]);
  assert.deepEqual(found(testKind({ labels: { team: LABELS.team }, conflicts: 'force' }), object), []);
});

test('a key yielded in a fight is a fight (fail) until its backoff ends', () => {
  let now = 0;
  const fights = new FightTracker(() => now);
  const object = labelledObject('web', { labels: { team: 'blue' } });
  for (let i = 0; i < 4; i++) fights.contest(object.uid, 'labels/team', true);
  const kind = testKind({ labels: { team: LABELS.team }, conflicts: 'force', fights });
  assert.deepEqual(found(kind, object), [[
    'team',
    'fail',
    'fight',
    'another field manager took it back each time labeller set it',
  ]]);
  now += 61 * 60_000;
  assert.deepEqual(found(kind, object), []);
});

test('a held key is a warning; held only until a cache lists, it is none yet, and the object is looked at again', () => {
  const unreadable = testKind({
    labels: { team: LABELS.team },
    view: () => ({ objects: {}, held: new Map([['namespace', 'unavailable']]) }),
  });
  assert.deepEqual(found(unreadable), [[
    'team',
    'warn',
    'held',
    'its namespace object cannot be read (a kind not followed, not served or refused)',
  ]]);
  const listing = testKind({
    labels: { team: LABELS.team },
    view: () => ({ objects: {}, held: new Map([['namespace', 'pending']]) }),
  });
  assert.deepEqual(findingsOf(listing, labelledObject('web'), 'labeller'), { findings: [], waiting: true });
});

test('an invalid value fails; an object being deleted has no findings', () => {
  const kind = testKind({ labels: { team: '{{labels.app}}!' } });
  const [[rule, result, state, message]] = found(kind, labelledObject('web', { labels: { app: 'web' } })) as [
    string[],
  ];
  assert.deepEqual([rule, result, state], ['team', 'fail', 'invalid']);
  assert.match(message!, /web!/);
  assert.deepEqual(found(kind, labelledObject('web', { labels: { app: 'web' }, deleting: true })), []);
});

test('an object that carries every key as wanted, or will once applied, has no findings and is not traced', () => {
  const kind = testKind({ labels: { team: LABELS.team } });
  assert.deepEqual(found(kind, labelledObject('web', { labels: { team: 'red' }, ownedLabels: ['team'] })), []);
  assert.deepEqual(found(kind, labelledObject('new')), []);
});

test('the policy is the config entry, the file by its name alone: where a pod mounts it says nothing', () => {
  assert.equal(policyOf('/etc/labeller/kinds.yaml: kinds[0]'), 'kinds.yaml: kinds[0]');
  assert.equal(policyOf('kinds.yaml: kinds[2]'), 'kinds.yaml: kinds[2]');
  assert.equal(policyOf('--kinds "deployments.apps"'), '--kinds "deployments.apps"');
  assert.equal(policyOf('--kinds "a/b"'), '--kinds "a/b"');
});
