// Rows for labels on real shapes (issue 22): N pods of Deployments of 10 replicas that a full
// control plane (test/controlplane/controllers.ts) makes, schedules onto kwok's nodes and runs,
// labelled from `root.*` (the Deployment) and `owner.*` (the ReplicaSet); then a rolling restart
// of every Deployment (the pod template's kubectl.kubernetes.io/restartedAt, as `kubectl rollout
// restart` sets it): new ReplicaSets, every pod replaced. Timed from outside, counted from the
// audit log; the target is one PATCH per new pod and ReplicaSet, no GET, no LIST once the caches
// are filled.
import type { KubeClient } from '../../src/kube/client.ts';
import type { ControlPlane, ControlPlaneOptions } from '../../test/controlplane/controlplane.ts';
import { type AuditRequest, AuditRequests, byVerb, fillsCache, formatVerbs } from '../../test/cluster/audit.ts';
import type { Labeller } from '../../test/process/labeller.ts';
import { sleep } from '../../test/process/sleep.ts';
import { type Launch, startWithConfig } from './launch.ts';
import { pool } from './objects.ts';
import { type Row, seconds } from './report.ts';

export const REPLICAS = 10;
const WORKLOAD = 'bench.example.com/workload';
const OWNER = 'bench.example.com/owner';
const CONFIG = `kinds:
  - resource: replicasets
    labels:
      ${WORKLOAD}: "{{root.kind}}.{{root.name}}"
  - resource: pods
    labels:
      ${WORKLOAD}: "{{root.kind}}.{{root.name}}"
      ${OWNER}: "{{owner.name}}"
`;
const WORKLOAD_RESOURCES = new Set(['pods', 'replicasets', 'deployments']);
/** How long the cluster or labeller may take for one step, at most. */
const STEP_MS = 900_000;

export interface WorkloadsOptions extends Launch {
  /** Pods in all (rounded to whole Deployments of 10). */
  readonly n: number;
  readonly concurrency: number;
  readonly createConcurrency: number;
}

/** The control plane the rows need: a full one, with kwok nodes (110 pods each) for N pods and a rollout's surge. */
export function workloadsControlPlane(n: number): ControlPlaneOptions {
  return { full: true, nodes: Math.ceil((n * 1.3) / 110) + 1 };
}

export interface WorkloadsResults {
  readonly pods: number;
  readonly deployments: number;
  readonly nodes: number;
  /** Deployments created → every pod Running and Ready (polled each second), before labeller runs. */
  clusterSeconds?: number;
  /** labeller spawned → its last PATCH, with every pod and ReplicaSet labelled. */
  cold?: Step;
  /** restartedAt set on every Deployment → its last PATCH, with every new pod and ReplicaSet labelled. */
  restart?: Step & {
    /** The same → every Deployment rolled out, the old pods gone (polled each second). */
    rolloutSeconds: number;
    /** The last pod created by the ReplicaSet controller → labeller's last PATCH. */
    lagSeconds: number;
  };
}

export interface Step {
  seconds: number;
  /** labeller's requests by verb: with its discovery and its guard Lease's. */
  requests: Record<string, number>;
  /** Of them, GETs and LISTs of the objects labelled and related (a LIST fills a cache). */
  objectGets: number;
  objectLists: number;
  /** Successful PATCHes, and the others. */
  patches: number;
  failed: number;
}

type Log = (message: string) => void;

interface Listed {
  readonly items: readonly {
    readonly metadata: {
      readonly name: string;
      readonly labels?: Readonly<Record<string, string>>;
      readonly ownerReferences?: readonly { readonly name: string; readonly controller?: boolean }[];
    };
  }[];
}

interface DeploymentList {
  readonly items: readonly {
    readonly metadata: { readonly generation: number };
    readonly status: {
      readonly observedGeneration?: number;
      readonly replicas?: number;
      readonly updatedReplicas?: number;
      readonly availableReplicas?: number;
    };
  }[];
}

