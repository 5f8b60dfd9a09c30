// labeller's benchmarks (issues 5 and 9), against a control plane of their own (test/controlplane):
//   1. cold convergence of N objects, the requests it took, by verb (audit log), and labeller's CPU
//      and peak RSS read from /proc;
//   2. the server's limit: the same N server-side apply patches from a minimal tight loop at the
//      same concurrency, through the same KubeClient; convergence is reported as a ratio to it;
//   3. a restart over the labelled cluster: time to ready and PATCH requests;
//   4. memory per cached object: labeller's pruned cache, the full PartialObjectMetadata, and
//      @kubernetes/client-node's informer (child processes with --expose-gc);
//   5. relabel latency, on an idle API server and under background churn;
//   6. idle cost: requests per minute and relists while nothing changes.
// Prints a markdown table, writes bench/results/<timestamp>.json and updates bench/RESULTS.md.
//
//   npm run bench -- [--quick] [--n 1k|10k|50k] [--idle-minutes 2] [--samples 200] ...
//   deno run -A bench/run.ts [same options]
//
// Exit status: 0 when the bench ran (missed targets are reported, not failures), 1 when
// something broke, 130 on Ctrl-C. Run with --help for every option.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { MetadataApi } from '../src/kube/api.ts';
import { KubeClient } from '../src/kube/client.ts';
import { discover } from '../src/kube/discovery.ts';
import { resolveResource } from '../src/kube/resolve.ts';
import type { ApiResource } from '../src/kube/resource.ts';
import { labelClient } from '../src/labelclient.ts';
import { binaries, type ControlPlane, startControlPlane } from '../test/controlplane/controlplane.ts';
import { type AuditRequest, AuditRequests, byVerb, countBy, formatVerbs } from '../test/harness/audit.ts';
import { type Child, describeExit, start } from '../test/harness/child.ts';
import { inClusterWrapper } from '../test/harness/incluster.ts';
import { running as runningLabellers } from '../test/harness/labeller.ts';
import { ProcSampler } from '../test/harness/procstat.ts';
import { host, type Runtime, runtimeVersion, tsCommand } from '../test/harness/runtime.ts';
import { sleep } from '../test/harness/sleep.ts';
import { converged } from './lib/converged.ts';
import { type Launch, launch, LAUNCH_OPTIONS, LAUNCH_USAGE, type PodLaunch, startLabeller } from './lib/launch.ts';
import type { MemoryMode, MemoryRequest, MemoryResult } from './memory.ts';
import { type BenchObject, createObjects, KINDS, type KindSpec, pool, split } from './lib/objects.ts';
import { bytes, mib, ms, type Row, seconds, table, updateResultsFile, type Verdict, writeJson } from './lib/report.ts';
import { benchRelated, type RelatedResults, relatedRows } from './lib/related.ts';
import { Churn, LabelWatch, type LatencySamples, measureRelabel, percentile } from './lib/relabel.ts';
import { benchWorkloads, workloadRows, workloadsControlPlane, type WorkloadsResults } from './lib/workloads.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
process.chdir(root);

// ---------------------------------------------------------------- options

const USAGE = `usage: bench/run.ts [options]
  --quick                 N = 300, idle 0.5 min, 50 latency samples (CI; a few minutes)
  --n N                   objects, split over the kinds (1k, 10k, 50k; default 10k)
  --kinds K               the kinds labelled, of configmaps,services,deployments (default all three;
                          configmaps alone is the issue's side-by-side with the Go and Rust controllers)
  --idle-minutes M        idle window (default 2; the target is about 10)
  --samples S             relabel latency samples, idle and under churn each (default 200)
  --concurrency C         labeller's --concurrency per kind (default 8); the tight loop uses C × kinds
  --create-concurrency C  requests in flight while creating objects (default 50)
  --churn-rate R          background writes per second during the churn latency samples (default 20)
${LAUNCH_USAGE}
                          (the memory probes run on labeller’s runtime)
  --credentials C         how labeller authenticates: kubeconfig (a bearer token, default) or in-cluster
                          (the same token as a pod's service-account mount, KUBERNETES_SERVICE_*, no kubeconfig)
  --cold-only             stop after cold convergence and the tight loop (for iterating on CPU and memory)
  --memory-only           only the memory per cached object (row 4), right after creating the objects
  --related               only the rows of labels from related objects (bench/lib/related.ts)
  --workloads             only the rows of real shapes: N pods (default 1000) of Deployments on a full
                          control plane, labelled from root.*/owner.*, then a rolling restart (bench/lib/workloads.ts)
  --no-memory             skip the memory measurements
  --no-results-md         do not update bench/RESULTS.md`;

function parseCount(text: string, flag: string): number {
  const m = /^(\d+(?:\.\d+)?)(k?)$/i.exec(text.trim());
  const n = m ? Math.round(Number(m[1]) * (m[2] ? 1000 : 1)) : NaN;
  if (!Number.isInteger(n) || n < 3) throw new Error(`${flag} ${text}: expected a whole number ≥ 3, e.g. 1k, 10k, 50k`);
  return n;
}

