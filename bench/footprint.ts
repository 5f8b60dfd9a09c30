// labeller's footprint outside convergence (issue 9's targets), seen from /proc as a container
// runtime sees it:
//   - `labeller --help`: wall time from spawn to exit, and peak RSS (median of --runs);
//   - the floor: the runtime itself, with the same flags and environment, running an empty timer;
//   - RSS at rest: 3 kinds watched, 0 objects, after every kind's first list and --settle seconds.
// Runs the sources (bin/labeller.js, or src/cli.ts on Deno) or the shipped build (--build dist).
// The at-rest rows start a control plane of their own (test/controlplane).
//
//   node --import tsx bench/footprint.ts [--build dist] [--runs 5] [--settle 10] [--no-cluster]
//   deno run -A bench/footprint.ts [same options]
//
// Exit status: 0 when measured (a missed target is reported, not a failure), 1 when something
// broke, 2 for bad options.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { KubeClient } from '../src/kube/client.ts';
import { type ControlPlane, startControlPlane } from '../test/controlplane/controlplane.ts';
import { start } from '../test/process/child.ts';
import { procSample, ProcSampler } from '../test/process/procstat.ts';
import { host, runtimeVersion, tsCommand } from '../test/process/runtime.ts';
import { sleep } from '../test/process/sleep.ts';
import { exitWithUsage, parseOrExit, progress } from './lib/cli.ts';
import { type Launch, launch, LAUNCH_OPTIONS, LAUNCH_USAGE, startLabeller } from './lib/launch.ts';
import { createNamespace } from '../test/cluster/cluster.ts';
import { mib, type Row, seconds, table } from './lib/report.ts';

const USAGE = `usage: bench/footprint.ts [options]
${LAUNCH_USAGE}
  --runs N                --help runs; the median is reported (default 5)
  --settle S              seconds at rest before RSS is read (default 10)
  --no-cluster            only the --help row (no control plane)`;

interface Options extends Launch {
  readonly runs: number;
  readonly settleSeconds: number;
  readonly cluster: boolean;
}