const json = (body: object) => ({ headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
const metadataOnly = { headers: { accept: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1' } };

export async function benchWorkloads(
  admin: KubeClient,
  controlPlane: Pick<ControlPlane, 'kubeconfig' | 'dir' | 'auditLog'>,
  audit: AuditRequests,
  options: WorkloadsOptions,
  signal: AbortSignal,
  log: Log,
): Promise<WorkloadsResults> {
  const deployments = Math.max(1, Math.round(options.n / REPLICAS));
  const n = deployments * REPLICAS;
  const results: WorkloadsResults = { pods: n, deployments, nodes: workloadsControlPlane(n).nodes ?? 0 };
  const namespace = `labeller-workloads-${Date.now().toString(36)}`;
  log(`workloads: ${deployments} Deployments of ${REPLICAS} in ${namespace}, on ${results.nodes} kwok nodes`);
  let started = Date.now();
  const names = await createDeployments(admin, namespace, {}, deployments, options.createConcurrency, signal);
  results.clusterSeconds = (Date.now() - started) / 1000;
  log(`workloads: ${n} pods Running and Ready in ${seconds(results.clusterSeconds)}`);

  const labeller = startWithConfig(
    options,
    controlPlane,
    'workloads-kinds.yaml',
    CONFIG,
    [namespace],
    options.concurrency,
  );
  try {
    await labelled(admin, namespace, labeller, signal);
    results.cold = step(audit.requests(labeller.startedAt, Date.now()), labeller.startedAt);
    log(`workloads: labelled from cold in ${seconds(results.cold.seconds)} (${formatVerbs(results.cold.requests)})`);

    const controllers = new AuditRequests(controlPlane.auditLog, 'kube-controller-manager/');
    started = Date.now();
    await restartAll(admin, namespace, names, options.createConcurrency, signal);
    await rolledOut(admin, namespace, n, signal);
    const rolloutSeconds = (Date.now() - started) / 1000;
    await labelled(admin, namespace, labeller, signal);
    const restart = step(audit.requests(started, Date.now()), started);
    const lastPodCreated = podsCreated(controllers, namespace, started).reduce(
      (t, r) => Math.max(t, r.completed ?? r.received),
      started,
    );
    results.restart = {
      ...restart,
      rolloutSeconds,
      lagSeconds: restart.seconds - (lastPodCreated - started) / 1000,
    };
    log(
      `workloads: restart rolled out in ${seconds(rolloutSeconds)}, labelled ${
        seconds(restart.seconds)
      } after it began (${formatVerbs(restart.requests)})`,
    );
  } finally {
    await labeller.stop('SIGTERM', 15_000);
  }
  return results;
}

/**
 * Creates `namespace` (with `labels`) and `count` Deployments of REPLICAS pods in it, `concurrency`
 * requests in flight, and waits until every pod is Running and Ready; answers their names.
 */
export async function createDeployments(
  admin: KubeClient,
  namespace: string,
  labels: Readonly<Record<string, string>>,
  count: number,
  concurrency: number,
  signal: AbortSignal,
): Promise<string[]> {
  await admin.json('POST', '/api/v1/namespaces', json({ metadata: { name: namespace, labels } }));
  await serviceAccountMade(admin, namespace, signal);
  const names = Array.from({ length: count }, (_, i) => `app-${String(i).padStart(4, '0')}`);
  await pool(names, concurrency, async (name) => {
    await admin.json('POST', `/apis/apps/v1/namespaces/${namespace}/deployments`, json(deployment(name)));
  }, signal);
  await rolledOut(admin, namespace, count * REPLICAS, signal);
  return names;
}

/** Until `namespace` has its default ServiceAccount: pods need it, and the controller manager makes it. */
export async function serviceAccountMade(admin: KubeClient, namespace: string, signal: AbortSignal): Promise<void> {
  await until(signal, 60_000, 'the default ServiceAccount', async () =>
    Boolean(
      await admin.json('GET', `/api/v1/namespaces/${namespace}/serviceaccounts/default`).catch(() => undefined),
    ));
}

/** A rolling restart of each of `names`, as `kubectl rollout restart` does it: the pod template's restartedAt. */
export async function restartAll(
  admin: KubeClient,
  namespace: string,
  names: readonly string[],
  concurrency: number,
  signal: AbortSignal,
): Promise<void> {
  await pool(names, concurrency, async (name) => {
    await admin.json('PATCH', `/apis/apps/v1/namespaces/${namespace}/deployments/${name}`, {
      headers: { 'content-type': 'application/strategic-merge-patch+json' },
      body: JSON.stringify({
        spec: {
          template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': new Date().toISOString() } } },
        },
      }),
    });
  }, signal);
}

/** The pods of `namespace` the ReplicaSet controller created from `from` (epoch ms) on, in `controllers`' log. */
export function podsCreated(controllers: AuditRequests, namespace: string, from: number): AuditRequest[] {
  return controllers.requests(from).filter((r) =>
    r.verb === 'create' && r.resource === 'pods' && r.namespace === namespace
  );
}

function deployment(name: string): object {
  const labels = { app: name };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, labels },
    spec: {
      replicas: REPLICAS,
      selector: { matchLabels: labels },
      template: { metadata: { labels }, spec: { containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.10' }] } },
    },
  };
}

/** Polls `check` every second until it holds; throws after `timeoutMs`. */
export async function until(signal: AbortSignal, timeoutMs: number, what: string, check: () => Promise<boolean>) {
  for (const deadline = Date.now() + timeoutMs;;) {
    signal.throwIfAborted();
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`${what} not reached in ${timeoutMs / 1000} s`);
    await sleep(1000, signal);
  }
}

/** Until every Deployment has rolled out its current template, and only `n` pods are left (the old ones gone). */
export async function rolledOut(admin: KubeClient, namespace: string, n: number, signal: AbortSignal): Promise<void> {
  await until(signal, STEP_MS, 'every Deployment rolled out', async () => {
    const { items } = await admin.json<DeploymentList>('GET', `/apis/apps/v1/namespaces/${namespace}/deployments`);
    const done = items.every(({ metadata, status }) =>
      (status.observedGeneration ?? 0) >= metadata.generation && status.replicas === REPLICAS &&
      status.updatedReplicas === REPLICAS && status.availableReplicas === REPLICAS
    );
    if (!done) return false;
    const pods = await admin.json<Listed>('GET', `/api/v1/namespaces/${namespace}/pods`, metadataOnly);
    return pods.items.length === n;
  });
}

/** Until every pod carries its Deployment and ReplicaSet, and every ReplicaSet its Deployment. */
async function labelled(admin: KubeClient, namespace: string, labeller: Labeller, signal: AbortSignal): Promise<void> {
  const right = (o: Listed['items'][number], owner: boolean): boolean =>
    o.metadata.labels?.[WORKLOAD] === `Deployment.${o.metadata.labels?.['app'] ?? ''}` &&
    (!owner || o.metadata.labels[OWNER] === o.metadata.ownerReferences?.find((r) => r.controller)?.name);
  await until(signal, STEP_MS, 'every pod and ReplicaSet labelled', async () => {
    labeller.assertRunning();
    const [pods, replicaSets] = await Promise.all([
      admin.json<Listed>('GET', `/api/v1/namespaces/${namespace}/pods`, metadataOnly),
      admin.json<Listed>('GET', `/apis/apps/v1/namespaces/${namespace}/replicasets`, metadataOnly),
    ]);
    return pods.items.every((p) => right(p, true)) && replicaSets.items.every((rs) => right(rs, false));
  });
}

/**
 * The requests of one step, and the seconds from `from` (epoch ms) to the end of its last
 * successful PATCH; GETs and LISTs counted of `resources` (the objects labelled and related).
 */
export function step(
  requests: readonly AuditRequest[],
  from: number,
  resources: ReadonlySet<string> = WORKLOAD_RESOURCES,
): Step {
  const patches = requests.filter((r) => r.verb === 'patch');
  const ok = patches.filter((r) => r.code !== undefined && r.code < 300);
  const last = ok.reduce((t, r) => Math.max(t, r.completed ?? r.received), from);
  const reads = (read: (r: AuditRequest) => boolean) =>
    requests.filter((r) => read(r) && resources.has(r.resource)).length;
  return {
    seconds: (last - from) / 1000,
    requests: byVerb(requests),
    objectGets: reads((r) => r.verb === 'get'),
    // A streaming list (a WATCH with sendInitialEvents) is a list too.
    objectLists: reads((r) => fillsCache(r.verb, r.uri)),
    patches: ok.length,
    failed: patches.length - ok.length,
  };
}

export function workloadRows(r: WorkloadsResults, load: number | undefined): Row[] {
  const rows: Row[] = [];
  const objects = r.pods + r.deployments;
  const perObject = (s: Step) =>
    `${(s.patches / objects).toFixed(2)} PATCH per object${
      s.failed ? `, ${s.failed} failed` : ''
    }; ${s.objectGets} GET and ${s.objectLists} LIST of pods, ReplicaSets and Deployments`;
  if (r.clusterSeconds !== undefined) {
    rows.push({
      id: 'W1',
      measurement:
        `The cluster: ${r.deployments} Deployments of ${REPLICAS} created → ${r.pods} pods Running and Ready on ${r.nodes} kwok nodes (no labeller)`,
      result: seconds(r.clusterSeconds),
      target: '',
      verdict: '',
      load,
    });
  }
  if (r.cold) {
    rows.push({
      id: 'W2',
      measurement:
        `labeller started → all ${r.pods} pods and ${r.deployments} ReplicaSets labelled from root.* and owner.* (last PATCH)`,
      result: `${seconds(r.cold.seconds)}; ${formatVerbs(r.cold.requests)} (${perObject(r.cold)})`,
      target: '1 PATCH per object, 0 GET of an object (LIST pages only to fill the caches)',
      verdict: r.cold.patches === objects && !r.cold.failed && !r.cold.objectGets ? 'pass' : 'miss',
      load,
    });
  }
  if (r.restart) {
    const { requests, objectGets, objectLists } = r.restart;
    rows.push({
      id: 'W3',
      measurement:
        `Rolling restart of every Deployment (restartedAt): ${r.pods} new pods and ${r.deployments} new ReplicaSets`,
      result: `rolled out in ${seconds(r.restart.rolloutSeconds)} (polled each second); last label ${
        seconds(r.restart.seconds)
      } after the restart, ${seconds(r.restart.lagSeconds)} after the last pod was created; ${formatVerbs(requests)} (${
        perObject(r.restart)
      })`,
      target: '1 PATCH per new pod and ReplicaSet, 0 GET, 0 LIST',
      verdict: r.restart.patches === objects && !r.restart.failed && !objectGets && !objectLists ? 'pass' : 'miss',
      load,
    });
  }
  return rows;
}
