import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Interner } from './interner.ts';

test('an interned value is shared while used and dropped with its last use', () => {
  const interner = new Interner<readonly string[]>();
  const first = interner.take('a', ['a']);
  assert.equal(interner.take('a', ['a']), first, 'the second use gets the first copy');
  assert.equal(interner.take('b', ['b']).length, 1);
  assert.equal(interner.size, 2);

  interner.release('a');
  assert.equal(interner.size, 2, 'a is still used once');
  interner.release('a');
  interner.release('b');
  assert.equal(interner.size, 0);
  assert.notEqual(interner.take('a', ['a']), first, 'a fresh copy after the last use ended');
  interner.release('never-taken');
  assert.equal(interner.size, 1);
});
