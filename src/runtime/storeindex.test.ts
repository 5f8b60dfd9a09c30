import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StoreIndex } from './storeindex.ts';

test('a group grows from one key to an array to a Set and shrinks back, keeping every key once', () => {
  const index = new StoreIndex<string>('group', (group) => group);
  const keys = Array.from({ length: 12 }, (_, i) => `k${i}`);
  for (const key of keys) index.update(key, undefined, 'g');
  index.update('k0', undefined, 'g');
  assert.deepEqual([...index.get('g')], keys, 'past the small-group size');
  for (const key of keys.slice(1)) index.update(key, 'g', undefined);
  assert.deepEqual([...index.get('g')], ['k0']);
  index.update('k0', 'g', 'h');
  assert.deepEqual([...index.get('g')], []);
  assert.deepEqual([...index.get('h')], ['k0']);
});

test('small groups: add, re-add and remove in any order', () => {
  const index = new StoreIndex<string>('group', (group) => group);
  for (const key of ['a', 'b', 'c', 'b']) index.update(key, undefined, 'g');
  assert.deepEqual([...index.get('g')], ['a', 'b', 'c']);
  index.update('b', 'g', undefined);
  index.update('x', 'g', undefined);
  assert.deepEqual([...index.get('g')], ['a', 'c']);
  index.update('a', 'g', undefined);
  assert.deepEqual([...index.get('g')], ['c']);
});

test('a list under way is indexed as it arrives and swapped in when it completes, or given up', () => {
  const index = new StoreIndex<string>('group', (group) => group);
  index.update('a', undefined, 'g');
  index.stage('p', undefined, 'g');
  index.stage('q', undefined, 'h');
  index.stage('q', 'h', 'g');
  assert.deepEqual([...index.get('g')], ['a'], 'the index in use until the list completes');
  index.commit();
  assert.deepEqual([[...index.get('g')], [...index.get('h')]], [['p', 'q'], []]);
  index.stage('x', undefined, 'g');
  index.discard();
  index.commit();
  assert.deepEqual([...index.get('g')], [], 'a list with no objects, after one given up');
});

test('an object indexed under no value is not indexed', () => {
  const index = new StoreIndex<string | undefined>('value', (value) => value);
  index.update('k', undefined, undefined);
  index.update('k', undefined, 'v');
  index.update('k', 'v', undefined);
  assert.deepEqual([...index.get('v')], []);
});

test("an object indexed under several values (a list's items) is found under each, and moves value by value", () => {
  const index = new StoreIndex<readonly string[]>('claims', (claims) => claims);
  index.update('pod-a', undefined, ['data', 'logs']);
  index.update('pod-b', undefined, ['data']);
  assert.deepEqual([[...index.get('data')], [...index.get('logs')]], [['pod-a', 'pod-b'], ['pod-a']]);
  index.update('pod-a', ['data', 'logs'], ['logs', 'cache']);
  assert.deepEqual([[...index.get('data')], [...index.get('logs')], [...index.get('cache')]], [['pod-b'], ['pod-a'], [
    'pod-a',
  ]]);
  index.update('pod-a', ['logs', 'cache'], undefined);
  assert.deepEqual([[...index.get('logs')], [...index.get('cache')]], [[], []]);
});
