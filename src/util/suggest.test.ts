import assert from 'node:assert/strict';
import { test } from 'node:test';
import { suggest } from './suggest.ts';

const FIELDS = ['resource', 'namespaces', 'selector', 'labels', 'conflicts'];

test('suggest finds the closest candidate within a third of the word length', () => {
  assert.equal(suggest('namespace', FIELDS), 'namespaces');
  assert.equal(suggest('lables', FIELDS), 'labels');
  assert.equal(suggest('Resource', FIELDS), 'resource');
  assert.equal(suggest('selectr', FIELDS), 'selector');
  assert.equal(suggest('kind', ['kinds', 'labels']), 'kinds');
  assert.equal(suggest('nmae', ['name', 'namespace']), 'name');
});

test('suggest returns undefined when nothing is close', () => {
  assert.equal(suggest('replicas', FIELDS), undefined);
  assert.equal(suggest('ns', FIELDS), undefined);
  assert.equal(suggest('anything', []), undefined);
});

test('suggest prefers the nearest of several candidates', () => {
  assert.equal(suggest('namespacs', ['names', 'namespaces']), 'namespaces');
  assert.equal(suggest('abcd', ['abxx', 'abcx']), 'abcx');
});
