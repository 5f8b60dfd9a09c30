// The soak: labeller runs while objects of two kinds are created, updated, deleted and stripped
// of their labels (or given other values by another manager), and its watches are forced to
// reconnect (the proxy drops every connection; optionally the API server restarts). At the end
// the cluster must be exactly as desired, and labeller's memory must not have grown.
// Used by test/faults/soak.test.ts (about a minute) and test/faults/longsoak.ts (`npm run soak`).
import type { ControlPlane } from '../controlplane/controlplane.ts';
import { auditEvents, byLabeller } from '../cluster/audit.ts';
import { Cluster } from '../cluster/cluster.ts';
import { sleep } from '../process/sleep.ts';
import { eventually } from '../process/eventually.ts';
import { procSample } from '../process/procstat.ts';
import { stats } from '../process/figures.ts';
import { Labeller, watchFailed } from '../process/labeller.ts';
import { FaultProxy } from '../cluster/faultproxy.ts';

export interface SoakOptions {
  readonly controlPlane: ControlPlane;
  readonly durationMs: number;
  /** Every so often the proxy closes every connection labeller has. */
  readonly dropEveryMs: number;
  /** Every so often kube-apiserver is stopped and started again; 0: never. */
  readonly restartEveryMs: number;
  /** Churn operations per second. */
  readonly opsPerSecond: number;
  readonly log?: (line: string) => void;
}

export interface SoakResult {
  readonly objects: number;
  readonly operations: Readonly<Record<string, number>>;
  readonly drops: number;
  readonly restarts: number;
  /** Seconds from the end of the churn until the cluster was as desired. */
  readonly convergedSeconds: number;
  /** Objects whose labels are not exactly the desired ones (should be empty). */
  readonly wrong: readonly string[];
  /** Objects that exist but should not (deleted ones recreated), or are missing. */
  readonly unexpected: readonly string[];
  readonly rss: {
    readonly startMiB: number;
    readonly endMiB: number;
    readonly maxMiB: number;
    readonly samples: readonly number[];
  };
  readonly watchFailures: number;
  readonly requests: number | undefined;
  readonly exitCode: number | null;
  readonly stderrTail: string;
}

const KINDS = [
  {
    path: 'configmaps',
    make: (name: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data: { v: '0' } }),
  },
  {
    path: 'secrets',
    make: (name: string) => ({ apiVersion: 'v1', kind: 'Secret', metadata: { name }, stringData: { v: '0' } }),
  },
] as const;

const desired = (name: string): Record<string, string> => ({ 'example.com/name': name, team: 'platform' });
const sameLabels = (a: Record<string, string>, b: Record<string, string>): boolean =>
  JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b).sort());

