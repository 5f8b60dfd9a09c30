// The bench's objects: ConfigMaps, Services and Deployments with realistic metadata (a few
// labels and annotations, managedFields from two other managers: created by one, then
// server-side applied by another), created through KubeClient with bounded concurrency.
import type { KubeClient } from '../../src/kube/client.ts';
import { ApiError, ConnectionError } from '../../src/apimachinery/errors.ts';
import { sleep } from '../../test/process/sleep.ts';

export interface KindSpec {
  readonly resource: 'configmaps' | 'services' | 'deployments';
  readonly kind: string;
  readonly apiVersion: string;
  readonly base: string;
}

export const KINDS: readonly KindSpec[] = [
  { resource: 'configmaps', kind: 'ConfigMap', apiVersion: 'v1', base: '/api/v1' },
  { resource: 'services', kind: 'Service', apiVersion: 'v1', base: '/api/v1' },
  { resource: 'deployments', kind: 'Deployment', apiVersion: 'apps/v1', base: '/apis/apps/v1' },
];

export interface BenchObject {
  readonly kind: KindSpec;
  readonly name: string;
  readonly uid: string;
}

export function collection(kind: KindSpec, namespace: string): string {
  return `${kind.base}/namespaces/${namespace}/${kind.resource}`;
}

/** N split over `kinds` as evenly as possible. */
export function split(n: number, kinds: readonly KindSpec[] = KINDS): Map<KindSpec, number> {
  return new Map(kinds.map((kind, i) => [kind, Math.floor(n / kinds.length) + (i < n % kinds.length ? 1 : 0)]));
}

/** An object as the bench creates it (its content besides the metadata left untyped). */
export interface ObjectBody {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: {
    readonly name: string;
    readonly labels: Readonly<Record<string, string>>;
    readonly annotations: Readonly<Record<string, string>>;
  };
}

/** The `i`th object of `kind` as the bench creates it: labels and annotations of its own, and its content. */
export function objectBody(kind: KindSpec, name: string, i: number): ObjectBody {
  const app = `app-${i % 97}`;
  const metadata = {
    name,
    labels: {
      app,
      'app.kubernetes.io/name': app,
      'app.kubernetes.io/component': kind.resource === 'configmaps' ? 'config' : 'backend',
      tier: i % 3 === 0 ? 'frontend' : 'backend',
    },
    annotations: {
      'example.com/owner': `team-${i % 13}@example.com`,
      'example.com/runbook': `https://runbooks.example.com/${app}/${kind.resource}`,
      'example.com/change-id': `CHG-${100000 + i}`,
    },
  };
  return { apiVersion: kind.apiVersion, kind: kind.kind, metadata, ...content(kind, name, app, i) };
}

/** What an object of `kind` holds besides its metadata. */
function content(kind: KindSpec, name: string, app: string, i: number): object {
  switch (kind.resource) {
    case 'configmaps':
      return {
        data: { 'app.yaml': `name: ${app}\nreplicas: 2\nlog:\n  level: info\n  format: json\nfeatures: [a, b, c]\n` },
      };
    case 'services':
      // Headless: the test control plane's service CIDR has room for 254 cluster IPs only.
      return { spec: { clusterIP: 'None', selector: { app }, ports: [{ name: 'http', port: 80, targetPort: 8080 }] } };
    case 'deployments':
      return {
        spec: {
          replicas: 2,
          selector: { matchLabels: { app, instance: name } },
          template: {
            metadata: { labels: { app, instance: name } },
            spec: {
              containers: [{
                name: 'app',
                image: `registry.example.com/${app}:1.${i % 10}.0`,
                ports: [{ containerPort: 8080 }],
                env: [{ name: 'LOG_LEVEL', value: 'info' }],
                resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '128Mi' } },
              }],
            },
          },
        },
      };
  }
}

/** Retries what a busy API server answers transiently (429, 5xx, dropped connections). */
export async function retrying<T>(what: () => Promise<T>, attempts = 5): Promise<T> {
  for (let attempt = 1;; attempt++) {
    try {
      return await what();
    } catch (error) {
      const transient = error instanceof ConnectionError ||
        (error instanceof ApiError && (error.status === 429 || error.status >= 500));
      if (!transient || attempt >= attempts) throw error;
      const retryAfter = error instanceof ApiError && error.retryAfterSeconds ? error.retryAfterSeconds * 1000 : 0;
      await sleep(Math.max(retryAfter, 100 * 2 ** attempt));
    }
  }
}

/** Runs `fn` over `items`, `concurrency` at a time; the first failure stops the rest and rejects. */
export async function pool<T>(
  items: readonly T[],
  concurrency: number,
  fn: (item: T, index: number) => Promise<void>,
  signal?: AbortSignal,
): Promise<void> {
  let next = 0;
  let failed = false;
  const worker = async (): Promise<void> => {
    while (!failed && next < items.length) {
      signal?.throwIfAborted();
      const index = next++;
      try {
        await fn(items[index]!, index);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}

/** Creates one object as `kubectl-create`, then server-side applies extra metadata as `argocd-controller`. */
export async function createObject(
  client: KubeClient,
  namespace: string,
  kind: KindSpec,
  name: string,
  i: number,
): Promise<BenchObject> {
  const created = await retrying(() =>
    client.json<{ metadata: { uid: string } }>('POST', collection(kind, namespace), {
      query: { fieldManager: 'kubectl-create' },
      headers: {
        'content-type': 'application/json',
        accept: 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json',
      },
      body: JSON.stringify(objectBody(kind, name, i)),
    })
  );
  await retrying(() =>
    client.json('PATCH', `${collection(kind, namespace)}/${name}`, {
      query: { fieldManager: 'argocd-controller' },
      headers: {
        'content-type': 'application/apply-patch+yaml',
        accept: 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json',
      },
      body: JSON.stringify({
        apiVersion: kind.apiVersion,
        kind: kind.kind,
        metadata: {
          name,
          namespace,
          labels: { 'app.kubernetes.io/managed-by': 'argocd', 'app.kubernetes.io/instance': name },
          annotations: {
            'argocd.argoproj.io/tracking-id': `bench:${kind.apiVersion}:${kind.kind}:${namespace}/${name}`,
          },
        },
      }),
    })
  );
  return { kind, name, uid: created.metadata.uid };
}

/** Creates `n` objects split over `kinds`, `concurrency` requests in flight. */
export async function createObjects(
  client: KubeClient,
  namespace: string,
  n: number,
  concurrency: number,
  signal?: AbortSignal,
  kinds: readonly KindSpec[] = KINDS,
): Promise<BenchObject[]> {
  const plan: { kind: KindSpec; name: string; i: number }[] = [];
  for (const [kind, count] of split(n, kinds)) {
    for (let i = 0; i < count; i++) {
      plan.push({ kind, name: `${kind.resource.slice(0, -1)}-${String(i).padStart(5, '0')}`, i });
    }
  }
  // Interleave the kinds, as a real cluster's objects arrive.
  plan.sort((a, b) => a.i - b.i);
  const objects: BenchObject[] = new Array(plan.length);
  await pool(plan, concurrency, async ({ kind, name, i }, index) => {
    objects[index] = await createObject(client, namespace, kind, name, i);
  }, signal);
  return objects;
}
