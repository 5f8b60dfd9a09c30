// labeller's benchmarks (issues 5 and 9), against a control plane of their own (test/controlplane),
// one module per measurement under bench/lib/:
//   1. cold convergence of N objects, the requests it took, by verb (audit log), and labeller's CPU
//      and peak RSS read from /proc (cold.ts);
//   2. the server's limit: the same N server-side apply patches from a minimal tight loop at the
//      same concurrency, through the same KubeClient; convergence is reported as a ratio to it (loop.ts);
//   3. a restart over the labelled cluster: time to ready and PATCH requests (restart.ts);
//   4. memory per cached object: labeller's pruned cache, the full PartialObjectMetadata, and
//      @kubernetes/client-node's informer (child processes with --expose-gc; cachememory.ts);
//   5. relabel latency, on an idle API server and under background churn (latency.ts);
//   6. idle cost: requests per minute and relists while nothing changes (idle.ts).
// --related measures labels from related objects instead (related.ts); --every-kind labeller's
// footprint in every-kind mode (everykind.ts); --peers sets labeller side by side with labellers on
// kube-rs, controller-runtime and @kubernetes/client-node (peers.ts); --lists compares its first
// list as a streaming list and as paginated lists (lists.ts); --shards replicas that share the
// work (--shards auto) against one labeller (shards.ts); --admission labels at create with the
// admission policies, on a full control plane (admission.ts); --references pods labelled from
// their node against from their own metadata, and a node's label changed (references.ts).
// Prints a markdown table, writes bench/results/<timestamp>.json and updates bench/RESULTS.md.
//
//   npm run bench -- [--quick] [--n 1k|10k|50k] [--idle-minutes 2] [--samples 200] ...
//   deno run -A bench/run.ts [same options]
//
// Exit status: 0 when the bench ran (missed targets are reported, not failures), 1 when something
// broke, 2 for bad options, 130 on Ctrl-C. Run with --help for every option.
import { fileURLToPath } from 'node:url';
import { KubeClient } from '../src/kube/client.ts';
import { discover } from '../src/kube/discovery.ts';
import { resolveResource } from '../src/apimachinery/resolve.ts';
import { type ControlPlane, startControlPlane } from '../test/controlplane/controlplane.ts';
import { AuditRequests } from '../test/cluster/audit.ts';
import { running as runningLabellers } from '../test/process/labeller.ts';
import { admissionControlPlane, admissionResults, benchAdmission } from './lib/admission.ts';
import { cacheMemory } from './lib/cachememory.ts';
import { children, controlPlanes } from './lib/children.ts';
import { parseOrExit, progress } from './lib/cli.ts';
import { coldConvergence } from './lib/cold.ts';
import { benchEveryKind } from './lib/everykind.ts';
import type { Bench } from './lib/context.ts';
import { idleCost } from './lib/idle.ts';
import { checkLatency, relabelLatency } from './lib/latency.ts';
import { labellerArgs, podCredentials } from './lib/launch.ts';
import { tightLoop } from './lib/loop.ts';
import { type Options, options, USAGE } from './lib/options.ts';
import { describeRun, endMeta, etcdVersion, type Results, rows, sectionKey, startMeta } from './lib/record.ts';
import { benchLists } from './lib/lists.ts';
import { benchScrape } from './lib/scrape.ts';
import { benchPeers, peersResults } from './lib/peers.ts';
import { benchReferences, referencesResults } from './lib/references.ts';
import { referencesControlPlane } from './lib/nodepods.ts';
import { benchRelated } from './lib/related.ts';
import { benchShards, shardsResults } from './lib/shards.ts';
import { benchSources } from './lib/sources.ts';
import { benchWorkloads, workloadsControlPlane } from './lib/workloads.ts';
import { load1, seconds, updateResultsFile, writeJson } from './lib/report.ts';
import { restart } from './lib/restart.ts';
import { setUp } from './lib/setup.ts';

process.chdir(fileURLToPath(new URL('..', import.meta.url)));
const log = progress('bench');

/** The main bench: rows 1–6 over one namespace of N objects, as far as the options go. */
async function main(bench: Bench, opts: Options, results: Results): Promise<void> {
  const setup = await setUp(bench, opts.n, opts.createConcurrency);
  results.setup = setup.results;
  const { namespace } = setup;
  const memory = async (): Promise<void> => {
    await cacheMemory(bench, namespace, opts.n, opts.concurrency, opts.runtime, results.memory = {});
  };
  if (opts.memoryOnly) return await memory();
  const kubeconfig = bench.controlPlane.kubeconfig;
  const pod = opts.credentials === 'in-cluster' ? podCredentials(kubeconfig, namespace) : undefined;
  const args = labellerArgs(pod ? undefined : kubeconfig, namespace, opts.kinds, opts.concurrency);

  const cold = results.cold = await coldConvergence(bench, opts, setup, args, pod);
  const loop = results.loop = await tightLoop(bench, namespace, setup.objects, opts.concurrency * opts.kinds.length);
  log(`tight loop: ${seconds(loop.seconds)}; ratio ${(cold.seconds / loop.seconds).toFixed(2)}×`);
  if (opts.coldOnly) return;

  const second = await restart(bench, opts, args, pod, opts.n);
  results.restart = second.results;
  // Idle before the latency samples change anything.
  results.idle = await idleCost(bench, second.labeller, opts.idleMinutes);
  results.latency = await relabelLatency(bench, second.labeller, setup, opts.samples, opts.churnRate);
  checkLatency(results.latency, second.labeller);
  if (opts.memory) await memory();
}

