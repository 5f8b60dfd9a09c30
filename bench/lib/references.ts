// Rows for labels from the object a field names (--references, issue 48 item 7): N pods labelled
// from their node (`{{node.labels.topology.kubernetes.io/zone}}`, the node named by
// spec.nodeName) against the same pods labelled from their own metadata (`{{namespace}}`), on a
// full control plane whose kwok nodes run them (bench/lib/nodepods.ts). The first has labeller
// list and watch the pods whole, cut at decode to their metadata and spec.nodeName, and the nodes
// metadata-only in a cache of their own; the second watches the pods metadata-only. Each run: time
// from spawn to the last PATCH, CPU and peak RSS from /proc, PATCHes per pod from the audit log.
// Batches alternate which runs first, as other work on the machine comes and goes. After each
// node.* run, one node's zone is changed under it: exactly the pods on that node must be
// PATCHed, once each.
import { MetadataApi } from '../../src/kube/api.ts';
import { discover } from '../../src/kube/discovery.ts';
import { resolveResource } from '../../src/apimachinery/resolve.ts';
import type { ApiResource } from '../../src/apimachinery/resource.ts';
import { type AuditRequest, countBy, formatVerbs } from '../../test/cluster/audit.ts';
import type { Labeller } from '../../test/process/labeller.ts';
import { ProcSampler } from '../../test/process/procstat.ts';
import { sleep } from '../../test/process/sleep.ts';
import { countMatching } from './cold.ts';
import type { Bench } from './context.ts';
import { converged } from './converged.ts';
import { type Launch, startWithConfig, stopLabeller } from './launch.ts';
import { NODE, nodeZones, type PlacedPods, placePods, referencesControlPlane, setZone, ZONE } from './nodepods.ts';
import { load1, mib, type Row, seconds, table } from './report.ts';
import { type Step, step } from './workloads.ts';

/** The label every run sets on every pod. */
const WHERE = 'bench.example.com/where';
/** GETs and LISTs of these are counted: the kind labelled and the kind it reads. */
const RESOURCES = new Set(['pods', 'nodes']);

/** Which template a run labels WHERE with: the pod's node's zone, or a key of the pod's own metadata. */
export type Key = 'node' | 'metadata';

const TEMPLATES: Readonly<Record<Key, string>> = {
  node: `{{node.labels.${ZONE}}}`,
  metadata: '{{namespace}}',
};

export interface ReferencesOptions extends Launch {
  readonly n: number;
  readonly concurrency: number;
  readonly createConcurrency: number;
  /** Batches of the two runs, alternating which goes first. */
  readonly rounds: number;
}

/** One labeller run over the N pods, from spawn until every pod carries its value. */
export interface RunResults extends Step {
  readonly batch: number;
  readonly key: Key;
  /** utime + stime from spawn to the last PATCH. */
  readonly cpuSeconds: number | undefined;
  /** VmHWM once convergence was confirmed. */
  readonly peakRss: number;
  /** Distinct pods PATCHed, and those PATCHed more than once. */
  readonly patchedPods: number;
  readonly repeated: number;
  readonly load: number;
}

/** A node's zone changed under a node.* run. */
export interface FlipResults extends Step {
  readonly batch: number;
  readonly node: string;
  readonly from: string;
  readonly to: string;
  /** Pods whose spec.nodeName is the node. */
  readonly podsOnNode: number;
  /** Of labeller's pod PATCHes from the change to 3 s after the last of that node's pods was labelled: */
  readonly patchedOnNode: number;
  readonly others: number;
  readonly repeated: number;
  /** labeller's CPU from the change to its last PATCH. */
  readonly cpuSeconds: number | undefined;
  readonly load: number;
}

export interface ReferencesResults {
  readonly n: number;
  readonly nodes: number;
  readonly concurrency: number;
  readonly createConcurrency: number;
  namespaces?: number;
  createdSeconds?: number;
  runningSeconds?: number;
  /** The untimed first run, which gave labeller's field manager its entry on every pod. */
  warmUpSeconds?: number;
  readonly runs: RunResults[];
  readonly flips: FlipResults[];
}

export function referencesResults(options: ReferencesOptions): ReferencesResults {
  return {
    n: options.n,
    nodes: referencesControlPlane(options.n).nodes ?? 0,
    concurrency: options.concurrency,
    createConcurrency: options.createConcurrency,
    runs: [],
    flips: [],
  };
}

/** What the runs work over: the placed pods, a metadata-only API per namespace, the resources. */
interface Cluster extends PlacedPods {
  readonly apis: readonly MetadataApi[];
  readonly pods: ApiResource;
  readonly nodeResource: ApiResource;
}

