import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ConnectionError } from '../apimachinery/errors.ts';
import { KubeClient } from './client.ts';

/**
 * A KubeClient for a loopback server that answers as `respond` does (or not at all): how the
 * client ends requests a peer leaves hanging, which no API server does on demand.
 */
async function withServer(
  respond: Parameters<typeof createServer>[1],
  run: (client: KubeClient) => Promise<void>,
): Promise<void> {
  const server: Server = createServer(respond);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const dir = mkdtempSync(join(tmpdir(), 'labeller-client-'));
  const kubeconfig = join(dir, 'kubeconfig');
  const { port } = server.address() as AddressInfo;
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'c', cluster: { server: `http://127.0.0.1:${port}` } }],
      users: [{ name: 'u', user: { token: 't' } }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    }),
  );
  const client = await KubeClient.load({ kubeconfig });
  try {
    await run(client);
  } finally {
    await client.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  }
}

test('json(): a request with no answer ends at its timeout as a ConnectionError naming it', async () => {
  await withServer(() => {}, async (client) => {
    const failure = await client.json('GET', '/api/v1/namespaces', { timeoutMs: 100 }).catch((e: unknown) => e);
    assert.ok(failure instanceof ConnectionError, String(failure));
    assert.match(failure.message, /GET \/api\/v1\/namespaces: no answer in time/);
  });
});

test('json(): an answer whose body stops half-way ends at the timeout too', async () => {
  await withServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write('{"items": [');
  }, async (client) => {
    const failure = await client.json('GET', '/api/v1/pods', { timeoutMs: 100 }).catch((e: unknown) => e);
    assert.ok(failure instanceof ConnectionError, String(failure));
    assert.match(failure.message, /no answer in time/);
  });
});

test("json(): aborted by its signal, with the signal's reason; an answer in time is read whole", async () => {
  await withServer((req, res) => {
    if (req.url === '/fast') res.end('{"ok":true}');
  }, async (client) => {
    const controller = new AbortController();
    const pending = client.json('GET', '/slow', { signal: controller.signal }).catch((e: unknown) => e);
    const reason = new Error('stopping');
    setTimeout(() => controller.abort(reason), 20);
    assert.equal(await pending, reason);
    assert.deepEqual(await client.json('GET', '/fast', { timeoutMs: 1000 }), { ok: true });
  });
});

test('headers: each request sends the fixed ones once, and a request of its own value of one replaces it', async () => {
  await withServer((req, res) => {
    const names = req.rawHeaders.filter((_, i) => i % 2 === 0).map((name) => name.toLowerCase());
    res.end(JSON.stringify({ names, agent: req.headers['user-agent'], accept: req.headers['accept'] }));
  }, async (client) => {
    const plain = await client.json<{ names: string[]; agent: string }>('GET', '/a', { headers: { accept: 'x/y' } });
    assert.equal(plain.agent, 'labeller');
    assert.deepEqual(plain.names.filter((name) => name === 'user-agent' || name === 'authorization'), [
      'authorization',
      'user-agent',
    ]);
    const own = await client.json<{ names: string[]; agent: string; accept: string }>('POST', '/b', {
      headers: { 'user-agent': 'mine', accept: 'x/z' },
      body: '{}',
    });
    assert.equal(own.agent, 'mine');
    assert.equal(own.accept, 'x/z');
    assert.equal(own.names.filter((name) => name === 'user-agent').length, 1);
    assert.ok(own.names.includes('content-length'));
  });
});
