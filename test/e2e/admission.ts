// What the admission e2e tests share: `labeller admission` run through the CLI as a user runs it,
// its output applied with kubectl as a GitOps tool would, and removed again (by the labels the
// policies carry) when the file's tests end. The policies act on every create the cluster
// serves, shared with other test files: each test's config limits them to its own namespaces.
import assert from 'node:assert/strict';
import { after } from 'node:test';
import { fieldManagerSelector } from '../../src/config/fieldmanager.ts';
import { Labeller } from '../process/labeller.ts';
import { kubeconfig } from './cluster.ts';
import { tool } from './helm.ts';

const KINDS = 'mutatingadmissionpolicies,mutatingadmissionpolicybindings';

/** What `labeller admission <args>` printed, on stdout and stderr; it must succeed. */
export async function admission(args: readonly string[]): Promise<{ stdout: string; stderr: string }> {
  const run = await new Labeller(['admission', ...args]).exited;
  assert.equal(run.code, 0, run.stderr);
  return run;
}

/** Applies `manifest` with kubectl; the policies of `fieldManager` are deleted when the file's tests end. */
export async function apply(manifest: string, fieldManager: string): Promise<void> {
  after(async () => {
    await tool('kubectl', ['--kubeconfig', kubeconfig(), 'delete', KINDS, '-l', fieldManagerSelector(fieldManager)]);
  });
  const run = await tool('kubectl', ['--kubeconfig', kubeconfig(), 'apply', '-f', '-'], manifest);
  assert.equal(run.code, 0, `kubectl apply: ${run.stderr}`);
}
