import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bypassed, proxyFor } from './proxy.ts';

const server = new URL('https://api.cluster.example.com:6443');

test('HTTPS_PROXY (or https_proxy, uppercase first) proxies an https API server; an http one, localhost and loopback never', () => {
  assert.equal(proxyFor(server, {})?.href, undefined);
  assert.equal(proxyFor(server, { HTTPS_PROXY: 'http://proxy:3128' })?.href, 'http://proxy:3128/');
  assert.equal(
    proxyFor(server, { https_proxy: 'proxy:3128' })?.href,
    'http://proxy:3128/',
    'host:port, as Go takes it',
  );
  assert.equal(proxyFor(server, { HTTPS_PROXY: 'http://a:1', https_proxy: 'http://b:2' })?.host, 'a:1');
  assert.equal(proxyFor(server, { HTTP_PROXY: 'http://proxy:3128' }), undefined, 'HTTP_PROXY is for http servers');
  const env = { HTTPS_PROXY: 'http://proxy:3128' };
  for (const direct of ['https://localhost:6443', 'https://127.0.0.1:6443', 'https://[::1]:6443', 'http://api:8080']) {
    assert.equal(proxyFor(new URL(direct), env), undefined, direct);
  }
});

test('NO_PROXY: hosts, domains and subdomains, .subdomains only, IPs, CIDRs, ports, and *', () => {
  const env = (noProxy: string) => ({ HTTPS_PROXY: 'http://proxy:3128', NO_PROXY: noProxy });
  assert.equal(proxyFor(server, env('example.com')), undefined, 'a domain covers its subdomains');
  assert.equal(proxyFor(server, env('other.com, *')), undefined);
  assert.ok(proxyFor(server, env('cluster.example.org')));
  assert.equal(bypassed('example.com', '443', '.example.com'), false, 'a leading dot: subdomains only');
  assert.equal(bypassed('a.example.com', '443', '.example.com'), true);
  assert.equal(bypassed('example.com', '443', 'example.com'), true);
  assert.equal(bypassed('notexample.com', '443', 'example.com'), false);
  assert.equal(bypassed('10.96.0.1', '443', '10.0.0.0/8'), true);
  assert.equal(bypassed('11.96.0.1', '443', '10.0.0.0/8'), false);
  assert.equal(bypassed('10.96.0.1', '443', '10.96.0.1'), true);
  assert.equal(bypassed('fd00::1', '443', 'fd00::/8'), true);
  assert.equal(bypassed('api.example.com', '6443', 'api.example.com:443'), false, 'another port');
  assert.equal(bypassed('api.example.com', '6443', 'api.example.com:6443'), true);
  assert.equal(bypassed('fd00::1', '6443', '[fd00::1]:6443'), true);
});
