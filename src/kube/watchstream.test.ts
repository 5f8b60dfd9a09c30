import assert from 'node:assert/strict';
import { Buffer } from 'node:buffer';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { readWatchStream, WatchDecodeError } from './watchstream.ts';

/** Every event read from `chunks`, sent one by one. */
async function read(chunks: readonly string[]): Promise<unknown[]> {
  const events: unknown[] = [];
  const body = Readable.from(chunks.map((chunk) => Buffer.from(chunk)), { objectMode: false });
  for await (const batch of readWatchStream(body, { idleMs: 10_000, path: '/watch' })) events.push(...batch);
  return events;
}

test('events are read whole however the stream is cut: a line over three chunks, several in one, blank lines and CRLF', async () => {
  const events = [{ type: 'ADDED', n: 1 }, { type: 'MODIFIED', n: 2 }, { type: 'DELETED', n: 3 }, { type: 'BOOKMARK' }];
  const text = `${events.map((e) => JSON.stringify(e)).join('\n')}\r\n\n`;
  // Every way of cutting the text in three.
  for (let i = 0; i <= text.length; i += 3) {
    for (let j = i; j <= text.length; j += 5) {
      assert.deepEqual(await read([text.slice(0, i), text.slice(i, j), text.slice(j)]), events, `cut at ${i}, ${j}`);
    }
  }
  // One byte at a time, and a last line without its newline.
  assert.deepEqual(await read([...text]), events);
  assert.deepEqual(await read(['{"type":"ADDED"}\n{"type":', '"DELETED"}']), [{ type: 'ADDED' }]);
});

test('an event that is not JSON fails the stream, naming it', async () => {
  await assert.rejects(read(['{"type":"ADDED"}\nnot json\n']), WatchDecodeError);
});

test('a character of several bytes cut between two chunks is read whole', async () => {
  const event = { type: 'ADDED', object: { metadata: { name: 'zürich-東京-🚀' } } };
  const bytes = Buffer.from(`${JSON.stringify(event)}\n`);
  for (let cut = 1; cut < bytes.length; cut++) {
    const body = Readable.from([bytes.subarray(0, cut), bytes.subarray(cut)], { objectMode: false });
    const events: unknown[] = [];
    for await (const batch of readWatchStream(body, { idleMs: 10_000, path: '/watch' })) events.push(...batch);
    assert.deepEqual(events, [event], `cut at byte ${cut}`);
  }
});

test('the events of a chunk come as one batch; those before a line that is not JSON come before the failure', async () => {
  const body = Readable.from([Buffer.from('{"n":1}\n{"n":2}\n'), Buffer.from('{"n":3}\nnot json\n')], {
    objectMode: false,
  });
  const batches: unknown[][] = [];
  const failure = await (async () => {
    for await (const batch of readWatchStream(body, { idleMs: 10_000, path: '/watch' })) batches.push([...batch]);
  })().catch((error: unknown) => error);
  assert.deepEqual(batches, [[{ n: 1 }, { n: 2 }], [{ n: 3 }]]);
  assert.ok(failure instanceof WatchDecodeError);
});
