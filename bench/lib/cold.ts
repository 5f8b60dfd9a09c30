// Row 1, cold convergence: labeller started over N unlabelled objects, timed from its spawn to its
// last PATCH in the audit log (confirmed by metadata-only lists), with the requests it took by verb,
// and its CPU and peak RSS read from /proc as a container runtime sees them.
import type { MetadataApi } from '../../src/kube/api.ts';
import { byVerb, countBy, formatVerbs } from '../../test/cluster/audit.ts';
import { describeExit } from '../../test/process/child.ts';
import { ProcSampler } from '../../test/process/procstat.ts';
import type { Bench } from './context.ts';
import { converged } from './converged.ts';
import { LABELS, type Launch, type PodLaunch, startLabeller, TEAM } from './launch.ts';
import type { Credentials } from './options.ts';
import { load1, mib, type Row, seconds, verdict } from './report.ts';
import type { Setup } from './setup.ts';

export interface ColdResults {
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
}

/** Objects of `api` matching `selector`, counted over pages of 500. */
export async function countMatching(api: MetadataApi, selector: string): Promise<number> {
  let total = 0;
  let next: string | undefined;
  do {
    const page = await api.list({ labelSelector: selector, limit: 500, continue: next });
    total += page.items.length;
    next = page.metadata.continue;
  } while (next);
  return total;
}

/** Starts labeller with `args` over `setup`'s objects and measures it until all carry LABELS, then stops it. */
export async function coldConvergence(
  bench: Bench,
  launch: Launch,
  setup: Setup,
  args: readonly string[],
  pod: PodLaunch | undefined,
): Promise<ColdResults> {
  const { audit, signal, log } = bench;
  const n = setup.objects.length;
  const apis = [...setup.apis.values()];
  log(`cold convergence: starting labeller on ${launch.runtime}`);
  const cold = startLabeller(launch, args, pod);
  // Memory and CPU as the kernel sees them, sampled from outside until labeller is stopped.
  const proc = new ProcSampler(cold.pid);
  await converged(cold, apis, `${TEAM}!=${LABELS[TEAM]}`, n, 120_000 + n * 30, signal)
    .catch((error: unknown) => {
      throw new Error(`cold convergence: ${error instanceof Error ? error.message : String(error)}`);
    });
  const confirmedAt = Date.now();
  const coldRequests = audit.requests(cold.startedAt, confirmedAt);
  const patches = coldRequests.filter((r) => r.verb === 'patch' && r.code !== undefined && r.code < 300);
  const lastPatch = patches.reduce((t, r) => Math.max(t, r.completed ?? r.received), 0);
  const firstPatch = patches.reduce((t, r) => Math.min(t, r.received), Number.POSITIVE_INFINITY);
  const labelled = (await Promise.all(apis.map((api) => countMatching(api, `${TEAM}=${LABELS[TEAM]}`))))
    .reduce((a, b) => a + b, 0);
  if (labelled !== n) {
    throw new Error(`cold convergence: ${labelled} of ${n} objects carry ${TEAM}=${LABELS[TEAM]}`);
  }
  const atEnd = proc.sample();
  proc.stop();
  const coldExit = await cold.stop('SIGTERM', 15_000);
  const listed = cold.logs.filter((l) => l.msg === 'initial list complete').map((l) => Date.parse(l.time));
  const convergedAt = patches.length ? lastPatch : confirmedAt;
  const cpuAtConverged = proc.cpuAt(convergedAt);
  const cpuAtFirstPatch = patches.length ? proc.cpuAt(firstPatch) : undefined;
  const results: ColdResults = {
    seconds: (convergedAt - cold.startedAt) / 1000,
    confirmedSeconds: (confirmedAt - cold.startedAt) / 1000,
    firstRequestSeconds: coldRequests.length
      ? (coldRequests.reduce((t, r) => Math.min(t, r.received), Number.POSITIVE_INFINITY) - cold.startedAt) / 1000
      : undefined,
    listedSeconds: listed.length === setup.apis.size ? (Math.max(...listed) - cold.startedAt) / 1000 : undefined,
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
    `converged in ${seconds(results.seconds)} (${formatVerbs(results.requests)}), CPU ${
      cpuAtConverged?.toFixed(2) ?? '?'
    } s, peak RSS ${mib(proc.peakRss)}`,
  );
  if (coldExit.code !== 0) {
    throw new Error(
      `labeller exited with ${describeExit(coldExit)} on SIGTERM after cold convergence\n${cold.stderr}`,
    );
  }
  return results;
}

const at = (s: number | undefined): string => (s === undefined ? 'n/a' : seconds(s));

export function coldRows(cold: ColdResults, n: number, credentials: Credentials): Row[] {
  const perObject = (
    cpu: number | undefined,
  ): string => (cpu === undefined ? 'n/a' : `${((cpu * 1000) / n).toFixed(2)} ms`);
  return [
    {
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
    },
    {
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
    },
    {
      id: '1',
      measurement: `Peak RSS converging ${n} objects (VmHWM)`,
      result: `${mib(cold.peakRss)} (RSS ${cold.rssAtEnd === undefined ? 'n/a' : mib(cold.rssAtEnd)} when converged)`,
      target: n >= 50_000 ? '≤ 160 MiB at 50k' : '≤ 96 MiB at 10k, in-cluster credentials',
      verdict: verdict(cold.peakRss <= (n >= 50_000 ? 160 : 96) * 2 ** 20),
      verdictNote: `(${credentials} credentials${n === 10_000 || n === 50_000 ? '' : `, at N = ${n}`})`,
      load: cold.load,
    },
    {
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
    },
  ];
}
