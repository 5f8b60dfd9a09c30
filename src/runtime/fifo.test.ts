import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Fifo } from './fifo.ts';

test('hands items out in arrival order across interleaved pushes and shifts', () => {
  const fifo = new Fifo<number>();
  const out: number[] = [];
  for (let i = 0; i < 1000; i++) {
    fifo.push(i);
    if (i % 3 === 0) out.push(fifo.shift() ?? -1);
  }
  assert.equal(fifo.length, 1000 - out.length);
  for (let item = fifo.shift(); item !== undefined; item = fifo.shift()) out.push(item);
  assert.deepEqual(out, Array.from({ length: 1000 }, (_, i) => i));
  assert.equal(fifo.length, 0);
});

test('clear empties it', () => {
  const fifo = new Fifo<string>();
  fifo.push('a');
  fifo.push('b');
  fifo.shift();
  fifo.clear();
  assert.equal(fifo.length, 0);
  assert.equal(fifo.shift(), undefined);
});