async function bench(controlPlane: ControlPlane, opts: Options, results: Results, signal: AbortSignal): Promise<void> {
  const admin = await KubeClient.load({ kubeconfig: controlPlane.kubeconfig, userAgent: 'labeller-bench' });
  try {
    results.meta['kubeApiserver'] = (await admin.json<{ gitVersion: string }>('GET', '/version')).gitVersion;
    const { resources } = await discover(admin);
    const context: Bench = {
      controlPlane,
      admin,
      audit: new AuditRequests(controlPlane.auditLog, 'labeller/'),
      resources: new Map(opts.kinds.map((k) => [k, resolveResource(k.resource, resources)])),
      signal,
      log,
    };
    if (opts.related) results.related = { ...(await benchRelated(context, opts)), load: load1() };
    else if (opts.sources) results.sources = { ...(await benchSources(context, opts)), load: load1() };
    else if (opts.everyKind) results.everyKind = { ...(await benchEveryKind(context, opts)), load: load1() };
    else if (opts.workloads) {
      results.workloads = {
        ...(await benchWorkloads(admin, controlPlane, context.audit, opts, signal, log)),
        load: load1(),
      };
    } else if (opts.peers) await benchPeers(context, opts, results.peers = peersResults(opts));
    else if (opts.shards) await benchShards(context, opts, results.shards = shardsResults(opts));
    else if (opts.admission) await benchAdmission(context, opts, results.admission = admissionResults(opts));
    else if (opts.references) await benchReferences(context, opts, results.references = referencesResults(opts));
    else if (opts.lists) results.lists = await benchLists(context, opts, opts.n, opts.rounds);
    else if (opts.scrape) results.scrape = await benchScrape(context, opts, opts.n);
    else await main(context, opts, results);
  } finally {
    await admin.close();
  }
}

// ---------------------------------------------------------------- the run

const opts = parseOrExit('bench', USAGE, () => options(process.argv.slice(2)));

const abort = new AbortController();
let controlPlane: Promise<ControlPlane> | undefined;
let finishing = false;

async function teardown(): Promise<void> {
  await Promise.all([...runningLabellers].map((l) => l.stop('SIGTERM', 5000)));
  for (const child of children) child.kill('SIGKILL');
  await Promise.all([...controlPlanes].map((cp) => cp.stop()));
  await controlPlane?.then((cp) => cp.stop(), () => {});
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (finishing) {
      for (const l of runningLabellers) l.kill();
      for (const child of children) child.kill('SIGKILL');
      process.exit(130);
    }
    finishing = true;
    log(`${signal}: stopping labeller and the control plane`);
    abort.abort(new Error(signal));
    void teardown().finally(() => process.exit(130));
  });
}

const startedAt = new Date();
const results: Results = { meta: startMeta(startedAt, opts), options: opts };

let status = 0;
try {
  log(`starting the control plane (N = ${opts.n}, labeller on ${opts.runtime})`);
  controlPlane = startControlPlane(
    abort.signal,
    opts.workloads
      ? workloadsControlPlane(opts.n)
      : opts.admission
      ? admissionControlPlane(opts.n)
      : opts.references
      ? referencesControlPlane(opts.n)
      : {},
  );
  const cp = await controlPlane;
  results.meta['etcd'] = etcdVersion();
  await bench(cp, opts, results, abort.signal);
} catch (error) {
  if (abort.signal.aborted) await new Promise(() => {}); // the signal handler exits
  status = 1;
  results.error = error instanceof Error ? (error.stack ?? error.message) : String(error);
  log(`FAILED: ${results.error}`);
} finally {
  if (!finishing) {
    finishing = true;
    await teardown();
  }
}

endMeta(results.meta, startedAt);
const section = describeRun(results);
process.stdout.write(`\n${section}\n\n`);
const name = startedAt.toISOString().replace(/[:.]/g, '-');
const jsonPath = writeJson('bench/results', name, { ...results, rows: rows(results) });
log(`wrote ${jsonPath}`);
// A --cold-only or --memory-only run is for iterating: it leaves the full runs' sections alone.
if (status === 0 && opts.resultsMd && !opts.coldOnly && !opts.memoryOnly) {
  updateResultsFile('bench/RESULTS.md', sectionKey(opts), section);
  log('updated bench/RESULTS.md');
}
process.exit(status);
