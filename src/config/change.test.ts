import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildConfig } from './overlay.ts';
import { kindChange } from './change.ts';

const kind = (yaml: string) =>
  buildConfig({ file: { text: `labels: { team: a }\nkinds: [${yaml}]\n`, source: 'kinds.yaml' } }).kinds[0]!;

test('other labels, templates or conflict policy relabel a kind: its cached objects are checked again, no relist', () => {
  assert.equal(kindChange(kind('{ resource: cm }'), kind('{ resource: cm, conflicts: skip }')), 'relabel');
  assert.equal(
    kindChange(
      kind('{ resource: svc, labels: { app: "{{labels.app}}" } }'),
      kind('{ resource: svc, labels: { app: web } }'),
    ),
    'relabel',
    'a template read of the object itself dropped: the cache keeps labels anyway',
  );
});

test('other namespaces, a selector, annotations, fields or related fields read restart a kind', () => {
  assert.equal(
    kindChange(kind('{ resource: deploy, namespaces: [a] }'), kind('{ resource: deploy, namespaces: [b] }')),
    'restart',
  );
  assert.equal(kindChange(kind('{ resource: deploy }'), kind('{ resource: deploy, selector: app }')), 'restart');
  assert.equal(
    kindChange(
      kind('{ resource: pods, labels: { o: "{{annotations.example.com/owner}}" } }'),
      kind('{ resource: pods, labels: { o: "{{annotations.example.com/team}}" } }'),
    ),
    'restart',
  );
  assert.equal(
    kindChange(
      kind('{ resource: pods, labels: { o: "{{owner.name}}" } }'),
      kind('{ resource: pods, labels: { o: "{{root.name}}" } }'),
    ),
    'restart',
  );
  // The cache keeps the fields read, of a whole watch: another field, or none, is another cache.
  assert.equal(
    kindChange(
      kind('{ resource: pvc, labels: { c: "{{spec.storageClassName}}" } }'),
      kind('{ resource: pvc, labels: { c: "{{spec.volumeName}}" } }'),
    ),
    'restart',
  );
  assert.equal(
    kindChange(kind('{ resource: pods, labels: { z: "{{node.labels.zone}}" } }'), kind('{ resource: pods }')),
    'restart',
  );
});

test('the same kind, or its namespaces in another order, changes nothing', () => {
  assert.equal(
    kindChange(kind('{ resource: cm, namespaces: [x, y] }'), kind('{ resource: cm, namespaces: [y, x] }')),
    'same',
  );
});
