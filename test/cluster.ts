// Test helpers free of node:test hooks (scripts use them too): an admin's handle on any cluster
// (the shared one or a control plane a test file starts for itself), the API server's audit log,
// etcd compaction and a process's memory. Nothing here changes labeller; it only observes and
// disturbs it. test/e2e/cluster.ts binds them to the shared cluster of a test run.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { closeSync, fstatSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fetch } from 'undici';
import { KubeClient } from '../src/kube/client.ts';
import { SERVICE_ACCOUNT_DIR } from '../src/kube/incluster.ts';
import { type ControlPlane, startControlPlane } from './controlplane/controlplane.ts';
import { delay, eventually } from './eventually.ts';

export { delay, eventually };

/** Why the e2e tests cannot run, or false when a cluster is there. Pass it as `{ skip }` to describe(). */
export const skip: string | false = process.env['E2E_NOT_RUN']
  ? `e2e not run: ${process.env['E2E_NOT_RUN'].split('\n')[0]}`
  : process.env['E2E_KUBECONFIG']
  ? false
  : 'e2e not run: no cluster (run the tests with `npm test`, which starts one)';

/**
 * Why a test file that needs a control plane of its own (to kill its API server or compact its
 * etcd) cannot run, or false. It can whenever test/run.ts could start the shared one.
 */
export const ownSkip: string | false = skip ||
  (process.env['E2E_ETCD'] || process.env['KUBEBUILDER_ASSETS']
    ? false
    : "needs the project's own control plane binaries (the run uses an existing cluster)");

/** The shared cluster's kubeconfig (from test/run.ts). */
export function sharedKubeconfig(): string {
  const path = process.env['E2E_KUBECONFIG'];
  if (!path) throw new Error('E2E_KUBECONFIG is not set: run the tests with `npm test`');
  return path;
}

export interface KubeconfigChange {
  readonly server?: string;
  readonly token?: string;
  /** Replaces the user entry whole (tokenFile, client certificate files, exec…). */
  readonly user?: Readonly<Record<string, unknown>>;
}

/** Writes a copy of the kubeconfig `base` into `dir`, with another server and/or identity. */
export function copyKubeconfig(base: string, dir: string, change: KubeconfigChange): string {
  const config = JSON.parse(readFileSync(base, 'utf8')) as {
    clusters: { cluster: Record<string, unknown> }[];
    users: { user: Record<string, unknown> }[];
  };
  for (const c of config.clusters) if (change.server) c.cluster['server'] = change.server;
  for (const u of config.users) if (change.token) u.user = { token: change.token };
  for (const u of config.users) if (change.user) u.user = { ...change.user };
  const path = join(dir, `kubeconfig-${randomBytes(4).toString('hex')}`);
  writeFileSync(path, JSON.stringify(config));
  return path;
}

