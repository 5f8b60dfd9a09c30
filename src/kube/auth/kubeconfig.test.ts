import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { test } from 'node:test';
import { kubeconfigFiles, loadKubeconfig } from './kubeconfig.ts';

const dir = mkdtempSync(join(tmpdir(), 'labeller-kubeconfig-'));
const write = (name: string, config: object): string => {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(config));
  return path;
};

const a = write('a', {
  clusters: [{ name: 'c1', cluster: { server: 'https://one', 'certificate-authority': 'ca.pem' } }],
  users: [{
    name: 'u1',
    user: { tokenFile: 'token', 'client-certificate': '/abs/cert', exec: { command: './bin/plugin' } },
  }],
  contexts: [{ name: 'one', context: { cluster: 'c1', user: 'u1', namespace: 'shop' } }],
  'current-context': 'one',
});
const b = write('b', {
  clusters: [{ name: 'c1', cluster: { server: 'https://shadowed' } }, {
    name: 'c2',
    cluster: { server: 'https://two' },
  }],
  users: [{ name: 'u2', user: { token: 't2' } }],
  contexts: [{ name: 'two', context: { cluster: 'c2', user: 'u2' } }],
  'current-context': 'two',
});

test('relative paths are resolved against the file; absolute ones and plain commands are kept', () => {
  const selection = loadKubeconfig([a], undefined);
  assert.equal(selection.context, 'one');
  assert.equal(selection.namespace, 'shop');
  assert.equal(selection.cluster['certificate-authority'], join(dir, 'ca.pem'));
  assert.equal(selection.user.tokenFile, join(dir, 'token'));
  assert.equal(selection.user['client-certificate'], '/abs/cert');
  assert.equal(selection.user.exec?.command, join(dir, 'bin/plugin'));
});

test('merged files: the first to define a name or the current context wins; missing files are skipped', () => {
  const merged = loadKubeconfig([join(dir, 'missing'), a, b], undefined);
  assert.equal(merged.context, 'one');
  const two = loadKubeconfig([a, b], 'two');
  assert.equal(two.cluster.server, 'https://two');
  assert.equal(two.user.token, 't2');
  const shadowed = write('c', { contexts: [{ name: 'x', context: { cluster: 'c1' } }], 'current-context': 'x' });
  assert.equal(loadKubeconfig([a, shadowed], 'x').cluster.server, 'https://one');
});

test('errors name the problem and the fix', () => {
  assert.throws(
    () => loadKubeconfig([a], 'nope'),
    /context "nope" is not in the kubeconfig \(contexts: one\). Pass one of them with --context/,
  );
  assert.throws(
    () => loadKubeconfig([join(dir, 'missing')], undefined),
    /cannot load kubeconfig .*missing: ENOENT.*Pass --kubeconfig with a valid file/,
  );
  assert.throws(() => loadKubeconfig([write('empty', {})], undefined), /no current context/);
  assert.throws(
    () => loadKubeconfig([write('dangling', { 'current-context': 'gone' })], undefined),
    /current-context "gone" is not in the kubeconfig \(contexts: none\)/,
  );
  assert.throws(
    () =>
      loadKubeconfig([
        write('nocluster', { contexts: [{ name: 'x', context: { cluster: 'gone' } }], 'current-context': 'x' }),
      ], undefined),
    /names cluster "gone", which the kubeconfig does not define/,
  );
  assert.throws(
    () => loadKubeconfig([write('noserver', { clusters: [{ name: 'c', cluster: {} }] })], undefined),
    /clusters\[0\].cluster.server is missing/,
  );
  const bad = join(dir, 'bad');
  writeFileSync(bad, 'clusters: [\n');
  assert.throws(() => loadKubeconfig([bad], undefined), /cannot load kubeconfig .*bad: /);
});

test('which files: --kubeconfig, else $KUBECONFIG, else ~/.kube/config when it exists', () => {
  assert.deepEqual(kubeconfigFiles('/x', { KUBECONFIG: '/y' }), ['/x']);
  assert.deepEqual(kubeconfigFiles(undefined, { KUBECONFIG: `/y${delimiter}${delimiter}/z` }), ['/y', '/z']);
  assert.equal(kubeconfigFiles(undefined, { HOME: dir }), undefined);
});
