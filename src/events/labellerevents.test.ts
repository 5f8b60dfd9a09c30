import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { test } from 'node:test';
import { ApiError } from '../apimachinery/errors.ts';
import { eventsIdentity, outcomeEvents, readFightNote, refusalEvent } from './labellerevents.ts';

const cm = { apiVersion: 'v1', kind: 'ConfigMap', name: 'web', namespace: 'shop', uid: 'u1' };
const pod = { apiVersion: 'v1', kind: 'Pod', name: 'labeller-0', namespace: 'ops', uid: 'p1' };

test('a label left alone is a LabelConflict naming the key, its value or owner, and the wanted value', () => {
  const [event, ...more] = outcomeEvents(cm, {
    outcome: 'patched',
    patch: [],
    contested: [{ field: 'labels', key: 'team', wanted: 'platform', value: 'search' }, {
      field: 'labels',
      key: 'tier',
      wanted: 'web',
      manager: 'kubectl-label',
    }],
  });
  assert.deepEqual(more, []);
  assert.deepEqual(event, {
    regarding: cm,
    type: 'Warning',
    reason: 'LabelConflict',
    action: 'Labelling',
    note:
      'left to another field manager (conflicts: skip): label team is "search"; labeller wants "platform"; label tier, owned by field manager "kubectl-label"; labeller wants "web"',
  });
});

test('an invalid value is an InvalidLabelValue; other outcomes are no Event', () => {
  const [event] = outcomeEvents(cm, {
    outcome: 'invalid',
    patch: [],
    problems: [{
      field: 'labels',
      key: 'x',
      problem: 'label x: "{{name}}" rendered "-": must start with an alphanumeric',
    }],
  });
  assert.equal(event?.reason, 'InvalidLabelValue');
  assert.equal(
    event.note,
    'label x: "{{name}}" rendered "-": must start with an alphanumeric; that key is held, the rest applied',
  );
  for (const outcome of ['unchanged', 'patched', 'gone', 'conflict'] as const) {
    assert.deepEqual(outcomeEvents(cm, { outcome, patch: [] }), [], outcome);
  }
});

test('a 403 or 404 of a list or watch is an Event on the Pod, one series per kind; other failures are none', () => {
  const forbidden = refusalEvent(
    pod,
    'secrets',
    new ApiError('GET', '/api/v1/secrets', 403, { reason: 'Forbidden', message: 'no' }),
  );
  assert.equal(forbidden?.reason, 'KindForbidden');
  assert.deepEqual(forbidden.regarding, pod);
  assert.equal(forbidden.action, 'Watching secrets');
  assert.match(forbidden.note, /^secrets: GET \/api\/v1\/secrets: 403 Forbidden: no/);
  assert.equal(
    refusalEvent(pod, 'widgets.example.com', new ApiError('GET', '/apis/example.com/v1/widgets', 404, {}))?.reason,
    'KindNotFound',
  );
  assert.equal(refusalEvent(pod, 'secrets', new ApiError('GET', '/api/v1/secrets', 500, {})), undefined);
  assert.equal(refusalEvent(pod, 'secrets', new Error('socket hang up')), undefined);
});

test('the reporter is the Pod from the downward API, else the host', () => {
  assert.deepEqual(eventsIdentity({ POD_NAME: 'labeller-0', POD_NAMESPACE: 'ops', POD_UID: 'p1' }), {
    instance: 'labeller-0',
    pod,
  });
  assert.deepEqual(eventsIdentity({ POD_NAME: 'labeller-0' }), { instance: 'labeller-0', pod: undefined });
  assert.deepEqual(eventsIdentity({}), { instance: hostname(), pod: undefined });
});

test('a fight is a LabelFight naming the key and the manager that keeps taking it', () => {
  const [event] = outcomeEvents(cm, {
    outcome: 'conflict',
    patch: [],
    fights: [{ field: 'labels', key: 'team', manager: 'argocd-controller', retakes: 3, backoffMs: 60_000 }],
  });
  assert.equal(event?.reason, 'LabelFight');
  assert.match(
    event.note,
    /^label team was taken back by field manager "argocd-controller" each time labeller set it \(3 times in 10 min\); left to it for 60 s, then retaken once/,
  );
});
test('labeller explain reads a LabelFight note back: field, key, manager and backoff', () => {
  const fights = [
    { field: 'labels', key: 'example.com/team', manager: 'argocd-controller', retakes: 3, backoffMs: 120_000 },
    { field: 'annotations', key: 'note', retakes: 3, backoffMs: 60_000 },
  ] as const;
  const notes = outcomeEvents(cm, { outcome: 'conflict', patch: [], fights: [...fights] }).map((e) => e.note);
  assert.deepEqual(notes.map(readFightNote), [
    { field: 'labels', key: 'example.com/team', manager: 'argocd-controller', backoffMs: 120_000 },
    { field: 'annotations', key: 'note', backoffMs: 60_000 },
  ]);
  assert.equal(readFightNote('left to another field manager (conflicts: skip): label team is "x"'), undefined);
});