const json = (body: object) => ({ headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

export interface PolicyRule {
  readonly apiGroups: readonly string[];
  readonly resources: readonly string[];
  readonly verbs: readonly string[];
  readonly resourceNames?: readonly string[];
}

/** An admin's handle on one cluster. `close()` deletes what it created and closes the client. */
export class Cluster {
  readonly client: KubeClient;
  readonly kubeconfig: string;
  readonly #dir = mkdtempSync(join(tmpdir(), 'labeller-faults-'));
  readonly #namespaces: string[] = [];
  readonly #cleanups: (() => Promise<unknown>)[] = [];

  private constructor(client: KubeClient, kubeconfig: string) {
    this.client = client;
    this.kubeconfig = kubeconfig;
  }

  static async connect(kubeconfig: string): Promise<Cluster> {
    return new Cluster(await KubeClient.load({ kubeconfig, userAgent: 'labeller-faults' }), kubeconfig);
  }

  get server(): string {
    return this.client.server;
  }

  async close(): Promise<void> {
    await Promise.all(
      this.#namespaces.map((ns) => this.client.request('DELETE', `/api/v1/namespaces/${ns}`).catch(() => {})),
    );
    for (const cleanup of this.#cleanups.reverse()) await cleanup().catch(() => {});
    await this.client.close();
    rmSync(this.#dir, { recursive: true, force: true });
  }

  /** Runs `cleanup` at close(), for cluster-scoped objects a test created. */
  onClose(cleanup: () => Promise<unknown>): void {
    this.#cleanups.push(cleanup);
  }

  async namespace(prefix: string): Promise<string> {
    const name = `${prefix}-${randomBytes(3).toString('hex')}`;
    await this.post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
    this.#namespaces.push(name);
    return name;
  }

  post<T = unknown>(path: string, body: object): Promise<T> {
    return this.client.json<T>('POST', path, json(body));
  }

  put<T = unknown>(path: string, body: object): Promise<T> {
    return this.client.json<T>('PUT', path, json(body));
  }

  get<T = unknown>(path: string): Promise<T> {
    return this.client.json<T>('GET', path);
  }

  async delete(path: string): Promise<void> {
    await this.client.request('DELETE', path);
  }

  /** Creates `count` objects named `${prefix}-0000`… with `make(name)`, 25 at a time. */
  async createMany(path: string, names: readonly string[], make: (name: string) => object): Promise<void> {
    for (let i = 0; i < names.length; i += 25) {
      await Promise.all(names.slice(i, i + 25).map((name) => this.post(path, make(name))));
    }
  }

  /** name → labels of every object in a collection. */
  async labelsByName(path: string): Promise<Map<string, Record<string, string>>> {
    const list = await this.get<{ items: { metadata: { name: string; labels?: Record<string, string> } }[] }>(path);
    return new Map(list.items.map((i) => [i.metadata.name, i.metadata.labels ?? {}]));
  }

  async labelsOf(path: string): Promise<Record<string, string>> {
    return (await this.get<{ metadata: { labels?: Record<string, string> } }>(path)).metadata.labels ?? {};
  }

  /** A label change by another field manager (JSON merge patch; null removes a label). */
  async patchLabels(path: string, labels: Record<string, string | null>, fieldManager = 'someone-else'): Promise<void> {
    await this.client.json('PATCH', `${path}?fieldManager=${fieldManager}`, {
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ metadata: { labels } }),
    });
  }

  /** A copy of the kubeconfig with another server and/or identity (removed at close). */
  writeKubeconfig(change: KubeconfigChange): string {
    return copyKubeconfig(this.kubeconfig, this.#dir, change);
  }

  /** A file in this cluster's temp dir (removed at close). */
  writeFile(name: string, text: string): string {
    const path = join(this.#dir, name);
    writeFileSync(path, text);
    return path;
  }

  /** A namespaced CRD `<plural>.<group>` (v1), waited for until it is served. */
  async createCrd(group: string, plural: string, kind: string): Promise<void> {
    await this.post('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: `${plural}.${group}` },
      spec: {
        group,
        scope: 'Namespaced',
        names: { plural, singular: kind.toLowerCase(), kind, listKind: `${kind}List` },
        versions: [{
          name: 'v1',
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
        }],
      },
    });
    await eventually(
      async () => Boolean(await this.client.json('GET', `/apis/${group}/v1/${plural}`)),
      `CRD ${plural}.${group} to be served`,
    );
  }

  /** Deletes a CRD and waits until it (and so every object of it) is gone. */
  async deleteCrd(group: string, plural: string): Promise<void> {
    const path = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${plural}.${group}`;
    await this.delete(path);
    await eventually(
      async () => {
        try {
          await this.get(path);
          return false;
        } catch {
          return true;
        }
      },
      `CRD ${plural}.${group} to be gone`,
      60_000,
    );
  }

  /**
   * A ServiceAccount bound (cluster-wide) to a ClusterRole with `rules`, and a kubeconfig for it.
   * The ClusterRole is named `${namespace}-${name}`; change it with setRules.
   */
  async serviceAccount(
    namespace: string,
    name: string,
    rules: readonly PolicyRule[],
    server?: string,
  ): Promise<{ kubeconfig: string; username: string; role: string }> {
    const role = `${namespace}-${name}`;
    await this.post(`/api/v1/namespaces/${namespace}/serviceaccounts`, { metadata: { name } });
    await this.post('/apis/rbac.authorization.k8s.io/v1/clusterroles', { metadata: { name: role }, rules });
    await this.post('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      metadata: { name: role },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
      subjects: [{ kind: 'ServiceAccount', name, namespace }],
    });
    this.onClose(() => this.delete(`/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${role}`));
    this.onClose(() => this.delete(`/apis/rbac.authorization.k8s.io/v1/clusterroles/${role}`));
    const { status } = await this.post<{ status: { token: string } }>(
      `/api/v1/namespaces/${namespace}/serviceaccounts/${name}/token`,
      {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: 3600 },
      },
    );
    return {
      kubeconfig: this.writeKubeconfig({ token: status.token, ...(server ? { server } : {}) }),
      username: `system:serviceaccount:${namespace}:${name}`,
      role,
    };
  }

  /**
   * A TokenRequest token for a ServiceAccount, bound to a new Secret `secret`: deleting the
   * Secret revokes the token (once the API server's ~10 s authentication cache has expired).
   */
  async boundToken(namespace: string, serviceAccount: string, secret: string): Promise<string> {
    const created = await this.post<{ metadata: { uid: string } }>(`/api/v1/namespaces/${namespace}/secrets`, {
      metadata: { name: secret },
      stringData: { purpose: 'token binding' },
    });
    const { status } = await this.post<{ status: { token: string } }>(
      `/api/v1/namespaces/${namespace}/serviceaccounts/${serviceAccount}/token`,
      {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: {
          expirationSeconds: 3600,
          boundObjectRef: { apiVersion: 'v1', kind: 'Secret', name: secret, uid: created.metadata.uid },
        },
      },
    );
    return status.token;
  }

  async setRules(role: string, rules: readonly PolicyRule[]): Promise<void> {
    const current = await this.get<{ metadata: object }>(`/apis/rbac.authorization.k8s.io/v1/clusterroles/${role}`);
    await this.put(`/apis/rbac.authorization.k8s.io/v1/clusterroles/${role}`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: current.metadata,
      rules,
    });
  }
}

/** Starts a control plane for one test file; the caller stops it. */
export async function ownControlPlane(): Promise<ControlPlane> {
  return startControlPlane();
}

export interface AuditEvent {
  readonly verb: string;
  readonly userAgent?: string;
  readonly user?: { readonly username?: string };
  readonly requestURI: string;
  readonly objectRef?: { readonly resource?: string; readonly namespace?: string; readonly name?: string };
  readonly responseStatus?: { readonly code?: number };
  readonly requestReceivedTimestamp?: string;
  readonly stageTimestamp?: string;
}

/** The audit events (one per completed request) of the log at `path` that match `filter`. */
export function auditEvents(path: string, filter: (event: AuditEvent) => boolean = () => true): AuditEvent[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as AuditEvent)
    .filter(filter);
}

/**
 * The audit log as it grows: each call answers the events (matching `filter`) written since the
 * previous call, the first since now. Cheap where auditEvents() parses the whole log, which
 * stalls the calling process (and a fault proxy running in it) for seconds on a long run.
 */
export function auditTail(path: string, filter: (event: AuditEvent) => boolean = () => true): () => AuditEvent[] {
  let offset = statSize(path);
  let partial = '';
  return () => {
    const fd = openSync(path, 'r');
    try {
      const size = fstatSync(fd).size;
      if (size < offset) throw new Error(`${path} shrank from ${offset} to ${size} bytes`);
      const buffer = Buffer.alloc(size - offset);
      const n = readSync(fd, buffer, 0, buffer.length, offset);
      offset += n;
      const lines = (partial + buffer.toString('utf8', 0, n)).split('\n');
      partial = lines.pop() ?? '';
      return lines.filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as AuditEvent).filter(filter);
    } finally {
      closeSync(fd);
    }
  };
}

function statSize(path: string): number {
  const fd = openSync(path, 'r');
  try {
    return fstatSync(fd).size;
  } finally {
    closeSync(fd);
  }
}

/** Milliseconds since the epoch at which the API server received the request. */
export function receivedAt(event: AuditEvent): number {
  return Date.parse(event.requestReceivedTimestamp ?? event.stageTimestamp ?? '');
}

/** Requests by labeller itself (its user agent is `labeller/<version>`). */
export const byLabeller = (event: AuditEvent): boolean => (event.userAgent ?? '').startsWith('labeller/');

/**
 * A command prefix that runs a command as in a pod with its service account mounted: the
 * folder `serviceAccountDir` (token, ca.crt, namespace) appears at the kubelet's mount point for
 * that process only (a private mount namespace with a tmpfs over /var/run; as root, or as root of
 * a user namespace otherwise). Add KUBERNETES_SERVICE_HOST/PORT to its environment.
 */
export function inClusterWrapper(serviceAccountDir: string): string[] {
  return [
    'unshare',
    '--mount',
    '--propagation',
    'private',
    ...(process.getuid?.() === 0 ? [] : ['--map-root-user']),
    'sh',
    '-c',
    `mount -t tmpfs tmpfs /var/run && mkdir -p ${SERVICE_ACCOUNT_DIR} && mount --bind "$0" ${SERVICE_ACCOUNT_DIR} && exec "$@"`,
    serviceAccountDir,
  ];
}

/** The resident set size of a process in MiB, from /proc (Linux). */
export function rssMiB(pid: number): number {
  return procStatusMiB(pid, 'VmRSS');
}

/** A memory figure of /proc/<pid>/status in MiB (VmRSS now, VmHWM its peak). */
export function procStatusMiB(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const match = new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, 'm').exec(status);
  if (!match) throw new Error(`no ${field} for ${pid}`);
  return Number(match[1]) / 1024;
}

/** etcd's current revision, through its HTTP/JSON gateway. */
export async function etcdRevision(etcd: string): Promise<number> {
  const response = await fetch(`${etcd}/v3/kv/range`, {
    method: 'POST',
    body: JSON.stringify({ key: Buffer.from('/').toString('base64') }),
  });
  const body = (await response.json()) as { header?: { revision?: string } };
  const revision = Number(body.header?.revision);
  if (!Number.isFinite(revision)) throw new Error(`no revision from etcd: ${JSON.stringify(body)}`);
  return revision;
}

/** Compacts etcd's history up to `revision` (physically), so older resourceVersions are gone. */
export async function compactEtcd(etcd: string, revision: number): Promise<void> {
  const response = await fetch(`${etcd}/v3/kv/compaction`, {
    method: 'POST',
    body: JSON.stringify({ revision: String(revision), physical: true }),
  });
  if (!response.ok) throw new Error(`etcd compaction failed: ${response.status} ${await response.text()}`);
  await response.text();
}

/** No stack trace and no unhandled rejection in a process's stderr. */
export function assertNoCrash(stderr: string): void {
  if (/^\s+at .+(\(|:\d+:\d+)/m.test(stderr) || /Unhandled|unhandledRejection|ERR_UNHANDLED|uncaught/i.test(stderr)) {
    throw new Error(`stderr shows a crash:\n${stderr.slice(-3000)}`);
  }
}

/** Exit status 0, and no crash in stderr. */
export function assertCleanExit(exit: { readonly code: number | null; readonly stderr: string }): void {
  assert.equal(exit.code, 0, exit.stderr.slice(-3000));
  assertNoCrash(exit.stderr);
}

/** Summary figures of a series of samples. */
export function stats(values: readonly number[]): { min: number; max: number; median: number } {
  const sorted = [...values].sort((a, b) => a - b);
  return { min: sorted[0] ?? NaN, max: sorted.at(-1) ?? NaN, median: sorted[Math.floor(sorted.length / 2)] ?? NaN };
}

/** Prints a figure both as a test diagnostic and to a shared file, so the README numbers can be collected. */
export function figure(t: { diagnostic(message: string): void }, text: string): void {
  t.diagnostic(text);
  const file = process.env['FAULTS_FIGURES'];
  if (file) writeFileSync(file, `${text}\n`, { flag: 'a' });
}
