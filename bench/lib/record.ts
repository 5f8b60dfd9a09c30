// A run of bench/run.ts as it is kept: every measurement's figures (the JSON record in
// bench/results/), their rows, and the markdown section printed and put in bench/RESULTS.md, whose
// header says what ran where.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';
import { binaries } from '../../test/controlplane/controlplane.ts';
import { host, runtimeVersion } from '../../test/process/runtime.ts';
import { type AdmissionResults, admissionRows, admissionSetup } from './admission.ts';
import { type MemoryResults, memoryRows } from './cachememory.ts';
import { type ColdResults, coldRows } from './cold.ts';
import { type EveryKindResults, everyKindRows } from './everykind.ts';
import { type IdleResults, idleRows } from './idle.ts';
import { type LatencyResults, latencyRows } from './latency.ts';
import { type LoopResults, loopRows } from './loop.ts';
import type { Options } from './options.ts';
import { type ListsResults, listsTable } from './lists.ts';
import { type ScrapeResults, scrapeRows, scrapeTable } from './scrape.ts';
import { peersNotes, type PeersResults, peersTable } from './peers.ts';
import { type ReferencesResults, referencesRows, referencesSetup } from './references.ts';
import { type RelatedResults, relatedRows } from './related.ts';
import { type ShardsResults, shardsRows, shardsSetup } from './shards.ts';
import { type SourcesResults, sourcesRows } from './sources.ts';
import { workloadRows, type WorkloadsResults } from './workloads.ts';
import { type Row, seconds, table } from './report.ts';
import { type RestartResults, restartRows } from './restart.ts';
import type { SetupResults } from './setup.ts';

export interface Results {
  meta: Record<string, unknown>;
  options: Options;
  setup?: SetupResults;
  cold?: ColdResults;
  loop?: LoopResults;
  restart?: RestartResults;
  idle?: IdleResults;
  latency?: LatencyResults;
  memory?: MemoryResults;
  related?: RelatedResults & { load: number };
  workloads?: WorkloadsResults & { load: number };
  sources?: SourcesResults & { load: number };
  everyKind?: EveryKindResults & { load: number };
  peers?: PeersResults;
  lists?: ListsResults;
  shards?: ShardsResults;
  admission?: AdmissionResults;
  scrape?: ScrapeResults;
  references?: ReferencesResults;
  error?: string;
}

function git(args: string[]): string {
  try {
    return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return '';
  }
}

export function etcdVersion(): string {
  try {
    const out = execFileSync(join(binaries(), 'etcd'), ['--version'], { encoding: 'utf8' });
    return `v${/etcd Version: (\S+)/.exec(out)?.[1] ?? '?'}`;
  } catch {
    return 'unknown';
  }
}

const loads = (): string => loadavg().map((x) => x.toFixed(2)).join(' / ');

