// What --policy-reports costs in writes and CPU: 10,000 ConfigMaps of one namespace, all short of a
// key (its template reads a namespace label the namespace does not have), on a control plane of
// its own with the chart's CRDs. labeller runs with and without --policy-reports; for each, the
// requests on policyreports the API server counted (apiserver_request_total) and labeller's CPU:
// while converging (the first report), converged (nothing changes for --settle seconds), and while
// 1,000 of the objects are set a contested key by another manager (findings change in a burst).
//   node --import tsx bench/reports.ts [--n 10000] [--settle 60]
import { readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadAll } from 'js-yaml';
import { KubeClient } from '../src/kube/client.ts';
import { type Report, reportName } from '../src/reports/report.ts';
import { createNamespace } from '../test/cluster/cluster.ts';
import { type ControlPlane, freePorts, startControlPlane } from '../test/controlplane/controlplane.ts';
import { eventually } from '../test/process/eventually.ts';
import { ProcSampler } from '../test/process/procstat.ts';
import { sleep } from '../test/process/sleep.ts';
import { exitWithUsage, parseOrExit, progress } from './lib/cli.ts';
import { launch, LAUNCH_OPTIONS, LAUNCH_USAGE, startLabeller } from './lib/launch.ts';
import { createObjects, KINDS, pool } from './lib/objects.ts';
import { type Row, table } from './lib/report.ts';

const USAGE = `usage: bench/reports.ts [options]
${LAUNCH_USAGE}
  --n N                   ConfigMaps in the namespace (default 10000)
  --settle S              seconds converged, nothing changing (default 60)`;

const { values } = parseOrExit('reports', USAGE, () =>
  parseArgs({
    strict: true,
    options: {
      ...LAUNCH_OPTIONS,
      n: { type: 'string', default: '10000' },
      settle: { type: 'string', default: '60' },
      help: { type: 'boolean', default: false },
    },
  }));
if (values.help) exitWithUsage(USAGE);
const n = Number(values.n);
const settleSeconds = Number(values.settle);
const launched = launch(values);
const log = progress('reports');
const FIELD_MANAGER = 'labeller';
const CONTESTED = 'bench.example.com/owner';
const CONFIGMAPS = KINDS.find((kind) => kind.resource === 'configmaps')!;

/** Writes on policyreports the API server has served, by verb (APPLY, PATCH, DELETE…), from its /metrics. */
async function reportWrites(admin: KubeClient): Promise<number> {
  const response = await admin.request('GET', '/metrics');
  let text = '';
  for await (const chunk of response) text += String(chunk);
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith('apiserver_request_total{') || !line.includes('resource="policyreports"')) continue;
    if (/verb="(LIST|GET|WATCH)"/.test(line)) continue;
    sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

/** The chart's CRDs (chart/crds/), created as helm installs them. */
async function installCrds(admin: KubeClient): Promise<void> {
  const folder = join(import.meta.dirname, '..', 'chart', 'crds');
  for (const file of readdirSync(folder).filter((name) => name.endsWith('.yaml'))) {
    for (const crd of loadAll(readFileSync(join(folder, file), 'utf8'))) {
      await admin.json('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', {
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(crd),
      });
    }
  }
  await eventually(
    async () => Boolean(await admin.json('GET', '/apis/wgpolicyk8s.io/v1alpha2/policyreports')),
    'policyreports served',
    60_000,
  );
}

/** Another manager sets (a value) or drops (null) the contested key on the first 1,000 objects. */
async function contest(admin: KubeClient, namespace: string, value: string | null): Promise<void> {
  await pool(Array.from({ length: Math.min(1000, n) }, (_, i) => i), 16, async (i) => {
    await admin.json('PATCH', `/api/v1/namespaces/${namespace}/configmaps/configmap-${String(i).padStart(5, '0')}`, {
      query: { fieldManager: 'someone-else' },
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ metadata: { labels: { [CONTESTED]: value } } }),
    });
  });
}

interface Phase {
  readonly writes: number;
  readonly cpuSeconds: number;
  readonly seconds: number;
}

