// Row 5, relabel latency: labeller's label removed from one object at a time by another manager
// and timed until it is back, on metadata-only watches (bench/lib/relabel.ts); first on an
// otherwise idle API server, then under background churn. Ends with the restarted labeller's
// SIGTERM, whose exit and log counts the row's notes report.
import { KubeClient } from '../../src/kube/client.ts';
import { describeExit } from '../../test/process/child.ts';
import type { Labeller } from '../../test/process/labeller.ts';
import { sleep } from '../../test/process/sleep.ts';
import type { Bench } from './context.ts';
import { LABELS, TEAM } from './launch.ts';
import { Churn, LabelWatch, type LatencySamples, measureRelabel, percentile } from './relabel.ts';
import { load1, ms, type Row, verdict } from './report.ts';
import type { Setup } from './setup.ts';

type LatencySummary = LatencySamples & { readonly p50: number | undefined; readonly p99: number | undefined };

export interface LatencyResults {
  idle: LatencySummary & { load: number };
  churn: LatencySummary & { rate: number; churnErrors: number; load: number };
  watchErrors: number;
  restartExitCode: number | null;
  logWarnings: number;
  logErrors: number;
}

const summarize = (s: LatencySamples): LatencySummary => {
  const all = [...s.latenciesMs, ...Array.from({ length: s.timeouts }, () => Number.POSITIVE_INFINITY)];
  return { ...s, p50: percentile(all, 50), p99: percentile(all, 99) };
};

/** `samples` relabels idle, as many under `churnRate` writes/s, then stops `labeller` (checkLatency says how that went). */
export async function relabelLatency(
  bench: Bench,
  labeller: Labeller,
  setup: Setup,
  samples: number,
  churnRate: number,
): Promise<LatencyResults> {
  const { controlPlane, admin, resources, signal, log } = bench;
  const { namespace, objects } = setup;
  log(`relabel latency: ${samples} samples idle, ${samples} under churn (${churnRate} writes/s)`);
  const watch = new LabelWatch(admin, resources, namespace);
  await watch.start();
  const label = { key: TEAM, value: LABELS[TEAM] };
  const idleLatency = {
    ...summarize(await measureRelabel(admin, watch, namespace, objects, label, samples, 0, signal)),
    load: load1(),
  };
  const churnClient = await KubeClient.load({ kubeconfig: controlPlane.kubeconfig, userAgent: 'labeller-bench-churn' });
  const churn = new Churn(churnClient, namespace, churnRate);
  let churnLatency;
  try {
    churn.start();
    await sleep(1000, signal);
    churnLatency = summarize(await measureRelabel(admin, watch, namespace, objects, label, samples, samples, signal));
  } finally {
    await churn.stop();
    await churnClient.close();
    await watch.stop();
  }
  const exit = await labeller.stop('SIGTERM', 15_000);
  const results = {
    idle: idleLatency,
    churn: { ...churnLatency, rate: churn.achievedRate, churnErrors: churn.errors, load: load1() },
    watchErrors: watch.errors,
    restartExitCode: exit.code,
    logWarnings: labeller.counts.warn,
    logErrors: labeller.counts.error,
  };
  log(
    `relabel p50/p99: idle ${ms(idleLatency.p50)}/${ms(idleLatency.p99)}, churn ${ms(churnLatency.p50)}/${
      ms(churnLatency.p99)
    }`,
  );
  return results;
}

/** Throws if `labeller` failed its SIGTERM or restored no label (checked once `latency` is recorded). */
export function checkLatency(latency: LatencyResults, labeller: Labeller): void {
  if (latency.restartExitCode !== 0) {
    const exit = labeller.process.exit ?? { code: latency.restartExitCode, signal: null };
    throw new Error(`labeller exited with ${describeExit(exit)} on SIGTERM\n${labeller.stderr}`);
  }
  if (latency.idle.latenciesMs.length === 0 && latency.churn.latenciesMs.length === 0) {
    throw new Error('relabel latency: no sample completed (labeller never restored the label)');
  }
}

export function latencyRows(latency: LatencyResults): Row[] {
  const row = (s: LatencySummary, what: string, target: string, withVerdict: boolean, load: number): Row => ({
    id: '5',
    measurement: what,
    result: `p50 ${ms(s.p50)}, p99 ${ms(s.p99)} (${s.samples} samples${s.timeouts ? `, ${s.timeouts} timed out` : ''})`,
    target,
    verdict: withVerdict ? verdict(s.p99 !== undefined && s.p99 <= 100) : '',
    load,
  });
  return [
    row(
      latency.idle,
      'Relabel latency, otherwise idle API server: label removed → restored',
      'p99 ≤ 100 ms',
      true,
      latency.idle.load,
    ),
    row(
      latency.churn,
      `Relabel latency under churn (${latency.churn.rate.toFixed(0)} writes/s of other objects)`,
      '',
      false,
      latency.churn.load,
    ),
  ];
}