/** What the section's header says about the run, as known when it starts. */
export function startMeta(startedAt: Date, opts: Options): Record<string, unknown> {
  return {
    startedAt: startedAt.toISOString(),
    command: `${host === 'node' ? 'node --import tsx' : 'deno run -A'} bench/run.ts ${process.argv.slice(2).join(' ')}`
      .trim(),
    benchRuntime: runtimeVersion(),
    labellerRuntime: opts.runtime === host ? runtimeVersion() : opts.runtime,
    labellerVersion: (JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version,
    git: `${git(['rev-parse', '--short', 'HEAD']) || '?'}${
      git(['status', '--porcelain', '--', 'src', 'bin', 'package.json']) ? ' + uncommitted changes' : ''
    }`,
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memoryGiB: (totalmem() / 2 ** 30).toFixed(1),
    kernel: release(),
    loadAtStart: loads(),
  };
}

/** Adds what is known once the run has ended. */
export function endMeta(meta: Record<string, unknown>, startedAt: Date): void {
  meta['durationSeconds'] = (Date.now() - startedAt.getTime()) / 1000;
  meta['loadAtEnd'] = loads();
}

export function rows(r: Results): Row[] {
  const n = r.options.n;
  const { cold, loop, restart, idle, latency, memory, related, workloads, sources, everyKind } = r;
  return [
    ...(r.shards ? shardsRows(r.shards) : []),
    ...(r.admission ? admissionRows(r.admission) : []),
    ...(r.scrape ? scrapeRows(r.scrape) : []),
    ...(r.references ? referencesRows(r.references) : []),
    ...(everyKind ? everyKindRows(everyKind, everyKind.load) : []),
    ...(related ? relatedRows(related, related.load) : []),
    ...(workloads ? workloadRows(workloads, workloads.load) : []),
    ...(sources ? sourcesRows(sources, sources.load) : []),
    ...(cold ? coldRows(cold, n, r.options.credentials) : []),
    ...(loop ? loopRows(loop, cold, n) : []),
    ...(restart ? restartRows(restart) : []),
    ...(memory ? memoryRows(memory) : []),
    ...(latency ? latencyRows(latency) : []),
    ...(idle ? idleRows(idle) : []),
  ];
}

/** The run's section: what ran where, then the table and notes. */
export function describeRun(r: Results): string {
  const m = r.meta;
  const o = r.options;
  const quick = o.quick ? ' (--quick)' : '';
  const where = `labeller on ${o.runtime === 'node' ? 'Node' : 'Deno'}${
    o.build === undefined ? '' : `, from ${o.build}/`
  }`;
  const lines = [
    o.peers
      ? `## N = ${o.n}${quick}, labeller and its peers (--peers)`
      : o.shards
      ? `## N = ${o.n}${quick}, sharded replicas (--shards), ${where}`
      : o.admission
      ? `## N = ${o.n}${quick}, labels at create: admission policies (--admission), ${where}`
      : o.lists
      ? `## N = ${o.n}, labeller's first list: streaming or paginated (--lists), ${where}`
      : o.scrape
      ? `## N = ${o.n}${quick}, the cost of a /metrics scrape (--scrape), ${where}`
      : o.references
      ? `## N = ${o.n}${quick}, labels from the objects a field names (--references), ${where}`
      : `## N = ${o.n}${quick}${
        o.related
          ? ', labels from related objects (--related)'
          : o.workloads
          ? ', real shapes (--workloads)'
          : o.sources
          ? ', labels from a source of truth (--sources)'
          : o.everyKind
          ? ' per kind, every-kind mode (--every-kind)'
          : ''
      }, ${where}`,
    '',
    `- run: ${String(m['startedAt'])}, ${seconds(Number(m['durationSeconds'] ?? 0))} in all; \`${
      String(m['command'])
    }\``,
    `- labeller ${String(m['labellerVersion'])} (git ${String(m['git'])}), labeller${
      o.peers || o.shards || o.admission || o.scrape || o.references ? '' : ' and memory probes'
    } on ${String(m['labellerRuntime'])}; bench on ${String(m['benchRuntime'])}`,
    `- kube-apiserver ${String(m['kubeApiserver'] ?? '?')}, etcd ${
      String(m['etcd'])
    } (test/controlplane, loopback, audit log on; every client is system:masters, so API Priority and Fairness exempts them all)`,
    `- machine: ${String(m['cpu'])}, ${String(m['cores'])} cores, ${String(m['memoryGiB'])} GiB, Linux ${
      String(m['kernel'])
    }`,
    `- load average (1/5/15 min): ${String(m['loadAtStart'])} at start, ${
      String(m['loadAtEnd'] ?? '?')
    } at end; other work shares the machine, so figures are noisy`,
    ...(o.peers
      ? peersSetup(r)
      : o.lists
      ? listsSetup(r)
      : o.scrape
      ? scrapeSetup(r)
      : o.shards && r.shards
      ? [`- labeller run from ${howRun(o)}`, ...shardsSetup(r.shards)]
      : o.admission && r.admission
      ? [`- labeller run from ${howRun(o)}`, ...admissionSetup(r.admission)]
      : o.references && r.references
      ? [`- labeller run from ${howRun(o)}`, ...referencesSetup(r.references)]
      : benchSetup(r)),
  ];
  const notes: string[] = [];
  if (r.cold && (r.cold.logErrors || r.cold.logWarnings)) {
    notes.push(`cold run logged ${r.cold.logErrors} errors and ${r.cold.logWarnings} warnings`);
  }
  if (r.latency && (r.latency.logErrors || r.latency.logWarnings)) {
    notes.push(`restarted run logged ${r.latency.logErrors} errors and ${r.latency.logWarnings} warnings`);
  }
  if (r.latency?.churn.churnErrors) notes.push(`${r.latency.churn.churnErrors} churn writes failed`);
  if (r.peers) notes.push(...peersNotes(r.peers));
  if (r.error) notes.push(`**the run failed**: ${r.error.split('\n')[0]}`);
  if (notes.length) lines.push('', ...notes.map((n) => `- ${n}`));
  return lines.join('\n');
}

/** The main bench's and --related's objects, how labeller ran, and the table. */
function benchSetup(r: Results): string[] {
  const o = r.options;
  return [
    r.everyKind
      ? `- objects: ${r.everyKind.perKind} of each of ${r.everyKind.kinds} kinds (ConfigMaps, Secrets, headless Services, ServiceAccounts, Deployments, StatefulSets, Jobs, CronJobs, Roles, RoleBindings) in one namespace, each with 3 labels and 2 annotations, created in ${
        seconds(r.everyKind.createdSeconds)
      }, besides the control plane's own objects; labeller with \`- resource: "*"\` and \`scope: all\`, cluster-wide, 2 labels`
      : r.workloads
      ? `- objects: ${r.workloads.pods} pods of ${r.workloads.deployments} Deployments (kube-controller-manager, kube-scheduler, kwok); labels \`{{root.kind}}.{{root.name}}\` on pods and ReplicaSets, \`{{owner.name}}\` on pods`
      : r.related || r.sources
      ? `- objects: ${o.n} ConfigMaps, Services and Deployments in one namespace, with the same metadata as the main bench; one label, \`${
        r.sources ? '{{teams[namespace.labels.team].costCenter}}' : '{{namespace.labels.team}}'
      }\`${r.sources ? ' (the source: a ConfigMap in a namespace of its own)' : ''}`
      : `- objects: ${
        Object.entries(r.setup?.objects ?? {}).map(([k, v]) => `${v} ${k}`).join(', ')
      }, each with 6 labels, 4 annotations and managedFields of \`kubectl-create\` (Update) and \`argocd-controller\` (Apply); created in ${
        r.setup ? seconds(r.setup.seconds) : '?'
      }`,
    `- labeller run from ${howRun(o)}; ${
      o.credentials === 'in-cluster'
        ? "in-cluster credentials (a service-account folder at the kubelet's mount point, in a private mount namespace)"
        : 'kubeconfig credentials (bearer token)'
    }`,
    `- labeller \`--concurrency ${o.concurrency}\` per kind (${
      r.everyKind ? 'each controller' : `${o.concurrency * o.kinds.length} in all; the tight loop uses the same`
    }), ${
      o.related ? 'one label' : '2 labels'
    }; convergence ends at the last labeller PATCH in the audit log, confirmed by a metadata-only list`,
    '',
    table(rows(r)),
  ];
}

/** What runs labeller: the sources or a build, with which V8 flags and environment. */
function howRun(o: Results['options']): string {
  const what = o.build === undefined ? `the sources (\`${o.entry}\`)` : `the build (\`${o.entry}\`)`;
  const flags = o.v8Flags.length ? ` with V8 flags \`${o.v8Flags.join(' ')}\`` : '';
  const env = Object.keys(o.env).length
    ? `, environment \`${Object.entries(o.env).map(([k, v]) => `${k}=${v}`).join(' ')}\``
    : '';
  return `${what}${flags}${env}`;
}

/** --peers' objects, what each controller is told and how it is measured, and the table. */
function peersSetup(r: Results): string[] {
  const o = r.options;
  const settle = seconds(3 + o.n / 5000);
  return [
    `- objects: ${o.n} ConfigMaps per controller, each set in a fresh namespace (the previous set deleted), each with 6 labels, 4 annotations and managedFields of \`kubectl-create\` (Update) and \`argocd-controller\` (Apply)`,
    `- each controller applies one label (\`${
      r.peers?.label ?? '?'
    }\`, forced server-side apply) at concurrency ${o.concurrency}, with kubeconfig credentials (a bearer token); ${o.rounds} batch${
      o.rounds === 1 ? '' : 'es, every other one in reverse order'
    }; ratios are to kube-rs and to the Node floor of the same batch: labeller's rows to the floor run with the image's flags (the same V8 settings), the others to the floor as Node runs by default`,
    `- time to converge: spawn → the end of its last successful PATCH in the audit log (its PATCHes in its namespace counted as the log grows, no load on the API server), confirmed by a metadata-only list; CPU: utime + stime at that PATCH, and peak RSS (VmHWM), from /proc; RSS after restart: a second run over the ${o.n} labelled objects, VmRSS ${settle} after the line saying its cache is synced; PATCH on restart: that run's PATCH requests (audit log)`,
    '',
    r.peers ? peersTable(r.peers) : '',
  ];
}

/** --lists' objects, how labeller ran, and the table. */
function listsSetup(r: Results): string[] {
  const o = r.options;
  return [
    `- objects: ${o.n} ConfigMaps in one namespace, with the same metadata as the main bench; labeller applies a label every one already carries, so it lists and writes nothing; each run ends at its \`initial list complete\``,
    `- labeller run from ${
      howRun(o)
    }; \`KUBE_FEATURE_WatchListClient=true\` or \`false\`; ${o.rounds} runs each, alternating which goes first; medians, then each run`,
    '',
    r.lists ? listsTable(r.lists) : '',
  ];
}

/** --scrape's objects, how labeller ran, the rows and the phases. */
function scrapeSetup(r: Results): string[] {
  const o = r.options;
  return [
    `- objects: ${o.n} ConfigMaps in one namespace, with the same metadata as the main bench; labeller applies \`example.com/team={{namespace.labels.team}}\` from ${
      howRun(o)
    }, \`--concurrency ${o.concurrency}\``,
    "- each scrape timed from request to the end of its body; /healthz asked every 10 ms from spawn to stop, its slowest answer during the scrapes (and over the phase) the longest the event loop was busy; phases: the first scrape after the first list, one a second until converged, 10 a second apart, then one a second while the namespace's label change relabels every object; then labeller in every-kind mode over the kinds the control plane serves (the bench's objects left out by a selector), 10 scrapes once ready",
    '',
    r.scrape ? `${table(scrapeRows(r.scrape))}\n\n${scrapeTable(r.scrape)}` : '',
  ];
}

/** The key of the run's section in bench/RESULTS.md. */
export function sectionKey(o: Options): string {
  const runtime = `runtime=${o.runtime}${o.build === undefined ? '' : ` build=${o.build}`}`;
  if (o.peers) return `n=${o.n} peers`;
  if (o.shards) return `n=${o.n} shards ${runtime}`;
  if (o.admission) return `n=${o.n} admission ${runtime}`;
  if (o.lists) return `n=${o.n} lists ${runtime}`;
  if (o.scrape) return `n=${o.n} scrape ${runtime}`;
  if (o.references) return `n=${o.n} references ${runtime}`;
  return `n=${o.n} ${runtime}${
    o.related ? ' related' : o.workloads ? ' workloads' : o.sources ? ' sources' : o.everyKind ? ' every-kind' : ''
  }`;
}
