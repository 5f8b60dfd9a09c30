// --admission (rows AD1–AD4, issue 36 item 4): labels from the first moment, on a full control
// plane of the bench's own (kube-controller-manager, kube-scheduler, kwok), labeller run as the
// bench runs it (--build, --v8-flags, --env apply), cluster-wide, with and without
// --admission-policies. The objects are ConfigMaps of the bench's shape (objects.ts), created by
// the bench with one POST each, in batches over NAMESPACES namespaces labelled with a team.
// labeller's config has keys CEL can express: a constant, {{namespace.labels.team}},
// {{labels.app}} and {{name}}; the last the policies cannot set when the API server generates the
// name (generateName, as for a ReplicaSet's pods), so such creates are the contrast that the
// controller labels. In order:
//   batch A  N created, --create-concurrency in flight, no policies, no labeller: create latency (AD3);
//   AD4      labeller without --admission-policies over A: spawn → its last PATCH, PATCH per object;
//   AD1      with it running, --samples created one at a time: create → label by the controller alone;
//   batch B  N created as A, labeller stopped: create latency again (AD3);
//   AD1/AD4  labeller with --admission-policies over B: spawn → its policy applied (log) → a create
//            carrying the keys (a dry-run create every 100 ms); spawn → its last PATCH of B;
//   AD1/AD3  batch C: N created with the policies in force: the share whose create response carried
//            every key, labeller's PATCHes of them (audit log, until 5 s + N/10 ms after); create
//            latency against A and B (AD3), and over each batch the API server's admission metrics;
//   AD1      --samples created one at a time with generateName: the other keys at create, {{name}}
//            by the controller: create → label;
//   batch D  labeller stopped, its policies left on the server: N created as C, nothing else
//            running (AD3: what the policies add to a create, against B);
//   AD2      N/10 pods of Deployments (the ReplicaSet controller makes them), a rolling restart under
//            a config whose pod keys are all expressible (target: 0 PATCH of new pods), then one with
//            a root.* key, which only the controller can set (1 PATCH per new pod).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { policyName } from '../../src/admission/names.ts';
import { MetadataApi } from '../../src/kube/api.ts';
import { isConflict } from '../../src/apimachinery/errors.ts';
import { markerKeys, markerValues } from '../../src/labelling/admitted.ts';
import { type AuditRequest, AuditRequests, byVerb, formatVerbs } from '../../test/cluster/audit.ts';
import { createNamespace } from '../../test/cluster/cluster.ts';
import type { ControlPlaneOptions } from '../../test/controlplane/controlplane.ts';
import type { Labeller } from '../../test/process/labeller.ts';
import { sleep } from '../../test/process/sleep.ts';
import { type AdmissionCounters, admissionCounters, countersBetween } from './admissionmetrics.ts';
import type { Bench } from './context.ts';
import { converged } from './converged.ts';
import { type PlannedCreate, type TimedCreate, timedCreates } from './creates.ts';
import { FIELD_MANAGER, type Launch, startLabeller, stopLabeller } from './launch.ts';
import { collection, KINDS, objectBody } from './objects.ts';
import { percentile } from './relabel.ts';
import { load1, ms, type Row, seconds, table, verdict } from './report.ts';
import {
  createDeployments,
  podsCreated,
  REPLICAS,
  restartAll,
  rolledOut,
  until,
  workloadsControlPlane,
} from './workloads.ts';

export interface AdmissionOptions extends Launch {
  /** ConfigMaps per batch; N/10 pods for the rollouts. */
  readonly n: number;
  /** ConfigMaps per batch created one at a time (the create → label latencies). */
  readonly samples: number;
  readonly concurrency: number;
  readonly createConcurrency: number;
}

/** A batch of creates: how long they took, what their responses carried, and what followed. */
export interface CreateBatch {
  /** A, B, C or D for the batches of N, or what a batch of --samples is. */
  readonly id: string;
  readonly what: string;
  readonly count: number;
  readonly concurrency: number;
  /** The first request sent → the last response read. */
  readonly seconds: number;
  /** Each create, request sent → response read. */
  readonly p50Ms: number | undefined;
  readonly p99Ms: number | undefined;
  /** Creates whose response carried every key the policies can express for that object. */
  readonly atCreate: number;
  /** The API server's admission metrics over the creates. */
  readonly admission: AdmissionCounters;
  /** labeller's PATCH requests of the batch's objects, while it ran (undefined: it did not). */
  patches?: number;
  /** Create completed → labeller's first successful PATCH of the object completed (audit log), for those it labelled. */
  labelP50Ms?: number | undefined;
  labelP99Ms?: number | undefined;
  readonly load: number;
}

/** labeller started over objects created before it: spawn → its last PATCH. */
export interface Convergence {
  readonly policies: boolean;
  readonly objects: number;
  readonly seconds: number;
  /** Spawn → its first PATCH of a ConfigMap: what starting costs, the policies' apply beside it. */
  readonly firstPatchSeconds: number;
  /** Its successful PATCHes of ConfigMaps. */
  readonly patches: number;
  /** All its requests by verb (the policies' applies are PATCHes too). */
  readonly requests: Record<string, number>;
  readonly load: number;
}

