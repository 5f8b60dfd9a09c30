import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { denoPath } from '../process/runtime.ts';
import { adminClient, createNamespace, kubeconfig, skip } from './cluster.ts';
import { plumbing } from './plumbing.ts';

describe('API plumbing through src/kube', { skip }, () => {
  test("on Node: metadata-only list and watch, server-side apply with labeller's field manager", async (t) => {
    const version = await plumbing(await adminClient(), await createNamespace('plumbing-node'));
    t.diagnostic(`kube-apiserver ${version}, Node ${process.version}`);
  });

  test('on Deno: the same steps', async (t) => {
    const namespace = await createNamespace('plumbing-deno');
    const { stdout } = await promisify(execFile)(denoPath(), [
      'run',
      '-A',
      'test/e2e/plumbing.deno.ts',
      kubeconfig(),
      namespace,
    ], { encoding: 'utf8' });
    assert.match(stdout, /^plumbing ok: kube-apiserver v\d+\.\d+\.\d+ on Deno 2\./m);
    t.diagnostic(stdout.trim());
  });
});
