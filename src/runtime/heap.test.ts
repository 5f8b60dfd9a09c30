import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MinHeap } from './heap.ts';

test('pops in order whatever the push order', () => {
  const heap = new MinHeap<number>((a, b) => a < b);
  // A fixed pseudo-random sequence with duplicates.
  const input = Array.from({ length: 500 }, (_, i) => (i * 7919) % 263);
  for (const n of input) heap.push(n);
  const out: number[] = [];
  for (let n = heap.pop(); n !== undefined; n = heap.pop()) out.push(n);
  assert.deepEqual(out, [...input].sort((a, b) => a - b));
});

test('peek shows the next item without removing it; an empty heap gives undefined', () => {
  const heap = new MinHeap<number>((a, b) => a < b);
  assert.equal(heap.peek(), undefined);
  assert.equal(heap.pop(), undefined);
  heap.push(3);
  heap.push(1);
  heap.push(2);
  assert.equal(heap.peek(), 1);
  assert.equal(heap.pop(), 1);
  assert.equal(heap.peek(), 2);
  heap.clear();
  assert.equal(heap.peek(), undefined);
});
