// Proxies from the environment, as kubectl reads them, against the real API server behind a
// CONNECT proxy: the kubeconfig names the API server by a host name that resolves nowhere, so only
// a tunnel through the proxy reaches it. HTTPS_PROXY carries every request (discovery, list,
// watch, apply); NO_PROXY naming the host sends them direct (and so nowhere); a kubeconfig
// proxy-url wins over the environment, an HTTP or a SOCKS5 one (with a user and password), through
// labeller's own tunnels: client-node is not loaded for it.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, describe, test } from 'node:test';
import { ConnectProxy } from '../cluster/connectproxy.ts';
import { runLabeller } from '../process/labeller.ts';
import { create, createNamespace, kubeconfig, labelsOf, skip, writeKubeconfig } from './cluster.ts';

describe('proxies from the environment', { skip }, () => {
  const server = () =>
    new URL(
      (JSON.parse(readFileSync(kubeconfig(), 'utf8')) as { clusters: { cluster: { server: string } }[] }).clusters[0]!
        .cluster.server,
    );

  test('HTTPS_PROXY tunnels every request, NO_PROXY bypasses it, a kubeconfig proxy-url wins', async () => {
    const api = server();
    const proxy = await ConnectProxy.start({ host: '127.0.0.1', port: Number(api.port) });
    const other = await ConnectProxy.start({ host: '127.0.0.1', port: Number(api.port) });
    const socks = await ConnectProxy.start({ host: '127.0.0.1', port: Number(api.port) }, {
      user: 'labeller',
      password: 'p@ss:word',
    });
    after(() => Promise.all([proxy.close(), other.close(), socks.close()]));
    const ns = await createNamespace('proxy');
    await create(`/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'c' } });
    // The API server's certificate names "kubernetes"; "kube.labeller.test" resolves nowhere.
    const host = `kube.labeller.test:${api.port}`;
    const byName = writeKubeconfig({ server: `https://${host}`, cluster: { 'tls-server-name': 'kubernetes' } });
    const args = ['--kinds', 'configmaps', '--namespace', ns, '--once', '--kubeconfig', byName];
    for (const runtime of ['node', 'deno'] as const) {
      const label = `proxied-${runtime}`;
      const through = await runLabeller([...args, '--label', `via=${label}`], {
        runtime,
        env: { HTTPS_PROXY: proxy.url, NO_PROXY: 'localhost,.example.com' },
      });
      assert.equal(through.code, 0, through.stderr);
      assert.equal((await labelsOf(`/api/v1/namespaces/${ns}/configmaps/c`))['via'], label);
      // Only labeller's own tunnels count: Deno may ask the proxy for its update check too.
      assert.ok(proxy.targets.filter((t) => t === host).length >= 2, proxy.targets.join(' '));
    }
    const tunnels = proxy.targets.filter((t) => t === host).length;
    const bypassed = await runLabeller([...args, '--label', 'via=direct'], {
      env: { https_proxy: proxy.url, no_proxy: '.labeller.test' },
    });
    assert.equal(bypassed.code, 1, 'straight to a name that resolves nowhere');
    assert.match(bypassed.fatal ?? '', /cannot reach the API server at https:\/\/kube\.labeller\.test/);
    assert.equal(proxy.targets.filter((t) => t === host).length, tunnels, 'not through the proxy');
    const proxyUrl = writeKubeconfig({
      server: `https://${host}`,
      cluster: { 'tls-server-name': 'kubernetes', 'proxy-url': other.url },
    });
    const configured = await runLabeller([...args.slice(0, -1), proxyUrl, '--label', 'via=proxy-url'], {
      env: { HTTPS_PROXY: 'http://127.0.0.1:1' },
    });
    assert.equal(configured.code, 0, configured.stderr);
    assert.ok(other.targets.length > 0, 'the kubeconfig proxy-url, not the environment');
    for (const runtime of ['node', 'deno'] as const) {
      const label = `socks5-${runtime}`;
      const viaSocks = writeKubeconfig({
        server: `https://${host}`,
        cluster: { 'tls-server-name': 'kubernetes', 'proxy-url': socks.url },
      });
      const throughSocks = await runLabeller([...args.slice(0, -1), viaSocks, '--label', `via=${label}`], { runtime });
      assert.equal(throughSocks.code, 0, throughSocks.stderr);
      assert.equal((await labelsOf(`/api/v1/namespaces/${ns}/configmaps/c`))['via'], label);
    }
    assert.ok(socks.targets.filter((t) => t === host).length >= 4, `SOCKS5 targets: ${socks.targets.join(' ')}`);
    const wrong = writeKubeconfig({
      server: `https://${host}`,
      cluster: { 'tls-server-name': 'kubernetes', 'proxy-url': socks.url.replace('p%40ss', 'nope') },
    });
    const refused = await runLabeller([...args.slice(0, -1), wrong, '--label', 'via=refused']);
    assert.equal(refused.code, 1);
    assert.match(refused.fatal ?? '', /SOCKS5 proxy 127\.0\.0\.1:\d+ refused the user and password/);
    const unknown = writeKubeconfig({ cluster: { 'proxy-url': 'ftp://127.0.0.1:21' } });
    const badScheme = await runLabeller([...args.slice(0, -1), unknown, '--label', 'via=ftp']);
    assert.equal(badScheme.code, 2, badScheme.stderr);
    assert.match(
      badScheme.fatal ?? '',
      /proxy-url "ftp:\/\/127\.0\.0\.1:21": the scheme must be http, https or socks5/,
    );
  });
});
