// What every e2e test file needs: the shared cluster from test/run.ts, an admin client and a
// namespace of its own.
import { randomBytes } from 'node:crypto';
import { after } from 'node:test';
import { KubeClient } from '../../src/kube/client.ts';

/** Why the e2e tests cannot run, or false when a cluster is there. Pass it as `{ skip }` to describe(). */
export const skip: string | false = process.env['LABELLER_TEST_NOT_RUN']
  ? `e2e not run: ${process.env['LABELLER_TEST_NOT_RUN'].split('\n')[0]}`
  : process.env['LABELLER_TEST_KUBECONFIG']
    ? false
    : 'e2e not run: no cluster (run the tests with `npm test`, which starts one)';

export function kubeconfig(): string {
  const path = process.env['LABELLER_TEST_KUBECONFIG'];
  if (!path) throw new Error('LABELLER_TEST_KUBECONFIG is not set: run the tests with `npm test`');
  return path;
}

let admin: Promise<KubeClient> | undefined;
const namespaces: string[] = [];

// Registered at the file's top level, so it runs once all of the file's tests have ended.
after(async () => {
  if (!admin) return;
  const client = await admin;
  await Promise.all(namespaces.map((name) => client.request('DELETE', `/api/v1/namespaces/${name}`).catch(() => {})));
  await client.close();
});

/** A client with cluster-admin rights, closed when the file's tests end. */
export function adminClient(): Promise<KubeClient> {
  admin ??= KubeClient.load({ kubeconfig: kubeconfig(), userAgent: 'labeller-e2e' });
  return admin;
}

/** Creates a fresh namespace for one test file; deleted when the file's tests end. */
export async function createNamespace(prefix: string): Promise<string> {
  const client = await adminClient();
  const name = `${prefix}-${randomBytes(3).toString('hex')}`;
  await client.json('POST', '/api/v1/namespaces', {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } }),
  });
  namespaces.push(name);
  return name;
}

/** Creates an object (full, not metadata-only) with the admin client. */
export async function create<T = unknown>(path: string, body: object): Promise<T> {
  const client = await adminClient();
  return client.json<T>('POST', path, { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}