function parsePositive(text: string, flag: string): number {
  const n = Number(text);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${flag} ${text}: expected a positive number`);
  return n;
}

interface Options extends Launch {
  readonly quick: boolean;
  readonly n: number;
  readonly idleMinutes: number;
  readonly samples: number;
  readonly concurrency: number;
  /** The kinds labelled (not for --related, which labels all three). */
  readonly kinds: readonly KindSpec[];
  readonly createConcurrency: number;
  readonly churnRate: number;
  readonly memory: boolean;
  readonly resultsMd: boolean;
  readonly related: boolean;
  readonly workloads: boolean;
  readonly coldOnly: boolean;
  readonly credentials: Credentials;
  readonly memoryOnly: boolean;
}

type Credentials = 'kubeconfig' | 'in-cluster';

function options(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      quick: { type: 'boolean', default: false },
      n: { type: 'string' },
      'idle-minutes': { type: 'string' },
      samples: { type: 'string' },
      concurrency: { type: 'string', default: '8' },
      kinds: { type: 'string', default: KINDS.map((k) => k.resource).join(',') },
      'create-concurrency': { type: 'string', default: '50' },
      'churn-rate': { type: 'string', default: '20' },
      ...LAUNCH_OPTIONS,
      'no-memory': { type: 'boolean', default: false },
      related: { type: 'boolean', default: false },
      workloads: { type: 'boolean', default: false },
      'no-results-md': { type: 'boolean', default: false },
      'cold-only': { type: 'boolean', default: false },
      credentials: { type: 'string', default: 'kubeconfig' },
      'memory-only': { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const quick = values.quick;
  const credentials = values.credentials;
  if (credentials !== 'kubeconfig' && credentials !== 'in-cluster') {
    throw new Error(`--credentials ${credentials}: expected kubeconfig or in-cluster`);
  }
  const kinds = values.kinds.split(',').map((resource) => {
    const kind = KINDS.find((k) => k.resource === resource.trim());
    if (!kind) throw new Error(`--kinds ${values.kinds}: expected some of ${KINDS.map((k) => k.resource).join(', ')}`);
    return kind;
  });
  if (values.related && kinds.length < KINDS.length) throw new Error('--related labels all three kinds; drop --kinds');
  return {
    ...launch(values),
    quick,
    kinds,
    n: values.n ? parseCount(values.n, '--n') : quick ? 300 : values.workloads ? 1000 : 10_000,
    idleMinutes: values['idle-minutes'] ? parsePositive(values['idle-minutes'], '--idle-minutes') : quick ? 0.5 : 2,
    samples: values.samples ? Math.round(parsePositive(values.samples, '--samples')) : quick ? 50 : 200,
    concurrency: Math.round(parsePositive(values.concurrency, '--concurrency')),
    createConcurrency: Math.round(parsePositive(values['create-concurrency'], '--create-concurrency')),
    churnRate: parsePositive(values['churn-rate'], '--churn-rate'),
    memory: !values['no-memory'],
    resultsMd: !values['no-results-md'],
    related: values.related,
    workloads: values.workloads,
    coldOnly: values['cold-only'],
    credentials,
    memoryOnly: values['memory-only'],
  };
}

// ---------------------------------------------------------------- helpers

/**
 * What labeller sees in a pod: the control plane's token and CA as a service-account folder at
 * the kubelet's mount point (for labeller's process only) and KUBERNETES_SERVICE_*, no kubeconfig.
 */
function podCredentials(kubeconfig: string, namespace: string): PodLaunch {
  const config = JSON.parse(readFileSync(kubeconfig, 'utf8')) as {
    clusters: { cluster: { server: string; 'certificate-authority-data': string } }[];
    users: { user: { token: string } }[];
  };
  const cluster = config.clusters[0]!.cluster;
  const dir = mkdtempSync(join(tmpdir(), 'labeller-bench-serviceaccount-'));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'token'), config.users[0]!.user.token);
  writeFileSync(join(dir, 'ca.crt'), Buffer.from(cluster['certificate-authority-data'], 'base64'));
  writeFileSync(join(dir, 'namespace'), namespace);
  const server = new URL(cluster.server);
  return {
    kubeconfig: '',
    wrapper: inClusterWrapper(dir),
    env: { KUBERNETES_SERVICE_HOST: server.hostname, KUBERNETES_SERVICE_PORT: server.port, KUBECONFIG: '', HOME: dir },
  };
}

const LABELS = { 'bench.example.com/team': 'platform', 'bench.example.com/tier': 'gold' } as const;
const TEAM = 'bench.example.com/team';
const FIELD_MANAGER = 'labeller';

const children = new Set<Child>();
const load1 = (): number => loadavg()[0] ?? 0;
const log = (message: string): void => {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
};

function labellerArgs(
  kubeconfig: string | undefined,
  namespace: string,
  kinds: readonly KindSpec[],
  concurrency: number,
): string[] {
  return [
    ...(kubeconfig === undefined ? [] : ['--kubeconfig', kubeconfig]),
    '--kinds',
    kinds.map((k) => k.resource).join(','),
    ...Object.entries(LABELS).flatMap(([k, v]) => ['--label', `${k}=${v}`]),
    '--namespace',
    namespace,
    '--concurrency',
    String(concurrency),
    '--field-manager',
    FIELD_MANAGER,
    '--grace-period',
    '10s',
  ];
}

async function countLabelled(api: MetadataApi, selector: string): Promise<number> {
  let total = 0;
  let next: string | undefined;
  do {
    const page = await api.list({ labelSelector: selector, limit: 500, continue: next });
    total += page.items.length;
    next = page.metadata.continue;
  } while (next);
  return total;
}

function git(args: string[]): string {
  try {
    return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return '';
  }
}

function etcdVersion(): string {
  try {
    const out = execFileSync(join(binaries(), 'etcd'), ['--version'], { encoding: 'utf8' });
    return `v${/etcd Version: (\S+)/.exec(out)?.[1] ?? '?'}`;
  } catch {
    return 'unknown';
  }
}

async function runMemory(request: MemoryRequest, runtime: Runtime): Promise<MemoryResult> {
  // Bytecode flushed and compiled again between the readings would count as cache (see memory.ts).
  const [bin, args] = tsCommand(runtime, 'bench/memory.ts', ['--expose-gc', '--no-flush-bytecode']);
  const child = start(bin, [...args, JSON.stringify(request)]);
  children.add(child);
  const exit = await child.exited;
  children.delete(child);
  if (exit.code !== 0) {
    throw new Error(`memory probe (${request.mode}) exited with ${describeExit(exit)}\n${exit.stderr.slice(-4000)}`);
  }
  return JSON.parse(exit.stdout.trim().split('\n').at(-1) ?? '') as MemoryResult;
}

/** Row 4: memory per cached object of each cache, each in a probe process of its own (bench/memory.ts). */
async function measureMemory(
  admin: KubeClient,
  kubeconfig: string,
  namespace: string,
  opts: Options,
  results: Results,
): Promise<void> {
  results.memory = {};
  const emptyNamespace = `${namespace}-empty`;
  await admin.json('POST', '/api/v1/namespaces', {
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: emptyNamespace } }),
  });
  for (const mode of ['pruned', 'full', 'informer'] as const) {
    log(`memory: ${mode}`);
    const measured = await runMemory({
      mode,
      kubeconfig,
      namespace,
      emptyNamespace,
      kinds: opts.kinds.map((k) => k.resource),
      labels: LABELS,
      fieldManager: FIELD_MANAGER,
      concurrency: opts.concurrency,
    }, opts.runtime);
    if (measured.objects < opts.n) {
      throw new Error(`memory probe (${mode}) cached ${measured.objects} objects, expected at least ${opts.n}`);
    }
    results.memory[mode] = { ...measured, load: load1() };
    log(
      `memory ${mode}: ${measured.objects} objects, heap ${bytes(measured.heapPerObject)}/object (rounds: ${
        measured.heapPerObjectRounds.map((b) => b.toFixed(0)).join(', ')
      }), RSS ${bytes(measured.rssPerObject)}/object`,
    );
  }
}

// ---------------------------------------------------------------- the bench

type LatencySummary = LatencySamples & { readonly p50: number | undefined; readonly p99: number | undefined };

interface Results {
  meta: Record<string, unknown>;
  options: Options;
  setup?: { namespace: string; objects: Record<string, number>; seconds: number; load: number };
  cold?: {
    seconds: number;
    confirmedSeconds: number;
    /** Process start → its first API request: runtime and module loading. */
    firstRequestSeconds: number | undefined;
    /** Process start → the last kind's "initial list complete". */
    listedSeconds: number | undefined;
    firstPatchSeconds: number | undefined;
    patchingSeconds: number | undefined;
    requests: Record<string, number>;
    patches: number;
    /** Answers that were not 2xx, as `verb resource code` with a count (the guard's first Lease read is a 404). */
    failedRequests: Record<string, number>;
    labelled: number;
    logWarnings: number;
    logErrors: number;
    exitCode: number | null;
    /** labeller's user + system CPU from start to the last PATCH (/proc/<pid>/stat). */
    cpuSeconds: number | undefined;
    /** The same from the first PATCH to the last. */
    patchingCpuSeconds: number | undefined;
    /** Of the CPU until convergence was confirmed, the kernel's (stime). */
    systemSeconds: number | undefined;
    /** VmHWM when convergence was confirmed, and VmRSS then. */
    peakRss: number;
    rssAtEnd: number | undefined;
    load: number;
  };
  loop?: { seconds: number; cpuSeconds: number; patches: number; concurrency: number; load: number };
  restart?: {
    readySeconds: number;
    settleSeconds: number;
    requests: Record<string, number>;
    patches: number;
    load: number;
  };
  idle?: { minutes: number; requests: Record<string, number>; perMinute: number; relists: number; load: number };
  latency?: {
    idle: LatencySummary & { load: number };
    churn: LatencySummary & { rate: number; churnErrors: number; load: number };
    watchErrors: number;
    restartExitCode: number | null;
    logWarnings: number;
    logErrors: number;
  };
  memory?: Partial<Record<MemoryMode, MemoryResult & { load: number }>>;
  related?: RelatedResults & { load: number };
  workloads?: WorkloadsResults & { load: number };
  error?: string;
}

async function bench(cp: ControlPlane, opts: Options, results: Results, signal: AbortSignal): Promise<void> {
  const admin = await KubeClient.load({ kubeconfig: cp.kubeconfig, userAgent: 'labeller-bench' });
  try {
    const version = await admin.json<{ gitVersion: string }>('GET', '/version');
    results.meta['kubeApiserver'] = version.gitVersion;
    const audit = new AuditRequests(cp.auditLog, 'labeller/');
    const { resources } = await discover(admin);
    const resourceOf = new Map<KindSpec, ApiResource>(
      opts.kinds.map((k) => [k, resolveResource(k.resource, resources)]),
    );
    if (opts.workloads) {
      results.workloads = { ...(await benchWorkloads(admin, cp, audit, opts, signal, log)), load: load1() };
      return;
    }
    if (opts.related) {
      results.related = {
        ...(await benchRelated(admin, cp, audit, resourceOf, opts, signal, log)),
        load: load1(),
      };
      return;
    }

    // -------- setup
    const namespace = `labeller-bench-${Date.now().toString(36)}`;
    await admin.json('POST', '/api/v1/namespaces', {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } }),
    });
    const perKind = split(opts.n, opts.kinds);
    log(
      `creating ${opts.n} objects in ${namespace} (${
        [...perKind].map(([k, n]) => `${n} ${k.resource}`).join(', ')
      }), ${opts.createConcurrency} in flight`,
    );
    let started = performance.now();
    const objects = await createObjects(admin, namespace, opts.n, opts.createConcurrency, signal, opts.kinds);
    results.setup = {
      namespace,
      objects: Object.fromEntries([...perKind].map(([k, n]) => [k.resource, n])),
      seconds: (performance.now() - started) / 1000,
      load: load1(),
    };
    log(`created in ${seconds(results.setup.seconds)}`);
    const apis = new Map<KindSpec, MetadataApi>(
      [...resourceOf].map(([k, r]) => [k, new MetadataApi(admin, r, namespace)]),
    );
    if (opts.memoryOnly) {
      await measureMemory(admin, cp.kubeconfig, namespace, opts, results);
      return;
    }
    const pod = opts.credentials === 'in-cluster' ? podCredentials(cp.kubeconfig, namespace) : undefined;
    const args = labellerArgs(pod ? undefined : cp.kubeconfig, namespace, opts.kinds, opts.concurrency);

    // -------- 1. cold convergence
    log(`cold convergence: starting labeller on ${opts.runtime}`);
    const cold = startLabeller(opts, args, pod);
    // Memory and CPU as the kernel sees them, sampled from outside until labeller is stopped.
    const proc = new ProcSampler(cold.pid);
    await converged(cold, [...apis.values()], `${TEAM}!=${LABELS[TEAM]}`, opts.n, 120_000 + opts.n * 30, signal)
      .catch((error: unknown) => {
        throw new Error(`cold convergence: ${error instanceof Error ? error.message : String(error)}`);
      });
    const confirmedAt = Date.now();
    const coldRequests = audit.requests(cold.startedAt, confirmedAt);
    const patches = coldRequests.filter((r) => r.verb === 'patch' && r.code !== undefined && r.code < 300);
    const lastPatch = patches.reduce((t, r) => Math.max(t, r.completed ?? r.received), 0);
    const firstPatch = patches.reduce((t, r) => Math.min(t, r.received), Number.POSITIVE_INFINITY);
    const labelled = (await Promise.all([...apis.values()].map((api) => countLabelled(api, `${TEAM}=${LABELS[TEAM]}`))))
      .reduce((a, b) => a + b, 0);
    if (labelled !== opts.n) {
      throw new Error(`cold convergence: ${labelled} of ${opts.n} objects carry ${TEAM}=${LABELS[TEAM]}`);
    }
    const atEnd = proc.sample();
    proc.stop();
    const coldExit = await cold.stop('SIGTERM', 15_000);
    const listed = cold.logs.filter((l) => l.msg === 'initial list complete').map((l) => Date.parse(l.time));
    const convergedAt = patches.length ? lastPatch : confirmedAt;
    const cpuAtConverged = proc.cpuAt(convergedAt);
    const cpuAtFirstPatch = patches.length ? proc.cpuAt(firstPatch) : undefined;
    results.cold = {
      seconds: (convergedAt - cold.startedAt) / 1000,
      confirmedSeconds: (confirmedAt - cold.startedAt) / 1000,
      firstRequestSeconds: coldRequests.length
        ? (coldRequests.reduce((t, r) => Math.min(t, r.received), Number.POSITIVE_INFINITY) - cold.startedAt) / 1000
        : undefined,
      listedSeconds: listed.length === opts.kinds.length ? (Math.max(...listed) - cold.startedAt) / 1000 : undefined,
      firstPatchSeconds: patches.length ? (firstPatch - cold.startedAt) / 1000 : undefined,
      patchingSeconds: patches.length ? (lastPatch - firstPatch) / 1000 : undefined,
      requests: byVerb(coldRequests),
      patches: patches.length,
      failedRequests: countBy(
        coldRequests.filter((r) => r.code !== undefined && r.code >= 300),
        (r) => `${r.verb} ${r.resource} ${r.code}`,
      ),
      labelled,
      logWarnings: cold.counts.warn,
      logErrors: cold.counts.error,
      exitCode: coldExit.code,
      cpuSeconds: cpuAtConverged,
      patchingCpuSeconds: cpuAtConverged !== undefined && cpuAtFirstPatch !== undefined
        ? cpuAtConverged - cpuAtFirstPatch
        : undefined,
      systemSeconds: atEnd?.systemSeconds,
      peakRss: proc.peakRss,
      rssAtEnd: atEnd?.rss,
      load: load1(),
    };
    log(
      `converged in ${seconds(results.cold.seconds)} (${formatVerbs(results.cold.requests)}), CPU ${
        cpuAtConverged?.toFixed(2) ?? '?'
      } s, peak RSS ${mib(proc.peakRss)}`,
    );
    if (coldExit.code !== 0) {
      throw new Error(
        `labeller exited with ${describeExit(coldExit)} on SIGTERM after cold convergence\n${cold.stderr}`,
      );
    }

    // -------- 2. the server's limit: the same patches from a tight loop, same concurrency
    const loopConcurrency = opts.concurrency * opts.kinds.length;
    log(`tight loop: ${opts.n} server-side apply patches, ${loopConcurrency} in flight`);
    const loopClient = await KubeClient.load({ kubeconfig: cp.kubeconfig, userAgent: 'labeller-bench-loop' });
    try {
      const clients = new Map(
        [...resourceOf].map(([k, r]) => [k, labelClient(new MetadataApi(loopClient, r, namespace), 'bench-loop')]),
      );
      // Other keys than labeller's, with a value no object carries yet: every patch is a real write.
      const value = `v${Date.now().toString(36)}`;
      const loopLabels = Object.fromEntries(Object.keys(LABELS).map((k) => [`${k}-loop`, value]));
      started = performance.now();
      const cpuBefore = process.cpuUsage();
      await pool(objects, loopConcurrency, async (o: BenchObject) => {
        await clients.get(o.kind)!.applyLabels(
          { apiVersion: o.kind.apiVersion, kind: o.kind.kind, name: o.name, namespace, uid: o.uid },
          loopLabels,
          { force: true, dryRun: false },
        );
      }, signal);
      const cpu = process.cpuUsage(cpuBefore);
      results.loop = {
        seconds: (performance.now() - started) / 1000,
        cpuSeconds: (cpu.user + cpu.system) / 1e6,
        patches: objects.length,
        concurrency: loopConcurrency,
        load: load1(),
      };
    } finally {
      await loopClient.close();
    }
    log(
      `tight loop: ${seconds(results.loop.seconds)}; ratio ${
        (results.cold.seconds / results.loop.seconds).toFixed(2)
      }×`,
    );

    if (opts.coldOnly) return;

    // -------- 3. restart over the labelled cluster
    log('restart over the labelled cluster');
    const second = startLabeller(opts, args, pod);
    const ready = await Promise.all(
      opts.kinds.map((k) =>
        second.waitForLog((l) => l.msg === 'initial list complete' && l.kind === k.kind, 120_000 + opts.n * 5)
      ),
    );
    const readyAt = Math.max(...ready.map((l) => Date.parse(l.time)));
    // Every object is reconciled from the cache right after the list; let that happen, then count.
    const settleMs = 3000 + opts.n / 5;
    await sleep(settleMs, signal);
    second.assertRunning();
    const restartRequests = audit.requests(second.startedAt, Date.now());
    results.restart = {
      readySeconds: (readyAt - second.startedAt) / 1000,
      settleSeconds: settleMs / 1000,
      requests: byVerb(restartRequests),
      patches: restartRequests.filter((r) => r.verb === 'patch').length,
      load: load1(),
    };
    log(`ready in ${seconds(results.restart.readySeconds)}, ${results.restart.patches} PATCH`);

    // -------- 6. idle cost (before the latency phase changes anything)
    log(`idle: watching labeller's requests for ${opts.idleMinutes} min`);
    const idleFrom = Date.now();
    const idleUntil = idleFrom + opts.idleMinutes * 60_000;
    while (Date.now() < idleUntil) {
      await sleep(Math.min(5000, idleUntil - Date.now()), signal);
      second.assertRunning();
    }
    const idleRequests: AuditRequest[] = audit.requests(idleFrom, idleUntil);
    results.idle = {
      minutes: opts.idleMinutes,
      requests: byVerb(idleRequests),
      perMinute: idleRequests.length / opts.idleMinutes,
      relists: idleRequests.filter((r) => r.verb === 'list').length,
      load: load1(),
    };
    log(`idle: ${formatVerbs(results.idle.requests)}`);

    // -------- 5. relabel latency, idle and under churn
    log(`relabel latency: ${opts.samples} samples idle, ${opts.samples} under churn (${opts.churnRate} writes/s)`);
    const watch = new LabelWatch(admin, resourceOf, namespace);
    await watch.start();
    const label = { key: TEAM, value: LABELS[TEAM] };
    const summarize = (s: LatencySamples): LatencySummary => {
      const all = [...s.latenciesMs, ...Array.from({ length: s.timeouts }, () => Number.POSITIVE_INFINITY)];
      return { ...s, p50: percentile(all, 50), p99: percentile(all, 99) };
    };
    const idleLatency = {
      ...summarize(await measureRelabel(admin, watch, namespace, objects, label, opts.samples, 0, signal)),
      load: load1(),
    };
    const churnClient = await KubeClient.load({ kubeconfig: cp.kubeconfig, userAgent: 'labeller-bench-churn' });
    const churn = new Churn(churnClient, namespace, opts.churnRate);
    let churnLatency;
    try {
      churn.start();
      await sleep(1000, signal);
      churnLatency = summarize(
        await measureRelabel(admin, watch, namespace, objects, label, opts.samples, opts.samples, signal),
      );
    } finally {
      await churn.stop();
      await churnClient.close();
      await watch.stop();
    }
    const restartExit = await second.stop('SIGTERM', 15_000);
    results.latency = {
      idle: idleLatency,
      churn: { ...churnLatency, rate: churn.achievedRate, churnErrors: churn.errors, load: load1() },
      watchErrors: watch.errors,
      restartExitCode: restartExit.code,
      logWarnings: second.counts.warn,
      logErrors: second.counts.error,
    };
    log(
      `relabel p50/p99: idle ${ms(idleLatency.p50)}/${ms(idleLatency.p99)}, churn ${ms(churnLatency.p50)}/${
        ms(churnLatency.p99)
      }`,
    );
    if (restartExit.code !== 0) {
      throw new Error(`labeller exited with ${describeExit(restartExit)} on SIGTERM\n${second.stderr}`);
    }
    if (idleLatency.latenciesMs.length === 0 && churnLatency.latenciesMs.length === 0) {
      throw new Error('relabel latency: no sample completed (labeller never restored the label)');
    }

    // -------- 4. memory per cached object
    if (opts.memory) await measureMemory(admin, cp.kubeconfig, namespace, opts, results);
  } finally {
    await admin.close();
  }
}

