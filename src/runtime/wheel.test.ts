import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TimingWheel } from './wheel.ts';

test('a key is due at the end of its slot: never before its time, at most a slot after', () => {
  const wheel = new TimingWheel(1000);
  wheel.set('a', 1500);
  wheel.set('b', 2000);
  wheel.set('c', 2001);
  assert.deepEqual([wheel.deadline('a'), wheel.deadline('b'), wheel.deadline('c')], [2000, 2000, 3000]);
  assert.equal(wheel.next(), 2000);
  assert.deepEqual(wheel.due(1999), []);
  assert.deepEqual(wheel.due(2000), ['a', 'b']);
  assert.equal(wheel.deadline('a'), undefined, 'out of the wheel once due');
  assert.deepEqual(wheel.due(10_000), ['c']);
  assert.equal(wheel.next(), undefined);
  assert.equal(wheel.size, 0);
});

test('set moves a key to its new slot; delete takes it out', () => {
  const wheel = new TimingWheel(1000);
  wheel.set('a', 5000);
  wheel.set('a', 3000);
  wheel.set('b', 4000);
  wheel.set('c', 4000);
  wheel.delete('c');
  wheel.delete('never-added');
  assert.equal(wheel.size, 2);
  assert.deepEqual(wheel.due(3000), ['a']);
  assert.deepEqual(wheel.due(5000), ['b'], 'a left its first slot when it moved');
});

test('slots emptied by delete are skipped, and refilled ones come due once', () => {
  const wheel = new TimingWheel(1000);
  wheel.set('a', 1000);
  wheel.set('b', 2000);
  wheel.delete('a');
  assert.equal(wheel.next(), 2000, 'the emptied slot is not the next one');
  wheel.set('c', 2000);
  wheel.delete('b');
  wheel.delete('c');
  wheel.set('d', 2000);
  assert.deepEqual(wheel.due(2000), ['d']);
  assert.deepEqual(wheel.due(3000), []);
});

test('due returns keys slot by slot, earliest first; clear empties the wheel', () => {
  const wheel = new TimingWheel(10);
  // A fixed pseudo-random order of deadlines.
  const at = Array.from({ length: 200 }, (_, i) => (i * 7919) % 1000);
  at.forEach((ms, i) => wheel.set(`k${i}`, ms));
  const due = wheel.due(1000);
  const slots = due.map((key) => Math.ceil((at[Number(key.slice(1))] ?? 0) / 10));
  assert.equal(due.length, 200);
  assert.deepEqual(slots, [...slots].sort((a, b) => a - b));
  wheel.set('x', 5000);
  wheel.clear();
  assert.deepEqual([wheel.size, wheel.next(), wheel.due(10_000).length], [0, undefined, 0]);
});
