// --lists (issue 27): labeller's first list of N objects, as a streaming list (a watch with
// `sendInitialEvents`, KUBE_FEATURE_WatchListClient=true) and as paginated lists (=false), one
// after the other over the same objects, `rounds` times. Each run ends at labeller's `initial list
// complete`, before it writes anything (its label is one every object already carries). What the
// list costs labeller (time from spawn, CPU, peak RSS, from /proc) and the API server: its CPU and
// etcd's (/proc), the bytes the API server allocated (go_memstats_alloc_bytes_total of its
// /metrics, as the Go runtime counts them), and how far its RSS grew (VmRSS sampled every 50 ms;
// Go keeps freed memory a while, so a run after another of the same size may grow it little).
import { readBody } from '../../src/kube/body.ts';
import { cpuSeconds, processesWith, procSample, ProcSampler } from '../../test/process/procstat.ts';
import { sleep } from '../../test/process/sleep.ts';
import type { Bench } from './context.ts';
import { type Launch, startLabeller } from './launch.ts';
import { load1, markdownTable, mib, seconds } from './report.ts';
import { setUp } from './setup.ts';

export type ListMode = 'streaming' | 'paginated';

export interface ListRun {
  readonly mode: ListMode;
  /** Spawn → `initial list complete`. */
  readonly seconds: number;
  readonly labellerCpuSeconds: number;
  readonly labellerPeakRss: number;
  readonly serverCpuSeconds: number;
  readonly etcdCpuSeconds: number;
  /** Bytes the API server's Go runtime allocated meanwhile. */
  readonly serverAllocated: number;
  /** Its highest VmRSS meanwhile less its VmRSS before. */
  readonly serverRssGrowth: number;
  readonly load: number;
}

export interface ListsResults {
  readonly n: number;
  readonly runs: ListRun[];
}

const MODES: readonly ListMode[] = ['streaming', 'paginated'];

/** A label every bench ConfigMap already carries (bench/lib/objects.ts), so labeller writes nothing. */
const HELD = 'app.kubernetes.io/component=config';

/** The API server's cumulative Go allocation, from its /metrics. */
async function allocated(bench: Bench): Promise<number> {
  const text = await readBody(await bench.admin.request('GET', '/metrics'));
  const value = /^go_memstats_alloc_bytes_total (\S+)$/m.exec(text)?.[1];
  if (value === undefined) throw new Error('the API server’s /metrics has no go_memstats_alloc_bytes_total');
  return Number(value);
}

/** One labeller run until its first list is complete, with everything read around it. */
async function measure(bench: Bench, launch: Launch, namespace: string, mode: ListMode): Promise<ListRun> {
  const { controlPlane, signal } = bench;
  const [apiserver] = processesWith(`--cert-dir=${controlPlane.dir}`);
  const etcd = processesWith(`--data-dir=${controlPlane.dir}`);
  if (apiserver === undefined) throw new Error('no kube-apiserver process of this control plane');
  const server = new ProcSampler(apiserver, 50);
  const [serverBefore, etcdBefore, allocatedBefore] = [
    cpuSeconds([apiserver]),
    cpuSeconds(etcd),
    await allocated(bench),
  ];
  const rssBefore = server.samples[0]?.rss ?? 0;
  const labeller = startLabeller(
    { ...launch, env: { ...launch.env, KUBE_FEATURE_WatchListClient: String(mode === 'streaming') } },
    ['--kubeconfig', controlPlane.kubeconfig, '--kinds', 'configmaps', '--label', HELD, '--namespace', namespace],
  );
  try {
    await labeller.waitForLog((line) => line.msg === 'initial list complete', 600_000);
    const listed = Date.now();
    const own = procSample(labeller.pid);
    server.sample();
    server.stop();
    const run: ListRun = {
      mode,
      seconds: (listed - labeller.startedAt) / 1000,
      labellerCpuSeconds: own?.cpuSeconds ?? NaN,
      labellerPeakRss: own?.peakRss ?? NaN,
      serverCpuSeconds: cpuSeconds([apiserver]) - serverBefore,
      etcdCpuSeconds: cpuSeconds(etcd) - etcdBefore,
      serverAllocated: (await allocated(bench)) - allocatedBefore,
      serverRssGrowth: Math.max(...server.samples.map((s) => s.rss)) - rssBefore,
      load: load1(),
    };
    return run;
  } finally {
    server.stop();
    await labeller.stop('SIGTERM', 10_000);
    await sleep(2000, signal);
  }
}

/** N ConfigMaps, then `rounds` pairs of runs, the two modes alternating which goes first. */
export async function benchLists(bench: Bench, launch: Launch, n: number, rounds: number): Promise<ListsResults> {
  const setup = await setUp(bench, n, 50, 'labeller-lists');
  await sleep(2000, bench.signal);
  const results: ListsResults = { n, runs: [] };
  for (let round = 0; round < rounds; round++) {
    for (const mode of round % 2 === 0 ? MODES : [...MODES].reverse()) {
      const run = await measure(bench, launch, setup.namespace, mode);
      bench.log(
        `lists: ${mode} in ${seconds(run.seconds)}; labeller CPU ${seconds(run.labellerCpuSeconds)}, peak ${
          mib(run.labellerPeakRss)
        }; API server CPU ${seconds(run.serverCpuSeconds)}, allocated ${mib(run.serverAllocated)}, RSS +${
          mib(run.serverRssGrowth)
        }; etcd CPU ${seconds(run.etcdCpuSeconds)}`,
      );
      results.runs.push(run);
    }
  }
  return results;
}

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length % 2
    ? sorted[(sorted.length - 1) / 2]!
    : (sorted[sorted.length / 2 - 1]! + sorted[sorted.length / 2]!) / 2;
};

/** One row per mode: the median of its runs, and every run's figure after it. */
export function listsTable(r: ListsResults): string {
  const cell = (runs: readonly ListRun[], value: (run: ListRun) => number, show: (x: number) => string): string =>
    `${show(median(runs.map(value)))} (${runs.map((run) => show(value(run))).join(', ')})`;
  return markdownTable(
    [
      'first list',
      'spawn → list complete',
      'labeller CPU',
      'labeller peak RSS',
      'API server CPU',
      'API server allocated',
      'API server RSS growth',
      'etcd CPU',
      'load (1 min)',
    ],
    MODES.map((mode) => {
      const runs = r.runs.filter((run) => run.mode === mode);
      return [
        mode === 'streaming' ? 'streaming list (watch, sendInitialEvents)' : 'paginated lists (limit 100)',
        cell(runs, (x) => x.seconds, seconds),
        cell(runs, (x) => x.labellerCpuSeconds, seconds),
        cell(runs, (x) => x.labellerPeakRss, mib),
        cell(runs, (x) => x.serverCpuSeconds, seconds),
        cell(runs, (x) => x.serverAllocated, mib),
        cell(runs, (x) => x.serverRssGrowth, mib),
        cell(runs, (x) => x.etcdCpuSeconds, seconds),
        runs.map((x) => x.load.toFixed(2)).join(', '),
      ];
    }),
  );
}
