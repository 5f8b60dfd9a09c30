// Rows for labels drawn from related objects (issue 12): a namespace label fanned out to every
// object in the namespace against the tight loop's time for as many applies, the requests it
// took, a restart's PATCHes, and the heap the relation indexes add per cached object (measured
// in this process over synthetic objects, each JSON-parsed afresh as from the wire).
import { randomUUID } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { MetadataApi } from '../../src/kube/api.ts';
import type { KubeClient } from '../../src/kube/client.ts';
import type { PartialObjectMetadata } from '../../src/kube/objects.ts';
import type { ApiResource } from '../../src/kube/resource.ts';
import { labelClient } from '../../src/labelclient.ts';
import { type LabelledObject, projector } from '../../src/labeller/object.ts';
import { StoreIndex } from '../../src/runtime/index.ts';
import { Store } from '../../src/runtime/store.ts';
import { type AuditRequests, byVerb, formatVerbs } from '../../test/harness/audit.ts';
import { type Labeller, sourceEntry } from '../../test/harness/labeller.ts';
import type { Runtime } from '../../test/harness/runtime.ts';
import { sleep } from '../../test/harness/sleep.ts';
import { startLabeller } from './launch.ts';
import { type BenchObject, createObjects, KINDS, type KindSpec, pool } from './objects.ts';
import { bytes, type Row, seconds } from './report.ts';

const TEAM = 'bench.example.com/team';

export interface RelatedOptions {
  readonly n: number;
  readonly concurrency: number;
  readonly createConcurrency: number;
  readonly runtime: Runtime;
}

export interface RelatedResults {
  readonly n: number;
  /** Namespace label changed → the last PATCH of the fan-out completed. */
  fanOutSeconds?: number;
  fanOutRequests?: Record<string, number>;
  fanOutPatches?: number;
  loopSeconds?: number;
  restartPatches?: number;
  restartRequests?: Record<string, number>;
  /** Heap per object: the controller reference kept for owner and root templates, and the two indexes. */
  heap?: { objects: number; ownerRef: number; indexes: number } | undefined;
}

type Log = (message: string) => void;

export async function benchRelated(
  admin: KubeClient,
  kubeconfig: string,
  audit: AuditRequests,
  resources: ReadonlyMap<KindSpec, ApiResource>,
  options: RelatedOptions,
  signal: AbortSignal,
  log: Log,
): Promise<RelatedResults> {
  const results: RelatedResults = { n: options.n, heap: measureIndexHeap(options.n) };
  if (results.heap) {
    log(
      `relation indexes: ${bytes(results.heap.indexes)}/object, controller reference ${
        bytes(results.heap.ownerRef)
      }/object`,
    );
  }

  const namespace = `labeller-related-${Date.now().toString(36)}`;
  const setLabel = (team: string): Promise<unknown> =>
    admin.json('PATCH', `/api/v1/namespaces/${namespace}`, {
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ metadata: { labels: { team } } }),
    });
  await admin.json('POST', '/api/v1/namespaces', {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace, labels: { team: 'a' } } }),
  });
  log(`related: creating ${options.n} objects in ${namespace}`);
  const objects = await createObjects(admin, namespace, options.n, options.createConcurrency, signal);
  const apis = [...resources.values()].map((r) => new MetadataApi(admin, r, namespace));
  const args = [
    '--kubeconfig',
    kubeconfig,
    '--kinds',
    KINDS.map((k) => k.resource).join(','),
    '--label',
    `${TEAM}={{namespace.labels.team}}`,
    '--namespace',
    namespace,
    '--concurrency',
    String(options.concurrency),
    '--grace-period',
    '10s',
  ];
  /** Resolves when every object carries team=`team`. */
  const converged = async (process: Labeller, team: string): Promise<void> => {
    for (const deadline = Date.now() + 120_000 + options.n * 30;;) {
      process.assertRunning();
      signal.throwIfAborted();
      const left = await Promise.all(apis.map((api) => api.list({ labelSelector: `${TEAM}!=${team}`, limit: 1 })));
      if (left.every((page) => page.items.length === 0)) return;
      if (Date.now() > deadline) {
        throw new Error(`related: not every object carries ${TEAM}=${team}\n${process.stderr}`);
      }
      await sleep(200);
    }
  };

  // The sources, whatever --build says.
  const launch = { runtime: options.runtime, entry: sourceEntry(options.runtime), v8Flags: [] };
  const first = startLabeller(launch, args);
  await converged(first, 'a');
  log('related: converged; changing the namespace label');
  const changedAt = Date.now();
  await setLabel('b');
  await converged(first, 'b');
  const fanOut = audit.requests(changedAt, Date.now());
  const patches = fanOut.filter((r) => r.verb === 'patch' && r.code !== undefined && r.code < 300);
  results.fanOutSeconds = (patches.reduce((t, r) => Math.max(t, r.completed ?? r.received), changedAt) - changedAt) /
    1000;
  results.fanOutRequests = byVerb(fanOut);
  results.fanOutPatches = patches.length;
  log(`related: fan-out in ${seconds(results.fanOutSeconds)} (${formatVerbs(results.fanOutRequests)})`);
  await first.stop('SIGTERM', 15_000);

  results.loopSeconds = await tightLoop(
    admin,
    resources,
    namespace,
    objects,
    options.concurrency * KINDS.length,
    signal,
  );
  log(`related: tight loop ${seconds(results.loopSeconds)}`);

  const second = startLabeller(launch, args);
  for (const kind of [...KINDS.map((k) => k.kind), 'Namespace']) {
    await second.waitForLog((l) => l.msg === 'initial list complete' && l.kind === kind, 120_000 + options.n * 5);
  }
  await sleep(3000 + options.n / 5);
  const restart = audit.requests(second.startedAt, Date.now());
  results.restartRequests = byVerb(restart);
  results.restartPatches = restart.filter((r) => r.verb === 'patch').length;
  await second.stop('SIGTERM', 15_000);
  return results;
}

