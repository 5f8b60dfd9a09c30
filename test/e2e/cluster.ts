// What every e2e test file needs: the shared cluster from test/run.ts, an admin client and a
// namespace of its own.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { KubeClient } from '../../src/kube/client.ts';
import { eventually } from '../eventually.ts';

export { eventually };

/** Why the e2e tests cannot run, or false when a cluster is there. Pass it as `{ skip }` to describe(). */
export const skip: string | false = process.env['E2E_NOT_RUN']
  ? `e2e not run: ${process.env['E2E_NOT_RUN'].split('\n')[0]}`
  : process.env['E2E_KUBECONFIG']
    ? false
    : 'e2e not run: no cluster (run the tests with `npm test`, which starts one)';

export function kubeconfig(): string {
  const path = process.env['E2E_KUBECONFIG'];
  if (!path) throw new Error('E2E_KUBECONFIG is not set: run the tests with `npm test`');
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

/** A copy of the test kubeconfig with another server address and/or identity; removed after the file's tests. */
export function writeKubeconfig(change: { readonly server?: string; readonly token?: string }): string {
  const config = JSON.parse(readFileSync(kubeconfig(), 'utf8')) as {
    clusters: { cluster: Record<string, unknown> }[];
    users: { user: Record<string, unknown> }[];
  };
  for (const c of config.clusters) if (change.server) c.cluster['server'] = change.server;
  for (const u of config.users) if (change.token) u.user = { token: change.token };
  const dir = mkdtempSync(join(tmpdir(), 'labeller-e2e-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'kubeconfig');
  writeFileSync(path, JSON.stringify(config));
  return path;
}

/** The labels of one object, read with the admin client. */
export async function labelsOf(path: string): Promise<Record<string, string>> {
  const client = await adminClient();
  const object = await client.json<{ metadata: { labels?: Record<string, string> } }>('GET', path);
  return object.metadata.labels ?? {};
}

/** Applies a label change as another field manager (kubectl-style update). */
export async function patchLabels(path: string, labels: Record<string, string | null>, fieldManager = 'someone-else'): Promise<void> {
  const client = await adminClient();
  await client.json('PATCH', `${path}?fieldManager=${fieldManager}`, {
    headers: { 'content-type': 'application/merge-patch+json' },
    body: JSON.stringify({ metadata: { labels } }),
  });
}

/** Creates a namespaced CRD `<plural>.<group>` (v1, kind `kind`) and waits until it is served. */
export async function createCrd(group: string, plural: string, kind: string): Promise<void> {
  const client = await adminClient();
  await client.json('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: `${plural}.${group}` },
      spec: {
        group,
        scope: 'Namespaced',
        names: { plural, singular: kind.toLowerCase(), kind, listKind: `${kind}List` },
        versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } }],
      },
    }),
  });
  await eventually(async () => (await client.request('GET', `/apis/${group}/v1/${plural}`)).ok, `CRD ${plural}.${group} to be served`);
}

export interface PolicyRule {
  readonly apiGroups: readonly string[];
  readonly resources: readonly string[];
  readonly verbs: readonly string[];
}

/**
 * A kubeconfig for a new ServiceAccount with exactly `rules` (cluster-wide through a
 * ClusterRole), authenticated by a token minted with the TokenRequest API.
 */
export async function serviceAccountKubeconfig(namespace: string, name: string, rules: readonly PolicyRule[]): Promise<string> {
  const client = await adminClient();
  const post = (path: string, body: object) => client.json('POST', path, { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const role = `${namespace}-${name}`;
  await post(`/api/v1/namespaces/${namespace}/serviceaccounts`, { metadata: { name } });
  await post('/apis/rbac.authorization.k8s.io/v1/clusterroles', { metadata: { name: role }, rules });
  await post('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
    metadata: { name: role },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
    subjects: [{ kind: 'ServiceAccount', name, namespace }],
  });
  const { status } = await client.json<{ status: { token: string } }>('POST', `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`, {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600 } }),
  });
  return writeKubeconfig({ token: status.token });
}

export interface AuditEvent {
  readonly verb: string;
  readonly userAgent?: string;
  readonly requestURI: string;
  readonly objectRef?: { readonly resource?: string; readonly namespace?: string; readonly name?: string };
  readonly responseStatus?: { readonly code?: number };
}

/** Why request counting is impossible here (an existing cluster has no audit log we can read), or false. */
export const auditSkip: string | false = skip || (process.env['E2E_AUDIT_LOG'] ? false : 'needs the audit log of the project\'s own control plane');

/** The API server's audit events (one per completed request) that match `filter`. */
export function auditEvents(filter: (event: AuditEvent) => boolean): AuditEvent[] {
  const path = process.env['E2E_AUDIT_LOG'];
  if (!path) throw new Error('E2E_AUDIT_LOG is not set');
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as AuditEvent)
    .filter(filter);
}
