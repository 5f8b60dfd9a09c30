// Row 3, a restart over the labelled cluster: a second labeller, timed from its spawn to the last
// kind's `initial list complete` line, and its PATCH requests counted from the audit log once it
// has reconciled every object from its cache. It keeps running for rows 6 and 5.
import { byVerb, formatVerbs } from '../../test/cluster/audit.ts';
import type { Labeller } from '../../test/process/labeller.ts';
import { sleep } from '../../test/process/sleep.ts';
import type { Bench } from './context.ts';
import { type Launch, type PodLaunch, startLabeller } from './launch.ts';
import { load1, type Row, seconds, verdict } from './report.ts';

export interface RestartResults {
  readySeconds: number;
  settleSeconds: number;
  requests: Record<string, number>;
  patches: number;
  load: number;
}

/** Starts labeller with `args` over `n` labelled objects; answers it, still running, and the row's figures. */
export async function restart(
  bench: Bench,
  launch: Launch,
  args: readonly string[],
  pod: PodLaunch | undefined,
  n: number,
): Promise<{ labeller: Labeller; results: RestartResults }> {
  const { audit, resources, signal, log } = bench;
  log('restart over the labelled cluster');
  const labeller = startLabeller(launch, args, pod);
  const ready = await Promise.all(
    [...resources.keys()].map((k) =>
      labeller.waitForLog((l) => l.msg === 'initial list complete' && l.kind === k.kind, 120_000 + n * 5)
    ),
  );
  const readyAt = Math.max(...ready.map((l) => Date.parse(l.time)));
  // Every object is reconciled from the cache right after the list; let that happen, then count.
  const settleMs = 3000 + n / 5;
  await sleep(settleMs, signal);
  labeller.assertRunning();
  const requests = audit.requests(labeller.startedAt, Date.now());
  const results = {
    readySeconds: (readyAt - labeller.startedAt) / 1000,
    settleSeconds: settleMs / 1000,
    requests: byVerb(requests),
    patches: requests.filter((r) => r.verb === 'patch').length,
    load: load1(),
  };
  log(`ready in ${seconds(results.readySeconds)}, ${results.patches} PATCH`);
  return { labeller, results };
}

export function restartRows(restart: RestartResults): Row[] {
  return [
    {
      id: '3',
      measurement: 'Restart over the labelled cluster: process start → every kind listed',
      result: seconds(restart.readySeconds),
      target: '',
      verdict: '',
      load: restart.load,
    },
    {
      id: '3',
      measurement: `Restart: PATCH requests (counted ${restart.settleSeconds.toFixed(0)} s after ready)`,
      result: `${restart.patches} (all requests: ${formatVerbs(restart.requests)})`,
      target: '0',
      verdict: verdict(restart.patches === 0),
      load: restart.load,
    },
  ];
}