// ---------------------------------------------------------------- the table

function verdict(ok: boolean): Verdict {
  return ok ? 'pass' : 'miss';
}

const at = (s: number | undefined): string => (s === undefined ? 'n/a' : seconds(s));

function rows(r: Results): Row[] {
  const out: Row[] = [];
  const n = r.options.n;
  const { cold, loop, restart, idle, latency, memory, related, workloads } = r;
  if (related) out.push(...relatedRows(related, related.load));
  if (workloads) out.push(...workloadRows(workloads, workloads.load));
  if (cold) {
    out.push({
      id: '1',
      measurement: `Cold convergence: process start → all ${n} objects labelled`,
      result: `${seconds(cold.seconds)} (${Math.round(n / cold.seconds)} objects/s); first request at ${
        at(cold.firstRequestSeconds)
      }, lists done at ${at(cold.listedSeconds)}, first patch at ${at(cold.firstPatchSeconds)}, patching took ${
        at(cold.patchingSeconds)
      } (${cold.patchingSeconds ? Math.round(cold.patches / cold.patchingSeconds) : 'n/a'} patches/s)`,
      target: '',
      verdict: '',
      load: cold.load,
    });
    const perObject = (
      cpu: number | undefined,
    ): string => (cpu === undefined ? 'n/a' : `${((cpu * 1000) / n).toFixed(2)} ms`);
    out.push({
      id: '1',
      measurement: 'CPU per object during cold convergence (utime + stime, /proc/<pid>/stat)',
      result: `${perObject(cold.cpuSeconds)} (${
        cold.cpuSeconds?.toFixed(2) ?? 'n/a'
      } s from start to the last PATCH); ${perObject(cold.patchingCpuSeconds)} while patching; ${
        cold.systemSeconds?.toFixed(2) ?? 'n/a'
      } s of all CPU in the kernel`,
      target: '≤ 0.5 ms',
      verdict: cold.cpuSeconds === undefined ? 'incomplete' : verdict((cold.cpuSeconds * 1000) / n <= 0.5),
      load: cold.load,
    });
    out.push({
      id: '1',
      measurement: `Peak RSS converging ${n} objects (VmHWM)`,
      result: `${mib(cold.peakRss)} (RSS ${cold.rssAtEnd === undefined ? 'n/a' : mib(cold.rssAtEnd)} when converged)`,
      target: n >= 50_000 ? '≤ 160 MiB at 50k' : '≤ 96 MiB at 10k, in-cluster credentials',
      verdict: verdict(cold.peakRss <= (n >= 50_000 ? 160 : 96) * 2 ** 20),
      verdictNote: `(${r.options.credentials} credentials${n === 10_000 || n === 50_000 ? '' : `, at N = ${n}`})`,
      load: cold.load,
    });
    out.push({
      id: '1',
      measurement: 'Requests during convergence, by verb (audit log)',
      result: `${formatVerbs(cold.requests)} (${(cold.patches / n).toFixed(2)} PATCH/object${
        Object.keys(cold.failedRequests).length
          ? `; not 2xx: ${Object.entries(cold.failedRequests).map(([what, count]) => `${count} × ${what}`).join(', ')}`
          : ''
      })`,
      target: '',
      verdict: '',
      load: cold.load,
    });
  }
  if (loop) {
    out.push({
      id: '2',
      measurement:
        `Tight loop: ${loop.patches} server-side apply patches, ${loop.concurrency} in flight, same KubeClient`,
      // The CPU of this process for the loop: what one apply costs on this runtime, before any
      // watch event, cache or reconcile; the floor under labeller's CPU per object.
      result: `${seconds(loop.seconds)} (${Math.round(loop.patches / loop.seconds)} patches/s); CPU ${
        (loop.cpuSeconds * 1000 / loop.patches).toFixed(2)
      } ms per PATCH`,
      target: '',
      verdict: '',
      load: loop.load,
    });
  }
  if (cold && loop) {
    const ratio = cold.seconds / loop.seconds;
    out.push({
      id: '1/2',
      measurement: 'Convergence ÷ tight loop',
      result: `${ratio.toFixed(2)}×`,
      target: '≤ 1.1× at N = 10k',
      verdict: verdict(ratio <= 1.1),
      ...(n !== 10_000 ? { verdictNote: `(at N = ${n})` } : {}),
      load: loop.load,
    });
  }
  if (restart) {
    out.push({
      id: '3',
      measurement: 'Restart over the labelled cluster: process start → every kind listed',
      result: seconds(restart.readySeconds),
      target: '',
      verdict: '',
      load: restart.load,
    });
    out.push({
      id: '3',
      measurement: `Restart: PATCH requests (counted ${restart.settleSeconds.toFixed(0)} s after ready)`,
      result: `${restart.patches} (all requests: ${formatVerbs(restart.requests)})`,
      target: '0',
      verdict: verdict(restart.patches === 0),
      load: restart.load,
    });
  }
  if (memory) {
    const m = (mode: MemoryMode, what: string, target: string, check?: (heap: number) => boolean): void => {
      const x = memory[mode];
      if (!x) return;
      out.push({
        id: '4',
        measurement: `${what} (${x.objects} objects)`,
        result: `heap ${bytes(x.heapPerObject)}/object (median of ${x.heapPerObjectRounds.length} rounds: ${
          x.heapPerObjectRounds.map((b) => b.toFixed(0)).join(', ')
        } B), RSS ${bytes(x.rssPerObject)}/object`,
        target,
        verdict: check ? verdict(check(x.heapPerObject)) : '',
        load: x.load,
      });
    };
    m(
      'pruned',
      'Memory, labeller’s cache (managedFields pruned)',
      'heap ≤ 512 B/object at 10k and 50k',
      (heap) => heap <= 512,
    );
    m('full', 'Memory, pruning off (full PartialObjectMetadata cached)', '');
    m('informer', 'Memory, @kubernetes/client-node informer (full objects)', '');
  }
  if (latency) {
    const l = (s: LatencySummary, what: string, target: string, withVerdict: boolean, load: number): void => {
      out.push({
        id: '5',
        measurement: what,
        result: `p50 ${ms(s.p50)}, p99 ${ms(s.p99)} (${s.samples} samples${
          s.timeouts ? `, ${s.timeouts} timed out` : ''
        })`,
        target,
        verdict: withVerdict ? verdict(s.p99 !== undefined && s.p99 <= 100) : '',
        load,
      });
    };
    l(
      latency.idle,
      'Relabel latency, otherwise idle API server: label removed → restored',
      'p99 ≤ 100 ms',
      true,
      latency.idle.load,
    );
    l(
      latency.churn,
      `Relabel latency under churn (${latency.churn.rate.toFixed(0)} writes/s of other objects)`,
      '',
      false,
      latency.churn.load,
    );
  }
  if (idle) {
    out.push({
      id: '6',
      measurement: `Idle: labeller’s requests per minute (over ${idle.minutes} min)`,
      result: `${idle.perMinute.toFixed(2)} (${formatVerbs(idle.requests)})`,
      target: '',
      verdict: '',
      load: idle.load,
    });
    out.push({
      id: '6',
      measurement: 'Idle: relists (list requests after the initial ones)',
      result: `${idle.relists} in ${idle.minutes} min`,
      target: '0 in 10 idle min',
      verdict: idle.relists > 0 ? 'miss' : idle.minutes >= 10 ? 'pass' : 'incomplete',
      ...(idle.relists === 0 && idle.minutes < 10
        ? { verdictNote: `(${idle.minutes} of 10 min observed; --idle-minutes 10)` }
        : {}),
      load: idle.load,
    });
  }
  return out;
}