function options(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      ...LAUNCH_OPTIONS,
      runs: { type: 'string', default: '5' },
      settle: { type: 'string', default: '10' },
      'no-cluster': { type: 'boolean', default: false },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) exitWithUsage(USAGE);
  const runs = Number(values.runs);
  const settle = Number(values.settle);
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs ${values.runs}: expected a whole number ≥ 1`);
  if (!Number.isFinite(settle) || settle < 0) throw new Error(`--settle ${values.settle}: expected seconds ≥ 0`);
  return {
    ...launch(values),
    runs,
    settleSeconds: settle,
    cluster: !values['no-cluster'],
  };
}

const log = progress('footprint');

const median = (xs: readonly number[]): number => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
};

/**
 * One `labeller --help`: wall time from spawn to exit, and its peak RSS (VmHWM) read every
 * millisecond or so while it runs; the last reading before exit is within a few ms of the end.
 */
async function helpRun(opts: Options): Promise<{ seconds: number; peakRss: number }> {
  const [bin, args] = tsCommand(opts.runtime, opts.entry, opts.v8Flags);
  const started = performance.now();
  const child = start(bin, [...args, '--help']);
  let peakRss = 0;
  const poll = (): void => {
    const s = child.pid === undefined ? undefined : procSample(child.pid);
    if (s && s.peakRss > peakRss) peakRss = s.peakRss;
  };
  const timer = setInterval(poll, 1);
  const exit = await child.exited;
  const elapsed = (performance.now() - started) / 1000;
  clearInterval(timer);
  if (exit.code !== 0 || !exit.stdout.includes('--kinds')) {
    throw new Error(`labeller --help exited with status ${exit.code} (signal ${exit.signal}) and printed no usage`);
  }
  return { seconds: elapsed, peakRss };
}

/**
 * What the runtime itself holds with labeller's flags and environment: a script that only keeps a
 * timer, its RSS after `settleSeconds`. What labeller at rest holds beyond it is its own.
 */
async function floor(opts: Options): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'labeller-floor-'));
  const script = join(dir, 'idle.js');
  writeFileSync(script, 'setInterval(() => {}, 1 << 30);\n');
  const [bin, args] = tsCommand(opts.runtime, script, opts.v8Flags);
  const child = start(bin, args, { env: opts.env });
  try {
    await sleep(opts.settleSeconds * 1000);
    const s = child.pid === undefined ? undefined : procSample(child.pid);
    if (!s) throw new Error('the bare runtime: /proc gave no reading');
    return s.rss;
  } finally {
    child.kill('SIGKILL');
    await child.exited;
    rmSync(dir, { recursive: true, force: true });
  }
}

/** labeller watching 3 kinds of an empty namespace: its RSS once every first list is done and it has settled. */
async function atRest(cp: ControlPlane, opts: Options): Promise<{ rss: number; peakRss: number; cpuSeconds: number }> {
  const admin = await KubeClient.load({ kubeconfig: cp.kubeconfig, userAgent: 'labeller-footprint' });
  const namespace = `labeller-footprint-${Date.now().toString(36)}`;
  try {
    await createNamespace(admin, namespace);
  } finally {
    await admin.close();
  }
  const kinds = ['configmaps', 'services', 'deployments'];
  const labeller = startLabeller(
    opts,
    ['--kubeconfig', cp.kubeconfig, '--kinds', kinds.join(','), '--label', 'team=platform', '--namespace', namespace],
  );
  const proc = new ProcSampler(labeller.pid, 500);
  try {
    await Promise.all(
      ['ConfigMap', 'Service', 'Deployment'].map((kind) =>
        labeller.waitForLog((l) => l.msg === 'initial list complete' && l.kind === kind, 60_000)
      ),
    );
    await sleep(opts.settleSeconds * 1000);
    labeller.assertRunning();
    const s = proc.sample();
    if (!s) throw new Error('labeller at rest: /proc gave no reading');
    return { rss: s.rss, peakRss: s.peakRss, cpuSeconds: s.cpuSeconds };
  } finally {
    proc.stop();
    await labeller.stop('SIGTERM', 15_000);
  }
}

const opts = parseOrExit('footprint', USAGE, () => options(process.argv.slice(2)));

const abort = new AbortController();
let controlPlane: Promise<ControlPlane> | undefined;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    abort.abort(new Error(signal));
    void (controlPlane?.then((cp) => cp.stop(), () => {}) ?? Promise.resolve()).finally(() => process.exit(130));
  });
}

const what = opts.build === undefined ? `the sources (\`${opts.entry}\`)` : `the build (\`${opts.entry}\`)`;
const rows: Row[] = [];
let status = 0;
try {
  log(`labeller --help × ${opts.runs} (${what})`);
  const help = [];
  for (let i = 0; i < opts.runs; i++) help.push(await helpRun(opts));
  const wall = median(help.map((h) => h.seconds));
  const peak = median(help.map((h) => h.peakRss));
  rows.push({
    id: 'f1',
    measurement: `\`labeller --help\`: wall time, spawn → exit (median of ${opts.runs})`,
    result: `${seconds(wall)} (${help.map((h) => h.seconds.toFixed(2)).join(', ')})`,
    target: '≤ 0.3 s',
    verdict: wall <= 0.3 ? 'pass' : 'miss',
    load: loadavg()[0],
  });
  rows.push({
    id: 'f1',
    measurement: '`labeller --help`: peak RSS (VmHWM)',
    result: `${mib(peak)} (${help.map((h) => (h.peakRss / 2 ** 20).toFixed(0)).join(', ')} MiB)`,
    target: '≤ 60 MiB',
    verdict: peak <= 60 * 2 ** 20 ? 'pass' : 'miss',
    load: loadavg()[0],
  });

  if (opts.cluster) {
    log('starting the control plane');
    controlPlane = startControlPlane(abort.signal);
    const cp = await controlPlane;
    log(`at rest: 3 kinds, 0 objects, ${opts.settleSeconds} s settle`);
    const rest = await atRest(cp, opts);
    log(`the floor: the runtime alone, ${opts.settleSeconds} s settle`);
    const bare = await floor(opts);
    rows.push({
      id: 'f2',
      measurement: 'RSS at rest, 3 kinds watched, 0 objects, kubeconfig credentials (bearer token)',
      result: `${mib(rest.rss)} (peak ${mib(rest.peakRss)}, CPU ${rest.cpuSeconds.toFixed(2)} s since start); ${
        mib(rest.rss - bare)
      } above the floor`,
      target: '≤ 60 MiB',
      verdict: rest.rss <= 60 * 2 ** 20 ? 'pass' : 'miss',
      load: loadavg()[0],
    });
    rows.push({
      id: 'f0',
      measurement: 'the floor: the runtime alone with the same flags and environment, an empty timer (VmRSS)',
      result: mib(bare),
      target: 'measured',
      verdict: '',
      load: loadavg()[0],
    });
  }
} catch (error) {
  status = 1;
  log(`FAILED: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
} finally {
  await controlPlane?.then((cp) => cp.stop(), () => {});
}
process.stdout.write(
  `\n## Footprint, labeller on ${opts.runtime === host ? runtimeVersion() : opts.runtime}, from ${what}${
    opts.v8Flags.length ? ` with \`${opts.v8Flags.join(' ')}\`` : ''
  }\n\n${table(rows)}\n\n`,
);
process.exit(status);
