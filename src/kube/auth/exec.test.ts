import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { test } from 'node:test';
import { EXPIRY_MARGIN_MS, freshUntil, parseExecCredential } from './exec.ts';

const V1 = 'client.authentication.k8s.io/v1';
const output = (status: object, apiVersion = V1) => JSON.stringify({ apiVersion, kind: 'ExecCredential', status });

test('a credential is used until shortly before its expiry: 10 s, or half its lifetime when shorter', () => {
  assert.equal(freshUntil(undefined, 0), Infinity);
  assert.equal(freshUntil(3_600_000, 0), 3_600_000 - EXPIRY_MARGIN_MS);
  assert.equal(freshUntil(8_000, 0), 4_000);
  // Already expired when obtained: stale at once, so the next request runs the plugin again.
  assert.equal(freshUntil(1_000, 5_000), 1_000);
});

test('a token with its expiry', () => {
  const credential = parseExecCredential(
    output({ token: 'abc', expirationTimestamp: '2030-01-02T03:04:05Z' }),
    V1,
    'plugin',
  );
  assert.equal(credential.token, 'abc');
  assert.equal(credential.expiresAt, Date.parse('2030-01-02T03:04:05Z'));
  assert.equal(credential.pair, undefined);
});

test('bad plugin output names the problem', () => {
  const cases: [string, RegExp][] = [
    ['not json', /output is not JSON/],
    [
      output({ token: 'a' }, 'client.authentication.k8s.io/v1beta1'),
      /apiVersion "client.authentication.k8s.io\/v1beta1", but the kubeconfig asks for client.authentication.k8s.io\/v1/,
    ],
    [JSON.stringify({ apiVersion: V1, kind: 'Other', status: { token: 'a' } }), /kind "Other", not ExecCredential/],
    [output({}), /neither status.token nor a client certificate/],
    [output({ clientCertificateData: 'x' }), /only one of/],
    [output({ token: 'a', expirationTimestamp: 'soon' }), /"soon" is not a time/],
  ];
  for (const [stdout, message] of cases) assert.throws(() => parseExecCredential(stdout, V1, 'plugin'), message);
});

test('a certificate and key that do not belong together are refused', () => {
  const one = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' })
    .toString();
  assert.throws(
    () => parseExecCredential(output({ clientCertificateData: 'not a cert', clientKeyData: one }), V1, 'plugin'),
    /client certificate from exec plugin plugin/,
  );
});