/** labeller with --admission-policies started → its policies applied → a create labelled by them. */
export interface InForce {
  /** Spawn → its last `admission policy applied` line before they were in force. */
  readonly appliedSeconds: number | undefined;
  /** Spawn → the first dry-run create whose response carried the keys. */
  readonly enforcedSeconds: number;
}

export interface RolloutResults {
  /** expressible: every pod key is one the policies set; root: also a root.* key, left to the controller. */
  readonly config: RolloutConfig;
  readonly inForce: InForce;
  /** Pods the ReplicaSet controller created in the restart (audit log), and pods there after it. */
  readonly created: number;
  readonly pods: number;
  /** New pods whose marker lists every expressible key at the value they carry: set at their create. */
  readonly atCreate: number;
  /** labeller's PATCH requests of the new pods, and the pods they were for. */
  readonly patches: number;
  readonly patched: number;
  /** Restart → every Deployment rolled out, the old pods gone (polled each second). */
  readonly rolloutSeconds: number;
  /** Restart → labeller's last PATCH of a new pod, and the last pod created → that PATCH. */
  readonly lastPatchSeconds: number | undefined;
  readonly lagSeconds: number | undefined;
  readonly load: number;
}

export type RolloutConfig = 'expressible' | 'root';

export interface AdmissionResults {
  readonly n: number;
  readonly samples: number;
  readonly pods: number;
  readonly nodes: number;
  readonly namespaces: number;
  readonly concurrency: number;
  readonly createConcurrency: number;
  /** Batches of N: A and B without policies or labeller, C with the policies in force and labeller running, D with them and labeller stopped. */
  readonly batches: CreateBatch[];
  /** One at a time, labeller without policies running. */
  controllerAlone?: CreateBatch;
  inForce?: InForce;
  /** One at a time with generateName, the policies in force, labeller running. */
  generated?: CreateBatch;
  readonly convergence: Convergence[];
  readonly rollouts: RolloutResults[];
}

const CONFIGMAPS = KINDS.find((k) => k.resource === 'configmaps')!;
const MANAGED = 'bench.example.com/managed';
const TEAM = 'bench.example.com/team';
const APP = 'bench.example.com/app';
const NAME = 'bench.example.com/name';
/** Every bench ConfigMap carries it (objects.ts); the cluster's own (kube-root-ca.crt) do not. */
const SELECTOR = 'app.kubernetes.io/component=config';
const CONFIGMAP_CONFIG = `labels:
  ${MANAGED}: labeller
  ${TEAM}: "{{namespace.labels.team}}"
  ${APP}: "{{labels.app}}"
  # Left to the controller for a name the API server generates (generateName).
  ${NAME}: "{{name}}"
kinds:
  - resource: configmaps
    selector: ${SELECTOR}
`;
/** The policy labeller renders for that config (admission/names.ts). */
const POLICY = policyName(FIELD_MANAGER, 'configmaps');
/** The marker annotations of this field manager's policies. */
const MARKERS = markerKeys(FIELD_MANAGER);
/** Each batch's objects go round this many namespaces, each of a team of its own. */
const NAMESPACES = 5;
const BATCHES = ['a', 'alone', 'b', 'c', 'generated', 'd'] as const;
type BatchId = typeof BATCHES[number];
const namespaceOf = (batch: BatchId, i: number): string => `admission-${batch}-${i % NAMESPACES}`;
const teamOf = (namespace: string): string => `team-${namespace.slice(namespace.lastIndexOf('-') + 1)}`;

const CONFIG = 'bench.example.com/config';
const WORKLOAD = 'bench.example.com/workload';
const ROLLOUT_NAMESPACE = 'admission-rollout';
const ROLLOUT_TEAM = 'payments';
/** Pod keys: all expressible, or with a root.* key only the controller sets; the constant tells which config is in force. */
function podConfig(config: RolloutConfig): string {
  return `labels:
  ${CONFIG}: ${config}
  ${TEAM}: "{{namespace.labels.team}}"
  ${APP}: "{{labels.app}}"
kinds:
  - resource: pods
    namespaces: [${ROLLOUT_NAMESPACE}]
${config === 'root' ? `    labels:\n      ${WORKLOAD}: "{{root.kind}}.{{root.name}}"\n` : ''}`;
}
const PROBE_POD = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'probe', labels: { app: 'probe' } },
  spec: { containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.10' }] },
};

/** Pods for the rollouts: N/10, in whole Deployments. */
const podsFor = (n: number): number => Math.max(1, Math.round(n / 10 / REPLICAS)) * REPLICAS;

/** The control plane the rows need: a full one, with kwok nodes for the pods and a rollout's surge. */
export function admissionControlPlane(n: number): ControlPlaneOptions {
  return workloadsControlPlane(podsFor(n));
}

