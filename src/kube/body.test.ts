import assert from 'node:assert/strict';
import { createServer, get, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { readBody } from './body.ts';

/** Answers one GET on loopback with `respond`, and hands the client's response to `read`. */
async function exchange<T>(
  respond: (res: ServerResponse) => void,
  read: (response: IncomingMessage) => Promise<T>,
): Promise<T> {
  const server = createServer((_req, res) => respond(res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const { port } = server.address() as AddressInfo;
    const response = await new Promise<IncomingMessage>((resolve, reject) =>
      get(`http://127.0.0.1:${port}/`, resolve).on('error', reject)
    );
    return await read(response);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

const LISTENED = ['data', 'end', 'error', 'close'] as const;
const listeners = (response: IncomingMessage): number[] => LISTENED.map((event) => response.listenerCount(event));

test('readBody joins the chunks of a body, multi-byte characters split across them included', async () => {
  const text = await exchange((res) => {
    const bytes = Buffer.from('{"name":"grüße"}');
    res.write(bytes.subarray(0, 13)); // inside "ü"'s two bytes
    setTimeout(() => res.end(bytes.subarray(13)), 10);
  }, readBody);
  assert.equal(text, '{"name":"grüße"}');
});

test('readBody leaves no listener on the response, so a pooled connection does not keep the body alive', async () => {
  await exchange((res) => res.end('x'.repeat(100_000)), async (response) => {
    const before = listeners(response);
    assert.equal((await readBody(response)).length, 100_000);
    assert.deepEqual(listeners(response), before);
  });
});

test('readBody rejects when the connection drops before the end, and lets go of the response', async () => {
  await exchange((res) => {
    res.writeHead(200, { 'content-length': '100' });
    res.write('partial');
    setTimeout(() => res.destroy(), 10);
  }, async (response) => {
    response.on('error', () => {}); // as KubeClient does: the drop is the reader's to report
    const before = listeners(response);
    await assert.rejects(readBody(response));
    assert.deepEqual(listeners(response), before);
  });
});
