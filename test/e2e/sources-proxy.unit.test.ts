// URL sources through a proxy from the environment, as kubectl honours one: the loader reaches
// the HTTPS catalogue by a name that resolves nowhere only through the CONNECT proxy (HTTPS_PROXY
// or https_proxy), with TLS to the catalogue end to end; NO_PROXY naming the host sends it
// direct (and so nowhere), and a loopback address is never proxied. Both are local servers, so
// this needs no cluster and runs with the unit tests.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { httpLoader } from '../../src/sources/http.ts';
import type { Loaded } from '../../src/sources/loader.ts';
import { Catalog } from '../cluster/catalog.ts';
import { ConnectProxy } from '../cluster/connectproxy.ts';

const token = 'proxied-token';
const catalog = new Catalog(token);
let proxy: ConnectProxy;
let byName = '';

before(async () => {
  catalog.body = '{"web": {"costCenter": "cc-1"}}';
  await catalog.up();
  const port = Number(new URL(catalog.url).port);
  proxy = await ConnectProxy.start({ host: '127.0.0.1', port });
  byName = `https://${Catalog.host}:${port}/teams.json`;
});
after(() => Promise.all([proxy.close(), catalog.close()]));

/** One read of `url` with the catalogue's CA and token, in environment `env`. */
async function read(url: string, env: Readonly<Record<string, string>>): Promise<Loaded | Error> {
  const results: (Loaded | Error)[] = [];
  const loader = httpLoader({
    url,
    intervalMs: 60_000,
    timeoutMs: 5_000,
    caFile: catalog.caFile,
    bearerTokenFile: catalog.tokenFile,
    maxBytes: 1024,
  }, env);
  await loader((result) => results.push(result), new AbortController().signal, true);
  assert.equal(results.length, 1);
  return results[0]!;
}

test('HTTPS_PROXY (or https_proxy) tunnels a URL source to its endpoint, token and TLS end to end', async () => {
  const host = byName.slice('https://'.length, byName.indexOf('/', 'https://'.length));
  for (const env of [{ HTTPS_PROXY: proxy.url }, { https_proxy: proxy.url, NO_PROXY: 'localhost,.example.com' }]) {
    const asked = proxy.targets.length;
    const loaded = await read(byName, env);
    assert.ok(!(loaded instanceof Error), String(loaded));
    assert.equal(loaded.content.size, 1);
    assert.deepEqual(proxy.targets.slice(asked), [host], 'one tunnel, to the endpoint by name');
    assert.equal(catalog.authorizations.at(-1), `Bearer ${token}`);
  }
});

test('NO_PROXY naming the host sends it direct, a loopback address never goes through the proxy, and a proxy that fails is named', async () => {
  const asked = proxy.targets.length;
  const direct = await read(byName, { HTTPS_PROXY: proxy.url, no_proxy: '.labeller.test' });
  assert.match(String(direct), /: (ENOTFOUND|EAI_AGAIN)$/, 'straight to a name that resolves nowhere');
  const loopback = await read(catalog.url, { HTTPS_PROXY: proxy.url });
  assert.ok(!(loopback instanceof Error), String(loopback));
  assert.equal(proxy.targets.length, asked, 'not through the proxy');
  // Port 1: nothing listens there.
  const down = await read(byName, { HTTPS_PROXY: 'http://127.0.0.1:1' });
  assert.equal(String(down), `Error: ${byName} through proxy 127.0.0.1:1: ECONNREFUSED`);
});