/** The same number of server-side applies from a minimal loop: what the API server allows. */
async function tightLoop(
  admin: KubeClient,
  resources: ReadonlyMap<KindSpec, ApiResource>,
  namespace: string,
  objects: readonly BenchObject[],
  concurrency: number,
  signal: AbortSignal,
): Promise<number> {
  const clients = new Map(
    [...resources].map((
      [kind, resource],
    ) => [kind, labelClient(new MetadataApi(admin, resource, namespace), 'bench-related-loop')]),
  );
  const labels = { [`${TEAM}-loop`]: `v${Date.now().toString(36)}` };
  const started = performance.now();
  await pool(objects, concurrency, async (o) => {
    await clients.get(o.kind)!.applyLabels(
      { apiVersion: o.kind.apiVersion, kind: o.kind.kind, name: o.name, namespace, uid: o.uid },
      labels,
      { force: true, dryRun: false },
    );
  }, signal);
  return (performance.now() - started) / 1000;
}

/** Heap per object of the controller reference and of the namespace and owner indexes, or undefined without a GC to call. */
export function measureIndexHeap(n: number): RelatedResults['heap'] {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as (() => void) | undefined;
  if (typeof gc !== 'function') return undefined;
  // Pods of ReplicaSets of 3 replicas, over 20 namespaces, as the API server sends them.
  const owners = Array.from({ length: Math.ceil(n / 3) }, () => randomUUID());
  const wire = (i: number): PartialObjectMetadata =>
    JSON.parse(JSON.stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: `web-${i}-${randomUUID().slice(0, 5)}`,
        namespace: `team-${i % 20}`,
        uid: randomUUID(),
        resourceVersion: String(1000 + i),
        labels: { app: `app-${i % 97}` },
        ownerReferences: [{
          apiVersion: 'apps/v1',
          kind: 'ReplicaSet',
          name: `web-${Math.floor(i / 3)}`,
          uid: owners[Math.floor(i / 3)],
          controller: true,
          blockOwnerDeletion: true,
        }],
      },
    })) as PartialObjectMetadata;
  const heapOf = (make: () => Store<LabelledObject>): number => {
    gc();
    const before = process.memoryUsage().heapUsed;
    const store = make();
    for (let i = 0; i < n; i++) store.apply({ type: 'apply', object: wire(i) });
    gc();
    const used = process.memoryUsage().heapUsed - before;
    if (store.size !== n) throw new Error('related heap: store size');
    return used;
  };
  const plain = heapOf(() => new Store(projector('labeller', new Set())));
  const withOwner = heapOf(() => new Store(projector('labeller', new Set(), true)));
  const indexed = heapOf(() =>
    new Store(projector('labeller', new Set(), true), [
      new StoreIndex((o) => o.namespace || undefined),
      new StoreIndex((o) => o.owner?.uid),
    ])
  );
  return { objects: n, ownerRef: (withOwner - plain) / n, indexes: (indexed - withOwner) / n };
}

export function relatedRows(r: RelatedResults, load: number | undefined): Row[] {
  const rows: Row[] = [];
  const ratio = r.fanOutSeconds !== undefined && r.loopSeconds ? r.fanOutSeconds / r.loopSeconds : undefined;
  if (r.fanOutSeconds !== undefined) {
    rows.push({
      id: 'R1',
      measurement: `Namespace label changed → all ${r.n} objects in it relabelled`,
      result: `${seconds(r.fanOutSeconds)}; tight loop of ${r.n} applies ${
        r.loopSeconds === undefined ? 'n/a' : seconds(r.loopSeconds)
      }; **${ratio?.toFixed(2) ?? 'n/a'}×**`,
      target: '≤ 1.15× the tight loop',
      verdict: ratio === undefined ? '' : ratio <= 1.15 ? 'pass' : 'miss',
      load,
    });
  }
  if (r.fanOutRequests) {
    const gets = r.fanOutRequests['get'] ?? 0;
    const lists = r.fanOutRequests['list'] ?? 0;
    rows.push({
      id: 'R2',
      measurement: 'Requests on the namespace change',
      result: `${formatVerbs(r.fanOutRequests)} (${((r.fanOutPatches ?? 0) / r.n).toFixed(2)} PATCH per object)`,
      target: '1 PATCH per object, 0 GET, 0 LIST',
      verdict: r.fanOutPatches === r.n && gets === 0 && lists === 0 ? 'pass' : 'miss',
      load,
    });
  }
  if (r.restartPatches !== undefined) {
    rows.push({
      id: 'R3',
      measurement: 'Restart over the converged cluster: PATCH requests',
      result: `${r.restartPatches} (${formatVerbs(r.restartRequests ?? {})})`,
      target: '0',
      verdict: r.restartPatches === 0 ? 'pass' : 'miss',
      load,
    });
  }
  if (r.heap) {
    rows.push({
      id: 'R4',
      measurement:
        `Heap of the relation indexes (by namespace, by owner uid), ${r.heap.objects} pods of 3-replica ReplicaSets`,
      result: `${bytes(r.heap.indexes)}/object (+ ${
        bytes(r.heap.ownerRef)
      }/object for the controller reference kept when templates read owners)`,
      target: '≤ 64 B/object',
      verdict: r.heap.indexes <= 64 ? 'pass' : 'miss',
      load,
    });
  }
  return rows;
}