/** A labeller that has converged, still running, with its /proc sampler. */
interface Running {
  readonly labeller: Labeller;
  readonly proc: ProcSampler;
  /** The value suffix of its run. */
  readonly tag: string;
}

export async function benchReferences(
  bench: Bench,
  options: ReferencesOptions,
  results: ReferencesResults,
): Promise<void> {
  const { admin, signal, log } = bench;
  const { resources } = await discover(admin, signal);
  const pods = resolveResource('pods', resources);
  const nodeResource = resolveResource('nodes', resources);
  const placed = await placePods(
    admin,
    pods,
    `references-${Date.now().toString(36)}`,
    results.nodes,
    options.n,
    options.createConcurrency,
    signal,
    log,
  );
  results.namespaces = placed.namespaces.length;
  results.createdSeconds = placed.createdSeconds;
  results.runningSeconds = placed.runningSeconds;
  const cluster: Cluster = {
    ...placed,
    apis: placed.namespaces.map((namespace) => new MetadataApi(admin, pods, namespace)),
    pods,
    nodeResource,
  };

  // A field manager's first apply to an object (which adds its managedFields entry) costs the API
  // server 13–19 % less CPU than its later ones (bench/README.md): an untimed run first, so every
  // timed run is a later apply, whichever comes first. Each run's value carries a tag of its own,
  // so every run relabels every pod.
  const warmUp = await converge(bench, options, cluster, 'metadata', 'warm-up');
  await stop(warmUp);
  results.warmUpSeconds = warmUp.step.seconds;
  log(`references: warm-up run labelled every pod in ${seconds(warmUp.step.seconds)} (not counted)`);

  let count = 0;
  for (let batch = 1; batch <= options.rounds; batch++) {
    const order: readonly Key[] = batch % 2 === 1 ? ['node', 'metadata'] : ['metadata', 'node'];
    for (const key of order) {
      const run = await converge(bench, options, cluster, key, `run-${++count}`);
      try {
        results.runs.push({ ...run.step, ...run.figures, batch, key, load: load1() });
        if (key === 'node') results.flips.push(await flip(bench, cluster, run, batch));
      } finally {
        await stop(run);
      }
    }
  }
}

/** A converged run's figures besides its requests. */
type Figures = Pick<RunResults, 'cpuSeconds' | 'peakRss' | 'patchedPods' | 'repeated'>;

/**
 * Starts labeller labelling every pod's WHERE with `key`'s template and `tag`, and waits until
 * every pod carries its value (each checked against its node's zone or its namespace).
 */
async function converge(
  bench: Bench,
  options: ReferencesOptions,
  cluster: Cluster,
  key: Key,
  tag: string,
): Promise<Running & { readonly step: Step; readonly figures: Figures }> {
  const { admin, controlPlane, audit, signal, log } = bench;
  const zones = await nodeZones(admin, cluster.nodeResource);
  log(`references: ${tag}, pods labelled from ${key === 'node' ? 'their node' : 'their metadata'}`);
  const labeller = startWithConfig(
    options,
    controlPlane,
    `references-${tag}.yaml`,
    `kinds:\n  - resource: pods\n    labels:\n      ${WHERE}: "${TEMPLATES[key]}.${tag}"\n`,
    cluster.namespaces,
    options.concurrency,
  );
  const proc = new ProcSampler(labeller.pid);
  try {
    const values = key === 'node' ? [...new Set(zones.values())] : cluster.namespaces;
    const n = options.n;
    await converged(
      labeller,
      cluster.apis,
      `${WHERE} notin (${values.map((v) => `${v}.${tag}`).join(',')})`,
      n,
      120_000 + n * 30,
      signal,
    );
    const peakRss = proc.sample()?.peakRss ?? proc.peakRss;
    const requests = audit.requests(labeller.startedAt, Date.now());
    const run = step(requests, labeller.startedAt, RESOURCES);
    const perPod = Object.values(countBy(requests.filter(podPatched), podKey));
    // Each pod's value, not only that it has one of the run's: its node's zone, or its namespace.
    const nodesIn = new Map<string, string[]>();
    for (const [node, zone] of zones) nodesIn.set(zone, [...(nodesIn.get(zone) ?? []), node]);
    const wrong = key === 'node'
      ? [...nodesIn].flatMap(([zone, nodes]) =>
        cluster.apis.map((api) => countMatching(api, `${NODE} in (${nodes.join(',')}),${WHERE}!=${zone}.${tag}`))
      )
      : cluster.apis.map((api) => countMatching(api, `${WHERE}!=${api.namespace}.${tag}`));
    const mislabelled = (await Promise.all(wrong)).reduce((a, b) => a + b, 0);
    if (mislabelled) throw new Error(`references: ${mislabelled} pods carry another ${WHERE} than ${tag}'s`);
    const figures: Figures = {
      cpuSeconds: proc.cpuAt(labeller.startedAt + run.seconds * 1000),
      peakRss,
      patchedPods: perPod.length,
      repeated: perPod.filter((c) => c > 1).length,
    };
    log(
      `references: ${tag} labelled ${n} pods in ${seconds(run.seconds)}, CPU ${
        figures.cpuSeconds?.toFixed(2) ?? '?'
      } s, peak RSS ${mib(peakRss)} (${formatVerbs(run.requests)})`,
    );
    return { labeller, proc, tag, step: run, figures };
  } catch (error) {
    // run.ts's teardown stops the labeller.
    proc.stop();
    throw error;
  }
}