function describeRun(r: Results): string {
  const m = r.meta;
  const o = r.options;
  const lines = [
    `## N = ${o.n}${o.quick ? ' (--quick)' : ''}${
      o.related ? ', labels from related objects (--related)' : o.workloads ? ', real shapes (--workloads)' : ''
    }, labeller on ${o.runtime === 'node' ? 'Node' : 'Deno'}${o.build === undefined ? '' : `, from ${o.build}/`}`,
    '',
    `- run: ${String(m['startedAt'])}, ${seconds(Number(m['durationSeconds'] ?? 0))} in all; \`${
      String(m['command'])
    }\``,
    `- labeller ${String(m['labellerVersion'])} (git ${String(m['git'])}), labeller and memory probes on ${
      String(m['labellerRuntime'])
    }; bench on ${String(m['benchRuntime'])}`,
    `- kube-apiserver ${String(m['kubeApiserver'] ?? '?')}, etcd ${
      String(m['etcd'])
    } (test/controlplane, loopback, audit log on; every client is system:masters, so API Priority and Fairness exempts them all)`,
    `- machine: ${String(m['cpu'])}, ${String(m['cores'])} cores, ${String(m['memoryGiB'])} GiB, Linux ${
      String(m['kernel'])
    }`,
    `- load average (1/5/15 min): ${String(m['loadAtStart'])} at start, ${
      String(m['loadAtEnd'] ?? '?')
    } at end; other work shares the machine, so figures are noisy`,
    r.workloads
      ? `- objects: ${r.workloads.pods} pods of ${r.workloads.deployments} Deployments (kube-controller-manager, kube-scheduler, kwok); labels \`{{root.kind}}.{{root.name}}\` on pods and ReplicaSets, \`{{owner.name}}\` on pods`
      : r.related
      ? `- objects: ${o.n} ConfigMaps, Services and Deployments in one namespace, with the same metadata as the main bench; one label, \`{{namespace.labels.team}}\``
      : `- objects: ${
        Object.entries(r.setup?.objects ?? {}).map(([k, v]) => `${v} ${k}`).join(', ')
      }, each with 6 labels, 4 annotations and managedFields of \`kubectl-create\` (Update) and \`argocd-controller\` (Apply); created in ${
        r.setup ? seconds(r.setup.seconds) : '?'
      }`,
    `- labeller run from ${o.build === undefined ? `the sources (\`${o.entry}\`)` : `the build (\`${o.entry}\`)`}${
      o.v8Flags.length ? ` with V8 flags \`${o.v8Flags.join(' ')}\`` : ''
    }${
      Object.keys(o.env).length
        ? `, environment \`${Object.entries(o.env).map(([k, v]) => `${k}=${v}`).join(' ')}\``
        : ''
    }; ${
      o.credentials === 'in-cluster'
        ? "in-cluster credentials (a service-account folder at the kubelet's mount point, in a private mount namespace)"
        : 'kubeconfig credentials (bearer token)'
    }`,
    `- labeller \`--concurrency ${o.concurrency}\` per kind (${
      o.concurrency * o.kinds.length
    } in all; the tight loop uses the same), ${
      o.related ? 'one label' : '2 labels'
    }; convergence ends at the last labeller PATCH in the audit log, confirmed by a metadata-only list`,
    '',
    table(rows(r)),
  ];
  const notes: string[] = [];
  if (r.cold && (r.cold.logErrors || r.cold.logWarnings)) {
    notes.push(`cold run logged ${r.cold.logErrors} errors and ${r.cold.logWarnings} warnings`);
  }
  if (r.latency && (r.latency.logErrors || r.latency.logWarnings)) {
    notes.push(`restarted run logged ${r.latency.logErrors} errors and ${r.latency.logWarnings} warnings`);
  }
  if (r.latency?.churn.churnErrors) notes.push(`${r.latency.churn.churnErrors} churn writes failed`);
  if (r.error) notes.push(`**the run failed**: ${r.error.split('\n')[0]}`);
  if (notes.length) lines.push('', ...notes.map((n) => `- ${n}`));
  return lines.join('\n');
}