export function admissionResults(options: AdmissionOptions): AdmissionResults {
  const pods = podsFor(options.n);
  return {
    n: options.n,
    samples: options.samples,
    pods,
    nodes: workloadsControlPlane(pods).nodes ?? 0,
    namespaces: NAMESPACES,
    concurrency: options.concurrency,
    createConcurrency: options.createConcurrency,
    batches: [],
    convergence: [],
    rollouts: [],
  };
}

/** Whether `labels` carry every pair of `expected`. */
const carries = (labels: Readonly<Record<string, string>>, expected: Readonly<Record<string, string>>): boolean =>
  Object.entries(expected).every(([key, value]) => labels[key] === value);

/** The keys the policies can set on a ConfigMap as created: all but {{name}} when the server generates the name. */
function expressible(created: TimedCreate): Record<string, string> {
  return {
    [MANAGED]: 'labeller',
    [TEAM]: teamOf(created.namespace),
    [APP]: created.labels['app'] ?? '',
    ...(created.generateName ? {} : { [NAME]: created.name }),
  };
}

const key = (namespace: string, name: string): string => `${namespace}/${name}`;

/** How long after a batch a PATCH of its objects would have come: labeller reconciles each watch event within that. */
const settleMs = (count: number): number => 5000 + count / 10;

// ---------------------------------------------------------------- labeller

/**
 * What the policies depend on (--admission-policies-owner), as the chart's ClusterRole for them:
 * they stay on the server when labeller stops (batch D), as in a cluster.
 */
const OWNER = 'labeller-bench-admission-policies';

/** Makes OWNER, once. */
async function owner(bench: Bench): Promise<void> {
  await bench.admin.json('POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ metadata: { name: OWNER }, rules: [] }),
  }).catch((error: unknown) => {
    if (!isConflict(error)) throw error;
  });
}

function startWith(options: AdmissionOptions, bench: Bench, config: string, policies: boolean): Labeller {
  return startLabeller(options, [
    '--kubeconfig',
    bench.controlPlane.kubeconfig,
    '--config',
    config,
    '--field-manager',
    FIELD_MANAGER,
    '--concurrency',
    String(options.concurrency),
    '--grace-period',
    '10s',
    ...(policies ? ['--admission-policies', '--admission-policies-owner', `clusterrole/${OWNER}`] : []),
  ]);
}

/**
 * Until a dry-run create of `body` at `path` comes back with `key`=`value` (every 100 ms): the
 * policies are in force. Answers when they were, from labeller's spawn, and when it said it had
 * applied one last before.
 */
