// Rows E1–E5 (--every-kind): labeller's footprint in every-kind mode (kinds.yaml `- resource: "*"`,
// `scope: all`, cluster-wide, so every built-in kind the control plane serves, default exclusions
// left out). First at rest over the control plane's own objects (E1); then cold over N objects of
// each of 10 kinds in a fresh namespace (E2, E3); then at rest once converged (E4) and idle (E5).
// RSS and CPU from /proc, watches open and requests from the audit log.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MetadataApi } from '../../src/kube/api.ts';
import { discover } from '../../src/kube/discovery.ts';
import { resolveResource } from '../../src/apimachinery/resolve.ts';
import { type AuditRequest, byVerb, formatVerbs } from '../../test/cluster/audit.ts';
import type { Labeller } from '../../test/process/labeller.ts';
import { ProcSampler } from '../../test/process/procstat.ts';
import { sleep } from '../../test/process/sleep.ts';
import type { Bench } from './context.ts';
import { countMatching } from './cold.ts';
import { converged } from './converged.ts';
import { idleCost, type IdleResults } from './idle.ts';
import { FIELD_MANAGER, LABELS, podCredentials, startLabeller, TEAM } from './launch.ts';
import { createNamespace } from '../../test/cluster/cluster.ts';
import { pool, retrying } from './objects.ts';
import type { Options } from './options.ts';
import { load1, mib, type Row, seconds } from './report.ts';