/** Stops a run's labeller; a failed exit on SIGTERM fails the bench. */
async function stop({ labeller, proc }: Running): Promise<void> {
  proc.stop();
  await stopLabeller(labeller);
}

const podPatched = (r: AuditRequest): boolean =>
  r.verb === 'patch' && r.resource === 'pods' && r.code !== undefined && r.code < 300;
const podKey = (r: Pick<AuditRequest, 'namespace' | 'name'>): string => `${r.namespace}/${r.name}`;

/**
 * Changes the zone of node `batch` under a converged node.* run; once that node's pods carry the
 * new zone and 3 s more have passed, labeller's PATCHes since the change against the pods whose
 * spec.nodeName is that node.
 */
async function flip(bench: Bench, cluster: Cluster, run: Running, batch: number): Promise<FlipResults> {
  const { admin, audit, signal, log } = bench;
  const { labeller, proc, tag } = run;
  const node = cluster.nodes[batch % cluster.nodes.length]!;
  const from = (await nodeZones(admin, cluster.nodeResource)).get(node) ?? '';
  const to = `zone-moved-${batch}`;
  const { items } = await new MetadataApi(admin, cluster.pods).list({ fieldSelector: `spec.nodeName=${node}` });
  const onNode = new Set(items.map((p) => podKey({ namespace: p.metadata.namespace ?? '', name: p.metadata.name })));
  const applied = labeller.counts.applied;
  const cpuBefore = proc.sample()?.cpuSeconds;
  const changedAt = Date.now();
  await setZone(admin, node, to);
  await converged(
    labeller,
    cluster.apis,
    `${NODE}=${node},${WHERE}!=${to}.${tag}`,
    applied + onNode.size,
    120_000 + onNode.size * 30,
    signal,
  );
  await sleep(3000, signal);
  const requests = audit.requests(changedAt, Date.now());
  const changed = step(requests, changedAt, RESOURCES);
  const perPod = countBy(requests.filter(podPatched), podKey);
  const cpuAt = proc.cpuAt(changedAt + changed.seconds * 1000);
  const results: FlipResults = {
    ...changed,
    batch,
    node,
    from,
    to,
    podsOnNode: onNode.size,
    patchedOnNode: Object.keys(perPod).filter((pod) => onNode.has(pod)).length,
    others: Object.keys(perPod).filter((pod) => !onNode.has(pod)).length,
    repeated: Object.values(perPod).filter((c) => c > 1).length,
    cpuSeconds: cpuAt !== undefined && cpuBefore !== undefined ? cpuAt - cpuBefore : undefined,
    load: load1(),
  };
  log(
    `references: ${node} ${from} → ${to}: ${results.patches} PATCH in ${
      seconds(results.seconds)
    }, ${results.patchedOnNode} of its ${onNode.size} pods, ${results.others} of other nodes, ${results.repeated} twice`,
  );
  return results;
}

const ratio = (a: number | undefined, b: number | undefined): string =>
  a === undefined || b === undefined || b === 0 ? 'n/a' : `${(a / b).toFixed(2)}×`;

export function referencesRows(r: ReferencesResults): Row[] {
  const rows: Row[] = [];
  const batches = [...new Set(r.runs.map((run) => run.batch))];
  for (const batch of batches) {
    const runs = r.runs.filter((run) => run.batch === batch);
    runs.forEach((run, i) => rows.push(runRow(r.n, run, i === 0 ? 'first' : 'second')));
    const [node, metadata] = (['node', 'metadata'] as const).map((key) => runs.find((run) => run.key === key));
    if (node && metadata) {
      rows.push({
        id: 'RF3',
        measurement: `Batch ${batch}: pods labelled from \`node.*\` ÷ from their metadata`,
        result: `time ${ratio(node.seconds, metadata.seconds)}, CPU ${
          ratio(node.cpuSeconds, metadata.cpuSeconds)
        }, peak RSS ${ratio(node.peakRss, metadata.peakRss)}`,
        target: 'measured',
        verdict: '',
        load: node.load,
      });
    }
    for (const flip of r.flips.filter((f) => f.batch === batch)) rows.push(flipRow(flip));
  }
  return rows;
}

