import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { FILE_REREAD_MS } from './credentialfiles.ts';
import { connect, CredentialsProvider } from './credentials.ts';
import { inCluster } from './incluster.ts';

function serviceAccount(): string {
  const dir = mkdtempSync(join(tmpdir(), 'labeller-sa-'));
  writeFileSync(join(dir, 'token'), 'token-1\n');
  writeFileSync(join(dir, 'ca.crt'), 'CA');
  writeFileSync(join(dir, 'namespace'), 'shop');
  return dir;
}

test("in-cluster: server from KUBERNETES_SERVICE_HOST/PORT (IPv6 in brackets), the pod's namespace, no kubeconfig needed", async () => {
  const dir = serviceAccount();
  const home = mkdtempSync(join(tmpdir(), 'labeller-home-'));
  const env = { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443', HOME: home };
  const connection = await connect({ env, serviceAccountDir: dir });
  assert.equal(connection.server, 'https://[fd00::1]:443');
  assert.equal(connection.namespace, 'shop');
  assert.equal((await connection.credentials.current()).headers['authorization'], 'Bearer token-1');
  await assert.rejects(connect({ env, serviceAccountDir: dir, context: 'x' }), /--context x needs a kubeconfig/);
  await assert.rejects(
    connect({ env: { HOME: home }, serviceAccountDir: dir }),
    /no kubeconfig .* and not inside a cluster/,
  );
});

test('in-cluster: the rotated token is read again within FILE_REREAD_MS, and at once after a 401', async () => {
  const dir = serviceAccount();
  let now = 0;
  const pod = inCluster({ KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' }, dir, () => now);
  const source = new CredentialsProvider(pod.identity, 'https://cluster.test');
  const first = await source.current();
  writeFileSync(join(dir, 'token.new'), 'token-2\n');
  renameSync(join(dir, 'token.new'), join(dir, 'token'));
  assert.equal(await source.current(), first);
  now += FILE_REREAD_MS;
  const second = await source.current();
  assert.equal(second.headers['authorization'], 'Bearer token-2');
  assert.equal(second.transport, first.transport);
  writeFileSync(join(dir, 'token'), 'token-3\n');
  assert.equal((await source.refresh(second)).headers['authorization'], 'Bearer token-3');
});
