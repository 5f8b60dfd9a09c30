// The cluster of the --references rows (bench/lib/references.ts): kwok's nodes, each given a zone
// label as a cloud provider sets it, and N pods placed on them round-robin by `spec.nodeName`
// over a few namespaces. Setting the node in the create leaves the scheduler out, so 10 000 pods
// are made as fast as the API server takes creates; kwok still runs them (the pod-ready stage: one
// status update each), and the bench waits until every one is Running, so no labeller run has
// kwok's writes to the pods in its window.
import { MetadataApi } from '../../src/kube/api.ts';
import type { ApiResource } from '../../src/apimachinery/resource.ts';
import type { KubeClient } from '../../src/kube/client.ts';
import type { ControlPlaneOptions } from '../../test/controlplane/controlplane.ts';
import { createNamespace } from '../../test/cluster/cluster.ts';
import type { Log } from './cli.ts';
import { pool, retrying } from './objects.ts';
import { seconds } from './report.ts';
import { serviceAccountMade, until } from './workloads.ts';

/** The node label the pods' template reads, as clouds set it. */
export const ZONE = 'topology.kubernetes.io/zone';
/**
 * Each pod's node as a label of its own, set at create: a label selector can pick a node's pods
 * out of the bench's lists. The flip row checks against `spec.nodeName` itself.
 */
export const NODE = 'bench.example.com/node';

const ZONES = ['zone-a', 'zone-b', 'zone-c', 'zone-d'];
/** Over how many namespaces the pods are spread. */
const NAMESPACES = 4;

/** kwok nodes for `n` pods: 100 pods a node (kwok's nodes take 110), 10 at least. */
export function referencesControlPlane(n: number): ControlPlaneOptions {
  return { full: true, nodes: Math.max(10, Math.ceil(n / 100)) };
}

export interface PlacedPods {
  readonly namespaces: readonly string[];
  readonly nodes: readonly string[];
  /** Pods created, at `concurrency` in flight. */
  readonly createdSeconds: number;
  /** The last create → every pod Running (polled each second). */
  readonly runningSeconds: number;
}

const merge = (body: object) => ({
  headers: { 'content-type': 'application/merge-patch+json' },
  body: JSON.stringify(body),
});

/** Sets `node`'s zone label. */
export async function setZone(admin: KubeClient, node: string, zone: string): Promise<void> {
  await admin.json('PATCH', `/api/v1/nodes/${node}`, merge({ metadata: { labels: { [ZONE]: zone } } }));
}

/** Every node's zone label now, by node name. */
export async function nodeZones(admin: KubeClient, nodes: ApiResource): Promise<Map<string, string>> {
  const { items } = await new MetadataApi(admin, nodes).list();
  return new Map(items.flatMap((n) => {
    const zone = n.metadata.labels?.[ZONE];
    return zone === undefined ? [] : [[n.metadata.name, zone]];
  }));
}

/**
 * Gives the control plane's `nodeCount` kwok nodes zones a–d in turn, then creates `n` pods in
 * NAMESPACES namespaces `<prefix>-<i>`, pod i on node i mod nodeCount (so each node's pods are in
 * every namespace), and waits until all are Running.
 */
export async function placePods(
  admin: KubeClient,
  pods: ApiResource,
  prefix: string,
  nodeCount: number,
  n: number,
  concurrency: number,
  signal: AbortSignal,
  log: Log,
): Promise<PlacedPods> {
  const nodes = Array.from({ length: nodeCount }, (_, i) => `kwok-node-${i}`);
  await pool(nodes, concurrency, (node, i) => setZone(admin, node, ZONES[i % ZONES.length]!), signal);
  const namespaces = Array.from({ length: NAMESPACES }, (_, i) => `${prefix}-${i}`);
  for (const namespace of namespaces) {
    await createNamespace(admin, namespace);
    await serviceAccountMade(admin, namespace, signal);
  }
  log(`references: ${n} pods on ${nodeCount} kwok nodes in ${namespaces.join(', ')}, ${concurrency} in flight`);
  const started = performance.now();
  await pool(Array.from({ length: n }, (_, i) => i), concurrency, async (i) => {
    const namespace = namespaces[Math.floor((i * NAMESPACES) / n)]!;
    await retrying(() =>
      admin.json('POST', `/api/v1/namespaces/${namespace}/pods`, {
        headers: {
          'content-type': 'application/json',
          accept: 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json',
        },
        body: JSON.stringify(pod(`pod-${String(i).padStart(5, '0')}`, nodes[i % nodeCount]!)),
      })
    );
  }, signal);
  const createdSeconds = (performance.now() - started) / 1000;
  log(`references: created in ${seconds(createdSeconds)}; waiting for kwok to run them`);
  const apis = namespaces.map((namespace) => new MetadataApi(admin, pods, namespace));
  await until(signal, 120_000 + n * 60, 'every pod Running', async () => {
    const left = await Promise.all(apis.map((api) => api.list({ fieldSelector: 'status.phase!=Running', limit: 1 })));
    return left.every((page) => page.items.length === 0);
  });
  const runningSeconds = (performance.now() - started) / 1000 - createdSeconds;
  log(`references: every pod Running ${seconds(runningSeconds)} after the last create`);
  return { namespaces, nodes, createdSeconds, runningSeconds };
}

/** A pod as a workload's template makes it, on `node`. */
function pod(name: string, node: string): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { app: 'references-bench', [NODE]: node } },
    spec: {
      nodeName: node,
      containers: [{
        name: 'app',
        image: 'registry.k8s.io/pause:3.10',
        env: [{ name: 'LOG_LEVEL', value: 'info' }],
        resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '128Mi' } },
      }],
    },
  };
}