// ---------------------------------------------------------------- main

const opts = (() => {
  try {
    return options(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`bench: ${error instanceof Error ? error.message : String(error)}\n${USAGE}\n`);
    process.exit(2);
  }
})();

const abort = new AbortController();
let controlPlane: Promise<ControlPlane> | undefined;
let finishing = false;

async function teardown(): Promise<void> {
  await Promise.all([...runningLabellers].map((l) => l.stop('SIGTERM', 5000)));
  for (const child of children) child.kill('SIGKILL');
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
const results: Results = {
  meta: {
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
    loadAtStart: loadavg().map((x) => x.toFixed(2)).join(' / '),
  },
  options: opts,
};

let status = 0;
try {
  log(`starting the control plane (N = ${opts.n}, labeller on ${opts.runtime})`);
  controlPlane = startControlPlane(abort.signal, opts.workloads ? workloadsControlPlane(opts.n) : {});
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

results.meta['durationSeconds'] = (Date.now() - startedAt.getTime()) / 1000;
results.meta['loadAtEnd'] = loadavg().map((x) => x.toFixed(2)).join(' / ');
const section = describeRun(results);
process.stdout.write(`\n${section}\n\n`);
const name = startedAt.toISOString().replace(/[:.]/g, '-');
const jsonPath = writeJson('bench/results', name, { ...results, rows: rows(results) });
log(`wrote ${jsonPath}`);
// A --cold-only or --memory-only run is for iterating: it leaves the full runs' sections alone.
if (status === 0 && opts.resultsMd && !opts.coldOnly && !opts.memoryOnly) {
  updateResultsFile(
    'bench/RESULTS.md',
    `n=${opts.n} runtime=${opts.runtime}${opts.build === undefined ? '' : ` build=${opts.build}`}${
      opts.related ? ' related' : ''
    }${opts.workloads ? ' workloads' : ''}`,
    section,
  );
  log('updated bench/RESULTS.md');
}
process.exit(status);