/** The 10 kinds the bench creates objects of: collection path under the namespace, and each object's content. */
const KINDS: readonly { readonly resource: string; readonly api: string; readonly content: (i: number) => object }[] = (
  () => {
    const labels = (i: number) => ({ app: `app-${i % 97}` });
    const pod = (i: number) => ({
      metadata: { labels: labels(i) },
      spec: { containers: [{ name: 'app', image: `registry.example.com/app-${i % 97}:1.${i % 10}.0` }] },
    });
    const once = (i: number) => ({ template: { spec: { ...pod(i).spec, restartPolicy: 'Never' } } });
    return [
      { resource: 'configmaps', api: '/api/v1', content: (i) => ({ data: { 'app.yaml': `name: app-${i % 97}\n` } }) },
      { resource: 'secrets', api: '/api/v1', content: (i) => ({ stringData: { token: `secret-${i}` } }) },
      {
        resource: 'services',
        api: '/api/v1',
        // Headless: the test control plane's service CIDR has room for 254 cluster IPs only.
        content: (i) => ({ spec: { clusterIP: 'None', selector: labels(i), ports: [{ port: 80 }] } }),
      },
      { resource: 'serviceaccounts', api: '/api/v1', content: () => ({}) },
      {
        resource: 'deployments',
        api: '/apis/apps/v1',
        content: (i) => ({ spec: { selector: { matchLabels: labels(i) }, template: pod(i) } }),
      },
      {
        resource: 'statefulsets',
        api: '/apis/apps/v1',
        content: (i) => ({ spec: { selector: { matchLabels: labels(i) }, template: pod(i), serviceName: 'app' } }),
      },
      { resource: 'jobs', api: '/apis/batch/v1', content: (i) => ({ spec: once(i) }) },
      {
        resource: 'cronjobs',
        api: '/apis/batch/v1',
        content: (i) => ({ spec: { schedule: `${i % 60} 3 * * *`, jobTemplate: { spec: once(i) } } }),
      },
      {
        resource: 'roles',
        api: '/apis/rbac.authorization.k8s.io/v1',
        content: () => ({ rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get'] }] }),
      },
      {
        resource: 'rolebindings',
        api: '/apis/rbac.authorization.k8s.io/v1',
        content: (i) => ({
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: `role-${i}` },
          subjects: [{ kind: 'ServiceAccount', name: `serviceaccount-${i}` }],
        }),
      },
    ];
  }
)();

interface AtRest {
  /** VmRSS, VmHWM and CPU since start, once settled. */
  readonly rss: number;
  readonly peakRss: number;
  readonly cpuSeconds: number;
  /** Watches of labeller's open at that moment (audit log: started, not completed). */
  readonly watches: number;
}

export interface EveryKindResults {
  readonly perKind: number;
  readonly kinds: number;
  /** Controllers labeller started: every kind it found, one each. */
  readonly controllers: number;
  readonly empty: AtRest;
  readonly createdSeconds: number;
  readonly cold: {
    readonly seconds: number;
    readonly cpuSeconds: number | undefined;
    readonly peakRss: number;
    readonly requests: Record<string, number>;
    readonly patches: number;
    readonly load: number;
  };
  readonly converged: AtRest;
  readonly idle: IdleResults;
  readonly settleSeconds: number;
}

const SETTLE_SECONDS = 10;

export async function benchEveryKind(bench: Bench, opts: Options): Promise<EveryKindResults> {
  const { admin, audit, controlPlane, signal, log } = bench;
  const namespace = `labeller-everykind-${Date.now().toString(36)}`;
  await createNamespace(admin, namespace);
  const dir = mkdtempSync(join(tmpdir(), 'labeller-bench-everykind-'));
  const config = join(dir, 'kinds.yaml');
  writeFileSync(
    config,
    `labels:\n${
      Object.entries(LABELS).map(([k, v]) => `  ${k}: ${v}\n`).join('')
    }kinds:\n  - resource: "*"\n    scope: all\n`,
  );
  const pod = opts.credentials === 'in-cluster' ? podCredentials(controlPlane.kubeconfig, namespace) : undefined;
  const args = [
    ...(pod ? [] : ['--kubeconfig', controlPlane.kubeconfig]),
    '--config',
    config,
    '--concurrency',
    String(opts.concurrency),
    '--field-manager',
    FIELD_MANAGER,
    '--grace-period',
    '10s',
  ];

  log('every-kind: at rest over the control plane’s own objects');
  const first = startLabeller(opts, args, pod);
  let controllers: number;
  let empty: AtRest;
  try {
    controllers = await listed(first, signal);
    empty = await atRest(first, bench);
  } finally {
    await first.stop('SIGTERM', 15_000);
  }
  log(`every-kind: ${controllers} controllers, ${empty.watches} watches, RSS ${mib(empty.rss)} at rest`);

  const total = opts.n * KINDS.length;
  log(`every-kind: creating ${opts.n} objects of each of ${KINDS.length} kinds in ${namespace}`);
  const created = performance.now();
  const plan = KINDS.flatMap((kind) => Array.from({ length: opts.n }, (_, i) => ({ kind, i })));
  plan.sort((a, b) => a.i - b.i);
  await pool(plan, opts.createConcurrency, async ({ kind, i }) => {
    const name = `${kind.resource.slice(0, -1)}-${i}`;
    await retrying(() =>
      admin.json('POST', `${kind.api}/namespaces/${namespace}/${kind.resource}`, {
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ metadata: objectMetadata(name, i), ...kind.content(i) }),
      })
    );
  }, signal);
  const createdSeconds = (performance.now() - created) / 1000;
  log(`every-kind: created in ${seconds(createdSeconds)}`);

  const { resources } = await discover(admin);
  const apis = KINDS.map((kind) => {
    const group = kind.api.split('/')[2] ?? '';
    const resource = resolveResource(kind.api === '/api/v1' ? kind.resource : `${kind.resource}.${group}`, resources);
    return new MetadataApi(admin, resource, namespace);
  });
  log('every-kind: cold convergence');
  const cold = startLabeller(opts, args, pod);
  const proc = new ProcSampler(cold.pid);
  try {
    await converged(cold, apis, `${TEAM}!=${LABELS[TEAM]}`, total, 120_000 + total * 30, signal);
    const confirmedAt = Date.now();
    const requests = audit.requests(cold.startedAt, confirmedAt);
    const patches = requests.filter((r) => r.verb === 'patch' && r.code !== undefined && r.code < 300);
    const lastPatch = patches.reduce((t, r) => Math.max(t, r.completed ?? r.received), 0) || confirmedAt;
    const labelled = (await Promise.all(apis.map((api) => countMatching(api, `${TEAM}=${LABELS[TEAM]}`))))
      .reduce((a, b) => a + b, 0);
    if (labelled !== total) throw new Error(`every-kind: ${labelled} of ${total} objects labelled`);
    const coldResults = {
      seconds: (lastPatch - cold.startedAt) / 1000,
      cpuSeconds: proc.cpuAt(lastPatch),
      peakRss: proc.peakRss,
      requests: byVerb(requests),
      patches: patches.length,
      load: load1(),
    };
    log(
      `every-kind: converged in ${seconds(coldResults.seconds)} (${formatVerbs(coldResults.requests)}), peak RSS ${
        mib(coldResults.peakRss)
      }`,
    );
    const rest = await atRest(cold, bench);
    log(`every-kind: at rest converged, RSS ${mib(rest.rss)}, ${rest.watches} watches`);
    const idle = await idleCost(bench, cold, opts.idleMinutes);
    return {
      perKind: opts.n,
      kinds: KINDS.length,
      controllers,
      empty,
      createdSeconds,
      cold: coldResults,
      converged: rest,
      idle,
      settleSeconds: SETTLE_SECONDS,
    };
  } finally {
    proc.stop();
    await cold.stop('SIGTERM', 15_000);
  }
}