export async function soak(options: SoakOptions): Promise<SoakResult> {
  const { controlPlane: cp, log = () => {} } = options;
  const cluster = await Cluster.connect(cp.kubeconfig);
  const proxy = await FaultProxy.start(cp.server);
  const ns = await cluster.namespace('soak');
  const base = `/api/v1/namespaces/${ns}`;
  /** The objects that must exist, per kind. */
  const live = new Map<string, Set<string>>(KINDS.map((k) => [k.path, new Set<string>()]));
  let serial = 0;
  for (const kind of KINDS) {
    const names = Array.from({ length: kind.path === 'configmaps' ? 150 : 60 }, () => `o-${serial++}`);
    await cluster.createMany(`${base}/${kind.path}`, names, kind.make);
    for (const name of names) live.get(kind.path)!.add(name);
  }

  const labeller = new Labeller(
    [
      '--kinds',
      KINDS.map((k) => k.path).join(','),
      '--label',
      'team=platform',
      '--label',
      'example.com/name={{name}}',
      '--namespace',
      ns,
      '--watch-timeout',
      '20s',
    ],
    { kubeconfig: cluster.writeKubeconfig({ server: proxy.url }) },
  );
  const samples: number[] = [];
  const sampler = setInterval(() => {
    try {
      const reading = labeller.running ? procSample(labeller.pid) : undefined;
      if (reading) samples.push(reading.rss / 2 ** 20);
    } catch {
      // The process is gone: its exit is reported below.
    }
  }, 1000);
  const operations: Record<string, number> = {
    create: 0,
    update: 0,
    delete: 0,
    'remove label': 0,
    'change label': 0,
    failed: 0,
  };
  let drops = 0;
  let restarts = 0;
  let apiDown = false;
  try {
    await eventually(
      async () => {
        for (const kind of KINDS) {
          const now = await cluster.labelsByName(`${base}/${kind.path}`);
          if (![...now].every(([name, l]) => sameLabels(l, desired(name)))) return false;
        }
        return true;
      },
      'the first labelling',
      120_000,
      500,
    );
    log(
      `soak: ${ns}, ${[...live.values()].reduce((n, s) => n + s.size, 0)} objects labelled, churning for ${
        Math.round(options.durationMs / 1000)
      } s`,
    );

    const start = Date.now();
    let nextDrop = start + options.dropEveryMs;
    let nextRestart = options.restartEveryMs > 0 ? start + options.restartEveryMs : Infinity;
    let restarting: Promise<void> | undefined;
    const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)]!;
    while (Date.now() - start < options.durationMs) {
      const now = Date.now();
      if (now >= nextDrop) {
        proxy.drop();
        drops++;
        nextDrop = now + options.dropEveryMs;
      }
      if (now >= nextRestart && !restarting) {
        nextRestart = now + options.restartEveryMs;
        apiDown = true;
        restarting = (async () => {
          await cp.stopApiServer();
          await sleep(2000);
          await cp.startApiServer();
          restarts++;
          apiDown = false;
          log(`soak: API server restarted (${restarts})`);
        })().finally(() => {
          restarting = undefined;
        });
      }
      if (!apiDown) {
        const kind = pick(KINDS);
        const names = [...live.get(kind.path)!];
        const op = names.length < 20
          ? 'create'
          : pick(['create', 'create', 'update', 'delete', 'delete', 'remove label', 'change label'] as const);
        const path = `${base}/${kind.path}`;
        try {
          if (op === 'create') {
            const name = `o-${serial++}`;
            live.get(kind.path)!.add(name);
            await cluster.post(path, kind.make(name)).catch((error: unknown) => {
              live.get(kind.path)!.delete(name);
              throw error;
            });
          } else {
            const name = pick(names);
            if (op === 'delete') {
              live.get(kind.path)!.delete(name);
              await cluster.delete(`${path}/${name}`);
            } else if (op === 'update') {
              await cluster.client.json('PATCH', `${path}/${name}`, {
                headers: { 'content-type': 'application/merge-patch+json' },
                body: JSON.stringify(
                  kind.path === 'configmaps'
                    ? { data: { v: String(serial++) } }
                    : { stringData: { v: String(serial++) } },
                ),
              });
            } else {
              await cluster.patchLabels(
                `${path}/${name}`,
                op === 'remove label' ? { team: null } : { team: 'someone-else' },
              );
            }
          }
          operations[op] = (operations[op] ?? 0) + 1;
        } catch {
          operations['failed'] = (operations['failed'] ?? 0) + 1;
        }
      }
      await sleep(1000 / options.opsPerSecond);
    }
    await restarting;
    const churnEnded = Date.now();
    log(
      `soak: churn over: ${
        JSON.stringify(operations)
      }, ${drops} connection drops, ${restarts} API server restarts; waiting for convergence`,
    );

    // Converged: every live object carries exactly the desired labels and nothing else exists.
    let wrong: string[] = [];
    let unexpected: string[] = [];
    const check = async (): Promise<boolean> => {
      wrong = [];
      unexpected = [];
      for (const kind of KINDS) {
        const now = await cluster.labelsByName(`${base}/${kind.path}`);
        for (const [name, l] of now) {
          if (!live.get(kind.path)!.has(name)) unexpected.push(`${kind.path}/${name} exists`);
          else if (!sameLabels(l, desired(name))) wrong.push(`${kind.path}/${name} ${JSON.stringify(l)}`);
        }
        for (const name of live.get(kind.path)!) if (!now.has(name)) unexpected.push(`${kind.path}/${name} missing`);
      }
      return wrong.length === 0 && unexpected.length === 0;
    };
    await eventually(check, 'the cluster to converge', 150_000, 500).catch(() => {});
    const convergedSeconds = (Date.now() - churnEnded) / 1000;
    // Memory after a quiet period: the last samples, not the peak of the churn.
    await sleep(5000);
    clearInterval(sampler);
    const exit = await labeller.stop();
    const warm = samples.slice(5, 15);
    const tail = samples.slice(-10);
    const requests = cp.auditLog ? auditEvents(cp.auditLog, byLabeller).length : undefined;
    return {
      objects: [...live.values()].reduce((n, s) => n + s.size, 0),
      operations,
      drops,
      restarts,
      convergedSeconds,
      wrong,
      unexpected,
      rss: { startMiB: stats(warm).median, endMiB: stats(tail).median, maxMiB: stats(samples).max, samples },
      watchFailures: labeller.logs.filter(watchFailed).length,
      requests,
      exitCode: exit.code,
      stderrTail: exit.stderr.split('\n').filter((l) => !l.includes('"labels applied"')).slice(-20).join('\n'),
    };
  } finally {
    clearInterval(sampler);
    labeller.kill();
    await proxy.close();
    await cluster.close();
  }
}

/** One line per figure, for docs/reliability.md. */
export function describeSoak(r: SoakResult, minutes: number): string[] {
  return [
    `soak ${minutes.toFixed(1)} min: ${
      Object.entries(r.operations).map(([k, v]) => `${v} ${k}`).join(', ')
    }; ${r.drops} connection drops, ${r.restarts} API server restarts`,
    `soak: converged ${
      r.convergedSeconds.toFixed(1)
    } s after the churn; ${r.objects} objects, ${r.wrong.length} with wrong labels, ${r.unexpected.length} unexpected; ${r.watchFailures} watch retries; ${
      r.requests ?? '?'
    } requests by labeller in all`,
    `soak memory (RSS): ${r.rss.startMiB.toFixed(0)} MiB after warm-up, ${
      r.rss.endMiB.toFixed(0)
    } MiB at the end, peak ${r.rss.maxMiB.toFixed(0)} MiB (${r.rss.samples.length} samples)`,
  ];
}
