// An admin's handle on any cluster (the shared one of a test run or a control plane a test file or
// a bench starts for itself), free of node:test hooks: namespaces, objects, CRDs, ServiceAccounts
// and kubeconfigs for them. Nothing here changes labeller; it only observes and disturbs it.
// test/e2e/cluster.ts binds it to the shared cluster of a test run.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeClient } from '../../src/kube/client.ts';
import { eventually } from '../process/eventually.ts';

export interface KubeconfigChange {
  readonly server?: string;
  /** Fields set on the cluster entry (tls-server-name, proxy-url…). */
  readonly cluster?: Readonly<Record<string, unknown>>;
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
  for (const c of config.clusters) Object.assign(c.cluster, change.cluster);
  for (const u of config.users) if (change.token) u.user = { token: change.token };
  for (const u of config.users) if (change.user) u.user = { ...change.user };
  const path = join(dir, `kubeconfig-${randomBytes(4).toString('hex')}`);
  writeFileSync(path, JSON.stringify(config));
  return path;
}

/** The CA (PEM) of the control plane whose admin kubeconfig is `kubeconfig`. */
export function clusterCa(kubeconfig: string): Buffer {
  const config = JSON.parse(readFileSync(kubeconfig, 'utf8')) as {
    clusters: { cluster: { 'certificate-authority-data': string } }[];
  };
  return Buffer.from(config.clusters[0]!.cluster['certificate-authority-data'], 'base64');
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
    await createNamespace(this.client, name);
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
    return {
      kubeconfig: await this.serviceAccountKubeconfig(namespace, name, server),
      username: `system:serviceaccount:${namespace}:${name}`,
      role,
    };
  }

  /**
   * A kubeconfig for an existing ServiceAccount, with a token from the TokenRequest API (as the
   * kubelet mints one); `server` replaces the API server's address (e.g. a fault proxy's).
   */
  async serviceAccountKubeconfig(namespace: string, name: string, server?: string): Promise<string> {
    const token = await this.#token(namespace, name, {});
    return this.writeKubeconfig({ token, ...(server ? { server } : {}) });
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
    return this.#token(namespace, serviceAccount, {
      boundObjectRef: { apiVersion: 'v1', kind: 'Secret', name: secret, uid: created.metadata.uid },
    });
  }

  /** A token for a ServiceAccount from the TokenRequest API, valid for an hour. */
  async #token(namespace: string, serviceAccount: string, spec: object): Promise<string> {
    const { status } = await this.post<{ status: { token: string } }>(
      `/api/v1/namespaces/${namespace}/serviceaccounts/${serviceAccount}/token`,
      {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: 3600, ...spec },
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

/** Creates namespace `name` with `labels` (no clean-up: a bench keeps what it measures). */
export async function createNamespace(
  client: KubeClient,
  name: string,
  labels: Readonly<Record<string, string>> = {},
): Promise<void> {
  await client.json(
    'POST',
    '/api/v1/namespaces',
    json({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } }),
  );
}
