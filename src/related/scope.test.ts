import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildConfig } from '../config/overlay.ts';
import { relatedScope, scopeLacks } from './scope.ts';

const scope = (yaml: string) => relatedScope(buildConfig({ file: { text: yaml, source: 'kinds.yaml' } }).kinds);
const kinds = (labels: string, namespaces = '') =>
  `kinds:\n  - resource: cm\n    labels: ${labels}\n${namespaces}  - resource: secrets\n    labels: { a: b }\n${namespaces}`;
const inShop = '    namespaces: [shop]\n';

test('what every cache shares comes from all the kinds: owner and root reads, related annotations, namespaces', () => {
  const shared = scope(
    kinds(`{ a: "{{owner.name}}", b: "{{namespace.annotations.example.com/team}}", c: "{{annotations.x}}" }`, inShop),
  );
  assert.deepEqual(shared, {
    reads: true,
    owners: true,
    roots: false,
    annotations: new Set(['example.com/team']),
    namespaced: true,
  });
  assert.deepEqual(scope(kinds('{ a: "{{root.name}}" }')), {
    reads: true,
    owners: true,
    roots: true,
    annotations: new Set(),
    namespaced: false,
  });
});

test('caches serve a config that needs no more than they keep; what they lack is named', () => {
  const none = scope(kinds('{ a: b }'));
  const namespace = scope(kinds('{ a: "{{namespace.labels.team}}" }'));
  const owner = scope(kinds('{ a: "{{owner.labels.tier}}" }'));
  const root = scope(kinds('{ a: "{{root.annotations.example.com/note}}" }'));
  // namespace.* needs nothing shared: its caches are made when a kind reading it is wired.
  assert.deepEqual(scopeLacks(none, namespace), []);
  assert.deepEqual(scopeLacks(namespace, none), []);
  assert.deepEqual(scopeLacks(none, owner), ['owner.* read']);
  assert.deepEqual(scopeLacks(owner, root), ['root.* read', 'annotations of related objects read: example.com/note']);
  assert.deepEqual(scopeLacks(root, owner), [], 'caches that keep more still serve');
});

test('where related objects are watched: all namespaces or only those listed, once something related is read', () => {
  const clusterWide = scope(kinds('{ a: b }'));
  const namespaced = scope(kinds('{ a: b }', inShop));
  assert.deepEqual(scopeLacks(clusterWide, scope(kinds('{ a: "{{namespace.labels.team}}" }', inShop))), [
    'every kind limited to namespaces',
  ]);
  assert.deepEqual(scopeLacks(namespaced, scope(kinds('{ a: "{{owner.name}}" }'))), [
    'owner.* read',
    'a kind in all namespaces',
  ]);
  assert.deepEqual(scopeLacks(clusterWide, namespaced), [], 'nothing related read: nothing to watch');
});