/** Waits for the first list of every controller labeller starts; answers how many it started. */
async function listed(labeller: Labeller, signal: AbortSignal): Promise<number> {
  const starting = await labeller.waitForLog((l) => l.msg === 'starting', 120_000);
  const kinds = (starting['kinds'] as unknown[]).length;
  for (
    const deadline = Date.now() + 120_000;
    labeller.since(0, (l) => l.msg === 'initial list complete').length < kinds;
  ) {
    labeller.assertRunning();
    if (Date.now() > deadline) throw new Error(`every-kind: not every one of ${kinds} kinds listed in 120 s`);
    await sleep(200, signal);
  }
  return kinds;
}

/** `labeller` settled for SETTLE_SECONDS: its RSS and CPU from /proc, its open watches from the audit log. */
async function atRest(labeller: Labeller, { audit, signal }: Bench): Promise<AtRest> {
  await sleep(SETTLE_SECONDS * 1000, signal);
  labeller.assertRunning();
  const proc = new ProcSampler(labeller.pid, 1000);
  const sample = proc.sample();
  proc.stop();
  if (!sample) throw new Error('every-kind: /proc gave no reading');
  const open = (r: AuditRequest) => r.verb === 'watch' && r.completed === undefined;
  return {
    rss: sample.rss,
    peakRss: sample.peakRss,
    cpuSeconds: sample.cpuSeconds,
    watches: audit.requests(labeller.startedAt).filter(open).length,
  };
}

/** A few labels and annotations, as objects in a real namespace carry. */
function objectMetadata(name: string, i: number): object {
  const app = `app-${i % 97}`;
  return {
    name,
    labels: { app, 'app.kubernetes.io/name': app, tier: i % 3 === 0 ? 'frontend' : 'backend' },
    annotations: { 'example.com/owner': `team-${i % 13}@example.com`, 'example.com/change-id': `CHG-${100000 + i}` },
  };
}

export function everyKindRows(r: EveryKindResults, load: number): Row[] {
  const total = r.perKind * r.kinds;
  const cpu = r.cold.cpuSeconds;
  return [
    {
      id: 'E1',
      measurement:
        `Every-kind mode (scope all, cluster-wide): at rest over the control plane’s own objects, ${r.settleSeconds} s after every first list`,
      result: `${r.controllers} controllers, ${r.empty.watches} watches open; RSS ${mib(r.empty.rss)} (peak ${
        mib(r.empty.peakRss)
      }), CPU ${r.empty.cpuSeconds.toFixed(2)} s since start`,
      target: '',
      verdict: '',
      load,
    },
    {
      id: 'E2',
      measurement:
        `Every-kind mode: cold convergence, ${r.kinds} kinds × ${r.perKind} objects (process start → last PATCH)`,
      result: `${seconds(r.cold.seconds)}; CPU ${
        cpu === undefined ? 'n/a' : `${cpu.toFixed(2)} s (${((cpu * 1000) / total).toFixed(2)} ms/object)`
      }; peak RSS ${mib(r.cold.peakRss)}`,
      target: '',
      verdict: '',
      load: r.cold.load,
    },
    {
      id: 'E3',
      measurement: 'Every-kind mode: requests during convergence, by verb (audit log)',
      result: `${formatVerbs(r.cold.requests)} (${(r.cold.patches / total).toFixed(2)} PATCH/object)`,
      target: '',
      verdict: '',
      load: r.cold.load,
    },
    {
      id: 'E4',
      measurement:
        `Every-kind mode: at rest once converged (${total} objects and the system’s), ${r.settleSeconds} s later`,
      result: `RSS ${mib(r.converged.rss)}, ${r.converged.watches} watches open`,
      target: '',
      verdict: '',
      load,
    },
    {
      id: 'E5',
      measurement: `Every-kind mode: idle requests per minute (over ${r.idle.minutes} min)`,
      result: `${r.idle.perMinute.toFixed(2)} (${formatVerbs(r.idle.requests)}); ${r.idle.relists} relists`,
      target: '',
      verdict: '',
      load: r.idle.load,
    },
  ];
}