/** One labeller run over `namespace`: the three phases' writes and CPU. */
async function run(admin: KubeClient, cp: ControlPlane, namespace: string, reports: boolean): Promise<Phase[]> {
  const [port = 0] = await freePorts(1);
  const labeller = startLabeller(launched, [
    '--http-port',
    String(port),
    '--kubeconfig',
    cp.kubeconfig,
    '--kinds',
    'configmaps',
    '--namespace',
    namespace,
    '--label',
    'team={{namespace.labels.team}}',
    '--label',
    `${CONTESTED}=bench`,
    '--conflicts',
    'skip',
    '--field-manager',
    FIELD_MANAGER,
    ...(reports ? ['--policy-reports'] : []),
  ]);
  const proc = new ProcSampler(labeller.pid, 500);
  const report = () =>
    admin.json<Report>(
      'GET',
      `/apis/wgpolicyk8s.io/v1alpha2/namespaces/${namespace}/policyreports/${reportName(FIELD_MANAGER)}`,
    ).catch(() => undefined);
  const phases: Phase[] = [];
  let mark = { writes: await reportWrites(admin), cpu: 0, at: performance.now() };
  const phase = async () => {
    const writes = await reportWrites(admin);
    const cpu = proc.sample()?.cpuSeconds ?? 0;
    const at = performance.now();
    phases.push({ writes: writes - mark.writes, cpuSeconds: cpu - mark.cpu, seconds: (at - mark.at) / 1000 });
    mark = { writes, cpu, at };
  };
  try {
    // Converging: every object labelled with the constant key; the report, with --policy-reports.
    // The ConfigMaps' list (the namespaces' comes first: the template reads their labels).
    await labeller.waitForLog((l) => l.msg === 'initial list complete' && l['kind'] === 'ConfigMap', 120_000);
    await eventually(
      async () => {
        const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
        return /labeller_objects_pending\{[^}]*\} 0$/m.test(text);
      },
      'converged',
      600_000,
      1000,
    );
    if (reports) await eventually(async () => (await report())?.summary.fail === n, 'the report', 120_000, 1000);
    await phase();
    log(`${reports ? 'with' : 'without'} --policy-reports: converged; ${settleSeconds} s at rest`);
    await sleep(settleSeconds * 1000);
    await phase();
    log('1,000 objects get another manager’s value of a key');
    await contest(admin, namespace, 'theirs');
    if (reports) await eventually(async () => (await report())?.summary.fail === n + 1000, 'the conflicts', 120_000);
    await sleep(10_000);
    await phase();
    // Back as it was, for the next run.
    await contest(admin, namespace, null);
    return phases;
  } finally {
    proc.stop();
    await labeller.stop('SIGTERM', 15_000);
  }
}

const abort = new AbortController();
log('starting the control plane');
const cp = await startControlPlane(abort.signal);
const admin = await KubeClient.load({ kubeconfig: cp.kubeconfig, userAgent: 'labeller-bench-reports' });
try {
  await installCrds(admin);
  const namespace = `labeller-reports-${Date.now().toString(36)}`;
  await createNamespace(admin, namespace);
  log(`creating ${n} ConfigMaps`);
  await createObjects(admin, namespace, n, 32, abort.signal, [CONFIGMAPS]);
  const rows: Row[] = [];
  const names = ['converging (first list, first report)', `converged, ${settleSeconds} s`, '1,000 conflicts'];
  // r0 labels the fresh objects (what the first list costs with writes); r1 and r2 then start on
  // objects already labelled, so that they differ only by --policy-reports.
  for (const [id, reports] of [['r0', false], ['r1', false], ['r2', true]] as const) {
    const phases = await run(admin, cp, namespace, reports);
    phases.forEach((p, i) =>
      rows.push({
        id,
        measurement: `${n} ConfigMaps all short of a key, ${reports ? 'with' : 'without'} --policy-reports${
          id === 'r0' ? ', labelling them' : ''
        }: ${names[i]}`,
        result: `${p.writes} report writes, CPU ${p.cpuSeconds.toFixed(2)} s in ${p.seconds.toFixed(0)} s`,
        target: reports ? (i === 1 ? '0 writes' : '≤ a handful of writes') : '',
        verdict: reports && i === 1 ? (p.writes === 0 ? 'pass' : 'miss') : '',
        load: loadavg()[0],
      })
    );
  }
  process.stdout.write(`${table(rows)}\n`);
} finally {
  await admin.close();
  await cp.stop();
}
