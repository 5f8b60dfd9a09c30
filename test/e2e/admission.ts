// What the admission e2e tests share: `labeller admission` run through the CLI as a user runs it,
// its output applied with kubectl as a GitOps tool would, and removed again (by the labels the
// policies carry) when the file's tests end. The policies act on every create the cluster
// serves, shared with other test files: each test's config limits them to its own namespaces.
import assert from 'node:assert/strict';
import { after } from 'node:test';
import { policySelector } from '../../src/admission/names.ts';
import { fieldManagerSelector } from '../../src/config/fieldmanager.ts';
import type { KubeClient } from '../../src/kube/client.ts';
import { Labeller } from '../process/labeller.ts';
import { adminClient, kubeconfig } from './cluster.ts';
import { tool } from './helm.ts';

const KINDS =
  'mutatingadmissionpolicies,mutatingadmissionpolicybindings,validatingadmissionpolicies,validatingadmissionpolicybindings';
const API = '/apis/admissionregistration.k8s.io/v1';

/** Whether the API server serves the policies' v1: this project's control plane from 1.36; an existing cluster says by discovery. */
export async function servesPolicies(client: KubeClient): Promise<boolean> {
  const group = await client.json<{ resources: { name: string }[] }>('GET', API).catch(() => ({ resources: [] }));
  const served = group.resources.some((r) => r.name === 'mutatingadmissionpolicies');
  if (process.env['E2E_ETCD']) {
    const version = await client.json<{ minor: string }>('GET', '/version');
    assert.equal(served, Number.parseInt(version.minor, 10) >= 36, 'the server serves the policies from 1.36');
  }
  return served;
}

/**
 * Why tests that apply the policies with kubectl cannot run: `skip`, or a server that does not
 * serve them (before 1.36), where admission-controller.test.ts checks the controller-only fallback.
 */
export async function policiesSkip(skip: string | false): Promise<string | false> {
  if (skip) return skip;
  return (await servesPolicies(await adminClient()))
    ? false
    : 'the API server does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy (1.36 and later); admission-controller.test.ts checks the fallback';
}

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

/** `fieldManager`'s policies and bindings on the cluster, as `<resource>/<name>`, sorted. */
export async function policiesOf(fieldManager: string): Promise<string[]> {
  const client = await adminClient();
  const names: string[] = [];
  for (const resource of KINDS.split(',')) {
    const list = await client.json<{ items: { metadata: { name: string } }[] }>('GET', `${API}/${resource}`, {
      query: { labelSelector: policySelector(fieldManager) },
    });
    names.push(...list.items.map((item) => `${resource}/${item.metadata.name}`));
  }
  return names.sort();
}