async function inForce(
  bench: Bench,
  labeller: Labeller,
  path: string,
  body: object,
  label: { readonly key: string; readonly value: string },
): Promise<InForce> {
  for (const deadline = Date.now() + 120_000;;) {
    labeller.assertRunning();
    const response = await bench.admin.json<{ metadata: { labels?: Record<string, string> } }>('POST', path, {
      query: { dryRun: 'All' },
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (response.metadata.labels?.[label.key] === label.value) {
      const enforcedAt = Date.now();
      const applied = labeller.arrivals.filter((at, i) =>
        labeller.logs[i]?.msg === 'admission policy applied' && at <= enforcedAt
      );
      return {
        appliedSeconds: applied.length ? (Math.max(...applied) - labeller.startedAt) / 1000 : undefined,
        enforcedSeconds: (enforcedAt - labeller.startedAt) / 1000,
      };
    }
    if (Date.now() > deadline) throw new Error(`admission: no create at ${path} labelled ${label.key} after 120 s`);
    await sleep(100, bench.signal);
  }
}

/** `labeller` just started over `objects` unlabelled ConfigMaps: until none is left, spawn → its last PATCH. */
async function converge(bench: Bench, labeller: Labeller, objects: number, policies: boolean): Promise<Convergence> {
  const api = new MetadataApi(bench.admin, bench.resources.get(CONFIGMAPS)!, '');
  await converged(labeller, [api], `${SELECTOR},!${MANAGED}`, objects, 120_000 + objects * 30, bench.signal);
  const requests = bench.audit.requests(labeller.startedAt, Date.now());
  const patches = requests.filter((r) =>
    r.verb === 'patch' && r.resource === 'configmaps' && r.code !== undefined && r.code < 300
  );
  const last = patches.reduce((t, r) => Math.max(t, r.completed ?? r.received), labeller.startedAt);
  const first = patches.reduce((t, r) => Math.min(t, r.received), last);
  const convergence = {
    policies,
    objects,
    seconds: (last - labeller.startedAt) / 1000,
    firstPatchSeconds: (first - labeller.startedAt) / 1000,
    patches: patches.length,
    requests: byVerb(requests),
    load: load1(),
  };
  bench.log(
    `admission: converged ${objects} existing objects ${policies ? 'with' : 'without'} policies in ${
      seconds(convergence.seconds)
    } (${formatVerbs(convergence.requests)})`,
  );
  return convergence;
}

// ---------------------------------------------------------------- batches

function plan(batch: BatchId, count: number, generateName: boolean): PlannedCreate[] {
  return Array.from({ length: count }, (_, i) => ({
    namespace: namespaceOf(batch, i),
    i,
    name: generateName ? `${batch}-` : `${batch}-${String(i).padStart(6, '0')}`,
    generateName,
  }));
}

/** Creates `planned`, `concurrency` in flight, with the API server's admission metrics around them. */
async function createBatch(
  bench: Bench,
  id: string,
  what: string,
  planned: readonly PlannedCreate[],
  concurrency: number,
): Promise<{ batch: CreateBatch; created: TimedCreate[] }> {
  const before = await admissionCounters(bench.admin, POLICY);
  const started = performance.now();
  const created = await timedCreates(bench.admin, CONFIGMAPS, planned, concurrency, bench.signal);
  const took = (performance.now() - started) / 1000;
  const after = await admissionCounters(bench.admin, POLICY);
  const latencies = created.map((c) => c.ms).sort((a, b) => a - b);
  const batch: CreateBatch = {
    id,
    what,
    count: created.length,
    concurrency,
    seconds: took,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    atCreate: created.filter((c) => carries(c.labels, expressible(c))).length,
    admission: countersBetween(before, after),
    load: load1(),
  };
  bench.log(
    `admission: ${id}, ${what}: ${batch.count} created in ${seconds(took)}, p50 ${ms(batch.p50Ms)}, p99 ${
      ms(batch.p99Ms)
    }; ${batch.atCreate} carried every key at create`,
  );
  return { batch, created };
}

/** labeller's PATCH requests since `from` of the objects `created`. */
function patchesOf(bench: Bench, created: readonly TimedCreate[], from: number): AuditRequest[] {
  const keys = new Set(created.map((c) => key(c.namespace, c.name)));
  return bench.audit.requests(from).filter((r) =>
    r.verb === 'patch' && r.resource === 'configmaps' && keys.has(key(r.namespace, r.name))
  );
}

/**
 * Waits until labeller has labelled every one of `created` (a successful PATCH each, audit log),
 * then `settleMs` for any other; records its PATCHes and each create → label latency in `batch`:
 * from the create's completion (by its Audit-Id) to the completion of the object's first PATCH.
 */
async function labelledByController(
  bench: Bench,
  labeller: Labeller,
  creators: AuditRequests,
  batch: CreateBatch,
  created: readonly TimedCreate[],
  from: number,
): Promise<void> {
  const firstPatch = (): Map<string, number> => {
    const done = new Map<string, number>();
    for (const r of patchesOf(bench, created, from)) {
      if (r.code === undefined || r.code >= 300) continue;
      const at = r.completed ?? r.received;
      const k = key(r.namespace, r.name);
      done.set(k, Math.min(at, done.get(k) ?? at));
    }
    return done;
  };
  await until(bench.signal, 60_000 + created.length * 100, `${batch.what}: every object labelled`, async () => {
    labeller.assertRunning();
    return firstPatch().size === created.length;
  });
  await sleep(settleMs(created.length), bench.signal);
  const done = firstPatch();
  const completed = new Map(creators.requests(from).map((r) => [r.id, r.completed ?? r.received]));
  const latencies = created.map((c) => done.get(key(c.namespace, c.name))! - completed.get(c.auditId)!)
    .filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  batch.patches = patchesOf(bench, created, from).length;
  batch.labelP50Ms = percentile(latencies, 50);
  batch.labelP99Ms = percentile(latencies, 99);
  bench.log(
    `admission: ${batch.id}: labelled by the controller, p50 ${ms(batch.labelP50Ms)}, p99 ${
      ms(batch.labelP99Ms)
    } after the create; ${batch.patches} PATCH`,
  );
}

// ---------------------------------------------------------------- rollouts

interface PodList {
  readonly items: readonly {
    readonly metadata: {
      readonly name: string;
      readonly labels?: Readonly<Record<string, string>>;
      readonly annotations?: Readonly<Record<string, string>>;
    };
  }[];
}

const metadataOnly = { headers: { accept: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1' } };

/** The keys of `config` the policies set on a pod of app `app`. */
const podKeys = (config: RolloutConfig, app: string): Record<string, string> => ({
  [CONFIG]: config,
  [TEAM]: ROLLOUT_TEAM,
  [APP]: app,
});

/** Until every pod carries what `config` says, the controller's root.* key included. */
async function podsLabelled(bench: Bench, labeller: Labeller, config: RolloutConfig): Promise<PodList> {
  let pods: PodList = { items: [] };
  await until(bench.signal, 900_000, `every pod labelled under the ${config} config`, async () => {
    labeller.assertRunning();
    pods = await bench.admin.json<PodList>('GET', `/api/v1/namespaces/${ROLLOUT_NAMESPACE}/pods`, metadataOnly);
    return pods.items.every(({ metadata: { labels = {} } }) =>
      carries(labels, {
        ...podKeys(config, labels['app'] ?? ''),
        ...(config === 'root' ? { [WORKLOAD]: `Deployment.${labels['app'] ?? ''}` } : {}),
      })
    );
  });
  return pods;
}

/**
 * labeller with `config` and --admission-policies over the Deployments `names`: its policy in
 * force, the pods there relabelled, then a rolling restart of every Deployment, measured on the
 * new pods.
 */
async function rollout(
  bench: Bench,
  options: AdmissionOptions,
  names: readonly string[],
  config: RolloutConfig,
  controllers: AuditRequests,
): Promise<RolloutResults> {
  const { admin, signal, log } = bench;
  const file = join(bench.controlPlane.dir, `admission-pods-${config}.yaml`);
  writeFileSync(file, podConfig(config));
  const labeller = startWith(options, bench, file, true);
  try {
    const enforced = await inForce(
      bench,
      labeller,
      `/api/v1/namespaces/${ROLLOUT_NAMESPACE}/pods`,
      PROBE_POD,
      { key: CONFIG, value: config },
    );
    await podsLabelled(bench, labeller, config);
    log(`admission: ${config} pod config in force ${seconds(enforced.enforcedSeconds)} after start; rolling restart`);
    const started = Date.now();
    const count = names.length * REPLICAS;
    await restartAll(admin, ROLLOUT_NAMESPACE, names, options.createConcurrency, signal);
    await rolledOut(admin, ROLLOUT_NAMESPACE, count, signal);
    const rolloutSeconds = (Date.now() - started) / 1000;
    await podsLabelled(bench, labeller, config);
    await sleep(settleMs(count), signal);
    const pods = await podsLabelled(bench, labeller, config);
    const current = new Set(pods.items.map((p) => p.metadata.name));
    const patches = bench.audit.requests(started).filter((r) =>
      r.verb === 'patch' && r.resource === 'pods' && r.namespace === ROLLOUT_NAMESPACE && current.has(r.name)
    );
    const lastPatch = patches.reduce((t, r) => Math.max(t, r.completed ?? r.received), 0);
    const created = podsCreated(controllers, ROLLOUT_NAMESPACE, started);
    const lastCreated = created.reduce((t, r) => Math.max(t, r.completed ?? r.received), started);
    const atCreate = pods.items.filter(({ metadata: { labels = {}, annotations = {} } }) => {
      const marker = markerValues('labels', annotations[MARKERS.labels] ?? '');
      const expected = podKeys(config, labels['app'] ?? '');
      return carries(marker, expected) && carries(labels, expected);
    }).length;
    const results: RolloutResults = {
      config,
      inForce: enforced,
      created: created.length,
      pods: pods.items.length,
      atCreate,
      patches: patches.length,
      patched: new Set(patches.map((r) => r.name)).size,
      rolloutSeconds,
      lastPatchSeconds: lastPatch ? (lastPatch - started) / 1000 : undefined,
      lagSeconds: lastPatch ? (lastPatch - lastCreated) / 1000 : undefined,
      load: load1(),
    };
    log(
      `admission: ${config}: ${results.created} pods created in the restart, ${results.atCreate} of ${results.pods} labelled at create, ${results.patches} PATCH of them`,
    );
    return results;
  } finally {
    await stopLabeller(labeller);
  }
}

// ---------------------------------------------------------------- the run

/** Everything --admission measures, recorded into `results` as it goes. */
export async function benchAdmission(
  bench: Bench,
  options: AdmissionOptions,
  results: AdmissionResults,
): Promise<void> {
  const { admin, controlPlane, signal, log } = bench;
  const { n, samples, createConcurrency } = options;
  const creators = new AuditRequests(controlPlane.auditLog, 'labeller-bench');
  const config = join(controlPlane.dir, 'admission-configmaps.yaml');
  writeFileSync(config, CONFIGMAP_CONFIG);
  await owner(bench);
  for (const batch of BATCHES) {
    for (let i = 0; i < NAMESPACES; i++) {
      const namespace = namespaceOf(batch, i);
      await createNamespace(admin, namespace, { team: teamOf(namespace) });
    }
  }

  results.batches.push(
    (await createBatch(bench, 'A', 'no policies, no labeller', plan('a', n, false), createConcurrency)).batch,
  );

  const alone = startWith(options, bench, config, false);
  try {
    results.convergence.push(await converge(bench, alone, n, false));
    const from = Date.now();
    const { batch, created } = await createBatch(
      bench,
      'one at a time',
      'no policies, labeller running',
      plan('alone', samples, false),
      1,
    );
    await labelledByController(bench, alone, creators, results.controllerAlone = batch, created, from);
  } finally {
    await stopLabeller(alone);
  }

  results.batches.push(
    (await createBatch(bench, 'B', 'no policies, no labeller', plan('b', n, false), createConcurrency)).batch,
  );

  const kept = startWith(options, bench, config, true);
  try {
    const probe = objectBody(CONFIGMAPS, 'probe', 0);
    const [enforced, convergence] = await Promise.all([
      inForce(bench, kept, collection(CONFIGMAPS, namespaceOf('c', 0)), probe, { key: MANAGED, value: 'labeller' }),
      converge(bench, kept, n, true),
    ]);
    results.inForce = enforced;
    results.convergence.push(convergence);
    log(
      `admission: policies applied ${
        enforced.appliedSeconds === undefined ? '?' : seconds(enforced.appliedSeconds)
      }, in force ${seconds(enforced.enforcedSeconds)} after labeller started`,
    );

    let from = Date.now();
    const admitted = await createBatch(
      bench,
      'C',
      'the policies in force, labeller running',
      plan('c', n, false),
      createConcurrency,
    );
    results.batches.push(admitted.batch);
    await sleep(settleMs(n), signal);
    admitted.batch.patches = patchesOf(bench, admitted.created, from).length;
    log(`admission: batch C: ${admitted.batch.patches} labeller PATCH of its objects`);

    from = Date.now();
    const generated = await createBatch(
      bench,
      'generateName',
      'the policies in force, labeller running',
      plan('generated', samples, true),
      1,
    );
    await labelledByController(bench, kept, creators, results.generated = generated.batch, generated.created, from);
  } finally {
    await stopLabeller(kept);
  }
  // The policies stay on the server when labeller stops: the same creates, nothing else running.
  results.batches.push(
    (await createBatch(bench, 'D', 'the policies in force, labeller stopped', plan('d', n, false), createConcurrency))
      .batch,
  );

  const deployments = results.pods / REPLICAS;
  log(`admission: ${deployments} Deployments of ${REPLICAS} in ${ROLLOUT_NAMESPACE}, on ${results.nodes} kwok nodes`);
  const names = await createDeployments(
    admin,
    ROLLOUT_NAMESPACE,
    { team: ROLLOUT_TEAM },
    deployments,
    createConcurrency,
    signal,
  );
  const controllers = new AuditRequests(controlPlane.auditLog, 'kube-controller-manager/');
  for (const rolloutConfig of ['expressible', 'root'] as const) {
    results.rollouts.push(await rollout(bench, options, names, rolloutConfig, controllers));
  }
}

// ---------------------------------------------------------------- the table

const share = (part: number, whole: number): string =>
  `${part}/${whole} (${whole ? ((100 * part) / whole).toFixed(1) : '0.0'} %)`;
const perObject = (patches: number | undefined, objects: number): string =>
  patches === undefined ? 'n/a' : `${(patches / objects).toFixed(2)} PATCH per object`;
/** Seconds as µs, or ms from 1 ms on. */
const micro = (s: number): string => (s < 0.001 ? `${Math.round(s * 1e6)} µs` : ms(s * 1000));
const mean = (sum: number, count: number): string => (count ? micro(sum / count) : 'n/a');
const latencies = (b: CreateBatch): string =>
  `p50 ${ms(b.p50Ms)}, p99 ${ms(b.p99Ms)} (${(b.count / b.seconds).toFixed(0)} creates/s)`;
const signedMs = (x: number | undefined, y: number | undefined): string =>
  x === undefined || y === undefined ? 'n/a' : `${x >= y ? '+' : '−'}${ms(Math.abs(x - y))}`;

/** An AD1 row of a batch the controller labelled: the keys at create, PATCH per object, create → label. */
function controllerRow(
  b: CreateBatch,
  measurement: string,
  atCreate: string,
  target: { readonly target: string; readonly ok: boolean } | undefined,
): Row {
  return {
    id: 'AD1',
    measurement,
    result: `${share(b.atCreate, b.count)} ${atCreate}; ${perObject(b.patches, b.count)}; labelled p50 ${
      ms(b.labelP50Ms)
    }, p99 ${ms(b.labelP99Ms)} after the create`,
    target: target?.target ?? '',
    verdict: target ? verdict(target.ok) : '',
    load: b.load,
  };
}

function createToLabelRows(r: AdmissionResults): Row[] {
  const rows: Row[] = [];
  if (r.inForce) {
    rows.push({
      id: 'AD1',
      measurement:
        'Policies in force: labeller `--admission-policies` started → its policy and binding applied (its log) → a create labelled by them (a dry-run create every 100 ms)',
      result: `applied ${
        r.inForce.appliedSeconds === undefined ? 'n/a' : seconds(r.inForce.appliedSeconds)
      }, in force ${seconds(r.inForce.enforcedSeconds)} after its start`,
      target: 'measured',
      verdict: '',
      load: r.convergence.find((c) => c.policies)?.load,
    });
  }
  const c = r.batches.find((x) => x.id === 'C');
  if (c) {
    rows.push({
      id: 'AD1',
      measurement:
        `Create → label, every key expressible: ${c.count} ConfigMaps created (${c.concurrency} in flight) with the policies in force: create responses carrying every key (the constant, \`{{namespace.labels.team}}\`, \`{{labels.app}}\`, \`{{name}}\`); labeller's PATCHes of them (audit log, until ${
          seconds(settleMs(c.count) / 1000)
        } after the last create)`,
      result: `${share(c.atCreate, c.count)} labelled at create; ${c.patches ?? 'n/a'} PATCH`,
      target: '100 % at create, 0 PATCH',
      verdict: verdict(c.atCreate === c.count && c.patches === 0),
      load: c.load,
    });
  }
  const g = r.generated;
  if (g) {
    rows.push(controllerRow(
      g,
      `A key the policies cannot express: ${g.count} ConfigMaps created one at a time with \`generateName\` (the name is given after admission, so \`{{name}}\` is the controller's): the other keys at create; create → the \`{{name}}\` label (the create's completion → labeller's PATCH's, audit log)`,
      'with the other keys at create',
      { target: '100 % at create, 1 PATCH per object', ok: g.atCreate === g.count && g.patches === g.count },
    ));
  }
  const a = r.controllerAlone;
  if (a) {
    rows.push(controllerRow(
      a,
      `Without policies, the controller alone: ${a.count} ConfigMaps created one at a time while labeller runs without \`--admission-policies\`: create → every key labelled (as above)`,
      'at create',
      undefined,
    ));
  }
  return rows;
}

function rolloutRows(r: AdmissionResults): Row[] {
  return r.rollouts.map((o) => {
    const inForce = `its policy in force ${seconds(o.inForce.enforcedSeconds)} after labeller started`;
    const rolled = `rolled out in ${seconds(o.rolloutSeconds)}`;
    if (o.config === 'expressible') {
      return {
        id: 'AD2',
        measurement: `Rolling restart (restartedAt) of ${
          r.pods / REPLICAS
        } Deployments, every pod key expressible (a constant, \`{{namespace.labels.team}}\`, \`{{labels.app}}\`): the ReplicaSet controller's new pods`,
        result: `${o.created} pods created, ${
          share(o.atCreate, o.pods)
        } labelled at create (the marker lists every key at its value); ${o.patches} labeller PATCH of new pods; ${rolled}; ${inForce}`,
        target: '100 % at create, 0 PATCH',
        verdict: verdict(o.atCreate === o.pods && o.patches === 0),
        load: o.load,
      };
    }
    return {
      id: 'AD2',
      measurement:
        'The same with a `root.*` key too (`{{root.kind}}.{{root.name}}`: admission does not see the owner chain, so only the controller can set it)',
      result: `${o.created} pods created, ${
        share(o.atCreate, o.pods)
      } with the expressible keys at create; ${o.patches} labeller PATCH of ${o.patched} new pods (${
        perObject(o.patches, o.pods)
      }); last label ${o.lastPatchSeconds === undefined ? 'n/a' : seconds(o.lastPatchSeconds)} after the restart, ${
        o.lagSeconds === undefined ? 'n/a' : seconds(o.lagSeconds)
      } after the last pod was created; ${rolled}; ${inForce}`,
      target: '100 % at create; 1 PATCH per new pod (the root.* key)',
      verdict: verdict(o.atCreate === o.pods && o.patches === o.pods && o.patched === o.pods),
      load: o.load,
    };
  });
}

function latencyRows(r: AdmissionResults): Row[] {
  const { batches } = r;
  const [b, c, d] = ['B', 'C', 'D'].map((id) => batches.find((x) => x.id === id));
  if (!b || !c) return [];
  const load = (d ?? c).load;
  /** The plugin's mean per create over `x`, in seconds. */
  const plugin = (x: CreateBatch): number => x.admission.pluginSeconds / (x.admission.pluginCount || 1);
  const against = (x: CreateBatch | undefined, what: (x: CreateBatch) => string): string =>
    x ? `; ${x.id} − B ${what(x)}` : '';
  const rows: Row[] = [
    {
      id: 'AD3',
      measurement:
        `Create latency, ${b.count} ConfigMaps at ${b.concurrency} in flight, request sent → response read (${
          batches.map((x) => `${x.id}: ${x.what}`).join('; ')
        }; C's labeller sent no PATCH)`,
      result: `${batches.map((x) => `${x.id} ${latencies(x)}`).join('; ')}${
        [c, d].map((x) => against(x, (y) => `p50 ${signedMs(y.p50Ms, b.p50Ms)}, p99 ${signedMs(y.p99Ms, b.p99Ms)}`))
          .join('')
      }${d ? `; D labelled at create: ${share(d.atCreate, d.count)}` : ''}`,
      target: 'measured',
      verdict: '',
      load,
    },
  ];
  const { controllerAlone: alone, generated } = r;
  if (alone && generated) {
    rows.push({
      id: 'AD3',
      measurement:
        `The same one at a time, ${alone.count} each (AD1's: labeller running in both; with policies the names are generated)`,
      result: `without policies p50 ${ms(alone.p50Ms)}, p99 ${ms(alone.p99Ms)}; with p50 ${ms(generated.p50Ms)}, p99 ${
        ms(generated.p99Ms)
      }; difference p50 ${signedMs(generated.p50Ms, alone.p50Ms)}, p99 ${signedMs(generated.p99Ms, alone.p99Ms)}`,
      target: 'measured',
      verdict: '',
      load: generated.load,
    });
  }
  rows.push(
    {
      id: 'AD3',
      measurement:
        'The API server: the MutatingAdmissionPolicy plugin per CREATE over each batch (`apiserver_admission_controller_admission_duration_seconds{name="MutatingAdmissionPolicy"}`, Δsum ÷ Δcount)',
      result: `${batches.map((x) => `${x.id} ${micro(plugin(x))}`).join('; ')}${
        [c, d].map((x) => against(x, (y) => micro(plugin(y) - plugin(b)))).join('')
      }`,
      target: 'measured',
      verdict: '',
      load,
    },
    {
      id: 'AD3',
      measurement:
        'The API server: the mutating admission step per CREATE, every plugin (`apiserver_admission_step_admission_duration_seconds{type="admit"}`), and every CREATE it admitted over the batch',
      result: batches.map((x) =>
        `${x.id} ${mean(x.admission.stepSeconds, x.admission.stepCount)} (${x.admission.stepCount} creates)`
      ).join('; '),
      target: 'measured',
      verdict: '',
      load,
    },
    {
      id: 'AD3',
      measurement:
        'The API server: each evaluation of the policy over the batches with it (`apiserver_mutating_admission_policy_check_duration_seconds`; buckets 0.5 µs, 1 ms, 10 ms…)',
      result: batches.filter((x) => x.admission.checks > 0).map(({ id, admission: a }) =>
        `${id}: ${a.checks} evaluations, mean ${mean(a.checkSeconds, a.checks)}, ${
          share(a.checksUnder1ms, a.checks)
        } under 1 ms`
      ).join('; '),
      target: 'measured',
      verdict: '',
      load,
    },
  );
  return rows;
}

function convergenceRows(r: AdmissionResults): Row[] {
  const without = r.convergence.find((c) => !c.policies);
  return r.convergence.map((c) => ({
    id: 'AD4',
    measurement: `Convergence of ${c.objects} ConfigMaps created before labeller started (no policies then), labeller ${
      c.policies ? 'with' : 'without'
    } \`--admission-policies\`: spawn → its last PATCH (audit log)`,
    result: `${seconds(c.seconds)}${
      c.policies && without ? ` (${(c.seconds / without.seconds).toFixed(2)}× without)` : ''
    }, the first PATCH at ${seconds(c.firstPatchSeconds)}; ${perObject(c.patches, c.objects)}; ${
      formatVerbs(c.requests)
    }`,
    target: c.policies ? '1 PATCH per object; ≤ 1.10× without' : '1 PATCH per object',
    verdict: verdict(
      c.patches === c.objects && (!c.policies || without === undefined || c.seconds <= 1.1 * without.seconds),
    ),
    load: c.load,
  }));
}

export function admissionRows(r: AdmissionResults): Row[] {
  return [
    ...createToLabelRows(r),
    ...rolloutRows(r),
    ...latencyRows(r),
    ...convergenceRows(r),
  ];
}

/** The section's setup lines and table. */
export function admissionSetup(r: AdmissionResults): string[] {
  return [
    `- objects: ConfigMaps of the bench's shape (4 labels, 3 annotations, created by one POST each, nothing applied after), in batches over ${r.namespaces} namespaces each, labelled \`team=team-<i>\`: A, B, C and D of ${r.n} at ${r.createConcurrency} in flight, two of ${r.samples} one at a time; ${r.pods} pods of ${
      r.pods / REPLICAS
    } Deployments of ${REPLICAS} in one namespace (\`team=${ROLLOUT_TEAM}\`) on ${r.nodes} kwok nodes`,
    `- labeller cluster-wide, \`--concurrency ${r.concurrency}\`, ConfigMaps \`${SELECTOR}\` with \`${MANAGED}: labeller\`, \`${TEAM}: "{{namespace.labels.team}}"\`, \`${APP}: "{{labels.app}}"\`, \`${NAME}: "{{name}}"\`; pods: \`${CONFIG}\` (a constant naming the config), the team and the app, and in the second config \`${WORKLOAD}: "{{root.kind}}.{{root.name}}"\`; with \`--admission-policies\` it applies one MutatingAdmissionPolicy per kind entry (\`failurePolicy: Ignore\`)`,
    '- create latency from the bench (request sent → response read); labels at create from the create responses (ConfigMaps) or the marker `labeller.io/admitted-labels.<field manager>` (pods, made by the ReplicaSet controller); PATCHes and their times from the audit log',
    '',
    table(admissionRows(r)),
  ];
}