function runRow(n: number, run: RunResults, order: string): Row {
  const ok = run.patches === n && run.patchedPods === n && !run.failed && !run.objectGets;
  return {
    id: run.key === 'node' ? 'RF1' : 'RF2',
    measurement: `Batch ${run.batch}, ${order}: ${
      run.key === 'node'
        ? `\`${TEMPLATES.node}\` (pods listed and watched whole, cut to metadata + spec.nodeName; nodes metadata-only)`
        : `\`${TEMPLATES.metadata}\` (pods metadata-only)`
    }: labeller started → all ${n} pods labelled (last PATCH)`,
    result: `${seconds(run.seconds)}; CPU ${run.cpuSeconds?.toFixed(2) ?? 'n/a'} s (${
      run.cpuSeconds === undefined ? 'n/a' : `${((run.cpuSeconds * 1000) / n).toFixed(2)} ms per pod`
    }); peak RSS ${mib(run.peakRss)}; ${formatVerbs(run.requests)} (${(run.patches / n).toFixed(2)} PATCH per pod${
      run.failed ? `, ${run.failed} failed` : ''
    }, ${run.repeated} pods more than once; ${run.objectGets} GET and ${run.objectLists} LIST of pods and nodes)`,
    target: '1 PATCH per pod, 0 GET',
    verdict: ok ? 'pass' : 'miss',
    load: run.load,
  };
}

function flipRow(f: FlipResults): Row {
  const ok = f.patches === f.podsOnNode && f.patchedOnNode === f.podsOnNode && !f.others && !f.repeated &&
    !f.failed && !f.objectGets && !f.objectLists;
  return {
    id: 'RF4',
    measurement:
      `Batch ${f.batch}: ${f.node}'s zone changed (${f.from} → ${f.to}) under the \`node.*\` labeller; its PATCHes from the change to 3 s after the ${f.podsOnNode} pods on that node carried the new zone`,
    result: `last PATCH ${seconds(f.seconds)} after the change; ${f.patches} PATCH${
      f.failed ? ` (${f.failed} failed)` : ''
    }: ${f.patchedOnNode} of the ${f.podsOnNode} pods on the node, ${f.others} pods of other nodes, ${f.repeated} pods more than once; labeller CPU ${
      f.cpuSeconds?.toFixed(2) ?? 'n/a'
    } s; ${formatVerbs(f.requests)}`,
    target: 'exactly the pods on that node, once each; 0 GET, 0 LIST',
    verdict: ok ? 'pass' : 'miss',
    load: f.load,
  };
}

/** The section's lines about the objects and the runs, and the table. */
export function referencesSetup(r: ReferencesResults): string[] {
  return [
    `- objects: ${r.n} pods (one container with requests and limits, created by one POST each with \`spec.nodeName\` set, so no scheduler) over ${
      r.namespaces ?? '?'
    } namespaces on ${r.nodes} kwok nodes (${
      Math.round(r.n / r.nodes)
    } each; \`${ZONE}\` zone-a to zone-d in turn), created in ${
      r.createdSeconds === undefined ? '?' : seconds(r.createdSeconds)
    } at ${r.createConcurrency} in flight, all Running ${
      r.runningSeconds === undefined ? '?' : seconds(r.runningSeconds)
    } after the last create (kwok)`,
    `- labeller over the pods' ${
      r.namespaces ?? '?'
    } namespaces (\`--namespace\`), \`--concurrency ${r.concurrency}\`, one label \`${WHERE}\`: RF1 \`"${TEMPLATES.node}.<run>"\`, RF2 \`"${TEMPLATES.metadata}.<run>"\`; the value carries each run's own tag, so every run relabels every pod under the same field manager; an untimed run first (RF2's template, ${
      r.warmUpSeconds === undefined ? '?' : seconds(r.warmUpSeconds)
    }) gave the manager its entry on every pod, so each timed run is a later apply; batches alternate which runs first`,
    "- time: spawn → the end of the last labeller PATCH (audit log), confirmed by metadata-only lists (`notin` the run's values), each pod's value then checked against its node's zone or its namespace; CPU (utime + stime at that PATCH) and peak RSS (VmHWM) from /proc; RF4: after RF1 converged, a node's zone changed, until its pods carried the new value and 3 s more; labeller's PATCHes since the change (audit log) against the pods whose `spec.nodeName` is that node",
    '',
    table(referencesRows(r)),
  ];
}
