import assert from 'node:assert/strict';
import { test } from 'node:test';
import jsonpatch from 'fast-json-patch';
import fc from 'fast-check';
import { before, metadataPatch } from './patch.ts';

const labelPatch = (a: Record<string, string>, b: Record<string, string>) => metadataPatch('labels', before(a), b);

test('removals and replacements first, in reverse order, then additions; keys escaped as JSON Pointers', () => {
  assert.deepEqual(
    labelPatch({ a: '1', 'example.com/b': '2', gone: 'x' }, { a: '1', 'example.com/b': '3', 'c~d': '4' }),
    [
      { op: 'remove', path: '/metadata/labels/gone' },
      { op: 'replace', path: '/metadata/labels/example.com~1b', value: '3' },
      { op: 'add', path: '/metadata/labels/c~0d', value: '4' },
    ],
  );
  assert.deepEqual(labelPatch({ a: '1' }, { a: '1' }), []);
});

test('the operations are those of a general JSON diff, and applying them gives the labels after', () => {
  const labels = fc.dictionary(
    fc.constantFrom('a', 'b', 'c', 'example.com/d', 'e~f', 'g', '1', '10'),
    fc.constantFrom('', 'x', 'y', 'z'),
    { noNullPrototype: true },
  );
  fc.assert(fc.property(labels, labels, (before, after) => {
    const ops = labelPatch(before, after);
    assert.deepEqual(ops, jsonpatch.compare({ metadata: { labels: before } }, { metadata: { labels: after } }));
    assert.deepEqual(
      jsonpatch.applyPatch({ metadata: { labels: { ...before } } }, ops.map((op) => ({ ...op })), true).newDocument
        .metadata.labels,
      after,
    );
  }));
});

test('annotations seen through digests: a key whose value is unknown but differs is replaced', () => {
  const digests = { keys: ['example.com/runbook', 'example.com/gone'], holds: () => false };
  assert.deepEqual(metadataPatch('annotations', digests, { 'example.com/runbook': 'https://x/y', new: 'n' }), [
    { op: 'remove', path: '/metadata/annotations/example.com~1gone' },
    { op: 'replace', path: '/metadata/annotations/example.com~1runbook', value: 'https://x/y' },
    { op: 'add', path: '/metadata/annotations/new', value: 'n' },
  ]);
});
