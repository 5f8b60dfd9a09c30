import assert from 'node:assert/strict';
import { createServer, request } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { test } from 'node:test';
import { sleep } from '../util/sleep.ts';
import { keepAliveTransport, retire } from './transport.ts';

/** A loopback server that keeps the connections opened to it, to count those still open. */
async function server() {
  const opened: Socket[] = [];
  const http = createServer((_, res) => res.end('ok'));
  http.on('connection', (socket: Socket) => opened.push(socket));
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    opened,
    open: () => opened.filter((s) => !s.destroyed).length,
    close: () => {
      http.closeAllConnections();
      http.close();
    },
  };
}

function get(port: number, agent: ReturnType<ReturnType<typeof keepAliveTransport>['pool']>): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/', agent }, (res) => {
      res.resume();
      res.on('end', resolve);
    });
    req.on('error', reject);
    req.end();
  });
}

test('a connection idle from one sweep to the next is closed; one in use between sweeps is kept', async () => {
  const peer = await server();
  const pool = keepAliveTransport(peer.url, {}, undefined, 500).pool();
  try {
    // In use every 10 ms for over a second (three sweeps): one connection all along. A sweep
    // closes only a connection idle through a whole interval, so a busy machine's stalls of up to
    // half a second between two requests keep it too.
    for (let i = 0; i < 120; i++) {
      await get(peer.port, pool);
      await sleep(10);
    }
    assert.equal(peer.opened.length, 1, 'the connection was kept between requests');
    assert.equal(peer.open(), 1);
    // Idle: closed within two sweeps, and gone from the pool.
    await sleep(1600);
    assert.equal(peer.open(), 0, 'the idle connection was closed');
    assert.deepEqual(Object.values(pool.freeSockets).flat(), []);
    // The pool goes on with a new connection.
    await get(peer.port, pool);
    assert.equal(peer.opened.length, 2);
  } finally {
    retire(pool);
    pool.destroy();
    peer.close();
  }
});

test('a retired pool closes its idle connections at once', async () => {
  const peer = await server();
  const pool = keepAliveTransport(peer.url, {}, undefined, 60_000).pool();
  try {
    await get(peer.port, pool);
    assert.equal(peer.open(), 1);
    retire(pool);
    await sleep(50);
    assert.equal(peer.open(), 0);
  } finally {
    pool.destroy();
    peer.close();
  }
});
