// The fault proxy against a plain TCP echo server on loopback: a delay that changes while bytes
// are in flight must neither duplicate nor reorder them (a TLS stream through it would break).
import assert from 'node:assert/strict';
import { connect, createServer, type Server } from 'node:net';
import { test } from 'node:test';
import { FaultProxy } from './faultproxy.ts';

async function echoServer(): Promise<{ server: Server; port: number }> {
  const server = createServer((socket) => socket.pipe(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  assert.ok(address && typeof address !== 'string');
  return { server, port: address.port };
}

test('delays set, changed and ended on an open connection forward every byte once, in order', async () => {
  const { server, port } = await echoServer();
  const proxy = await FaultProxy.start(`https://127.0.0.1:${port}`);
  const socket = connect(Number(new URL(proxy.url).port), '127.0.0.1');
  let received = '';
  socket.setEncoding('utf8');
  socket.on('data', (text: string) => received += text);
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  const sent: string[] = [];
  const send = async (count: number): Promise<void> => {
    for (let i = 0; i < count; i++) {
      const line = `${sent.length};`;
      sent.push(line);
      socket.write(line);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  };
  try {
    await send(5);
    proxy.delay(60);
    await send(5);
    proxy.delay(120);
    await send(5);
    proxy.delay(10); // shorter: what follows must not overtake what the longer delay holds
    await send(5);
    proxy.delay(0);
    await send(5);
    const expected = sent.join('');
    for (let i = 0; i < 100 && received.length < expected.length; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await new Promise((resolve) => setTimeout(resolve, 150));
    assert.equal(received, expected);
  } finally {
    socket.destroy();
    await proxy.close();
    server.close();
  }
});
