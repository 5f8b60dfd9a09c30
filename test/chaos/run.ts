// `npm run chaos`: seeded runs of the chaos scenario (scenario.ts) on one full test control plane,
// each reporting the invariants it broke. A run that breaks one writes its operations to a file
// and prints how to replay them; a violation found and fixed keeps its operations in regressions/.
//
//   npm run chaos                          seeds 1, 2, 3, 30 operations each
//   npm run chaos -- --seeds 7,8 --ops 60  those seeds, 60 operations each
//   npm run chaos -- --minutes 30          seeds 1, 2, 3, … until 30 minutes are over
//   npm run chaos -- --mode sharded …      the seeds with shard members instead of a leader
//                                          (scenario.ts; a seed draws other operations there)
//   npm run chaos -- --mode adversary …    a tenant against labeller's keys, with protection (odd
//                                          seeds) or without (even): adversary.ts
//   npm run chaos -- --admission on|off …  every seed with, or without, the admission policies
//                                          (by default each seed draws whether it keeps them; a
//                                          server that does not serve them runs none)
//   npm run chaos -- --handovers on|off …  every seed with, or without, the handover operations
//                                          (a skewed clock, writes held across a handover, a
//                                          restart while the catalogue shrinks, sharded a member
//                                          on an older config; by default each seed draws them)
//   npm run chaos -- --replay FILE,FILE    the operations a failed run wrote (or a regression), again,
//                                          in the mode the file names (leader if none), with the
//                                          policies if it says so; with --seeds, those seeds after them
import { readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Cluster } from '../cluster/cluster.ts';
import { startControlPlane } from '../controlplane/controlplane.ts';
import { servesPolicies } from './admission.ts';
import { type AdversaryResult, generateAdversary, protectOf, runAdversary } from './adversary.ts';
import { admissionOf, generate, handoversOf, type Mode, type Operation, run, type RunResult } from './scenario.ts';

const { values } = parseArgs({
  options: {
    seeds: { type: 'string' },
    ops: { type: 'string', default: '30' },
    minutes: { type: 'string' },
    replay: { type: 'string' },
    mode: { type: 'string', default: 'leader' },
    admission: { type: 'string' },
    handovers: { type: 'string' },
  },
});
if (values.mode !== 'leader' && values.mode !== 'sharded' && values.mode !== 'adversary') {
  throw new Error(`--mode leader, sharded or adversary, not ${values.mode}`);
}
if (values.admission !== undefined && values.admission !== 'on' && values.admission !== 'off') {
  throw new Error(`--admission on or off, not ${values.admission}`);
}
if (values.handovers !== undefined && values.handovers !== 'on' && values.handovers !== 'off') {
  throw new Error(`--handovers on or off, not ${values.handovers}`);
}
const adversary = values.mode === 'adversary';
const mode: Mode = values.mode === 'adversary' ? 'leader' : values.mode;
const log = (line: string) => console.log(`[chaos ${new Date().toISOString().slice(11, 19)}] ${line}`);
const count = Number(values.ops);
const deadline = values.minutes === undefined ? undefined : Date.now() + Number(values.minutes) * 60_000;
const replays = (values.replay?.split(',') ?? []).map((file) => {
  const replay = JSON.parse(readFileSync(file, 'utf8')) as {
    seed: number;
    mode?: Mode;
    admission?: boolean;
    operations: Operation[];
  };
  // Files written before the sharded mode, or the admission policies, ran without them.
  return { ...replay, mode: replay.mode ?? 'leader', admission: replay.admission ?? false };
});
const seeds = (values.seeds ?? (replays.length > 0 || deadline ? '' : '1,2,3')).split(',').filter(Boolean).map(Number);

const abort = new AbortController();
process.once('SIGINT', () => abort.abort());
const cp = await startControlPlane(abort.signal, { full: true });
log(`full control plane at ${cp.server}`);
const admin = await Cluster.connect(cp.kubeconfig);
const served = await servesPolicies(admin);
await admin.close();
if (!served) log('the API server does not serve MutatingAdmissionPolicies v1: every run without them');

/** Whether the seed's replicas keep the admission policies: as --admission says, else as the seed draws. */
const admissionFor = (seed: number) => served && (values.admission ? values.admission === 'on' : admissionOf(seed));
/** Whether the seed draws the handover operations: as --handovers says, else as the seed draws. */
const handoversFor = (seed: number) => values.handovers ? values.handovers === 'on' : handoversOf(seed);
/** A seed's run. */
const seeded = (seed: number) => {
  const admission = admissionFor(seed);
  return { seed, mode, admission, operations: generate(seed, count, mode, admission, handoversFor(seed)) };
};
/** The runs in order: the replays, the seeds given, then (with --minutes) seeds 1, 2, … until the deadline. */
function* runs(): Generator<{ seed: number; mode: Mode; admission: boolean; operations: readonly Operation[] }> {
  for (const replay of replays) yield { ...replay, admission: replay.admission && served };
  for (const seed of seeds) yield seeded(seed);
  for (let seed = 1; deadline && Date.now() < deadline; seed++) yield seeded(seed);
}

if (adversary) {
  if (!served) throw new Error('the adversary needs MutatingAdmissionPolicies v1 (Kubernetes 1.36 and later)');
  let failed = 0;
  const found: AdversaryResult[] = [];
  try {
    const adversarySeeds = function* () {
      yield* seeds.length > 0 || deadline ? seeds : [1, 2];
      for (let seed = 1; deadline && Date.now() < deadline; seed++) yield seed;
    };
    for (const seed of adversarySeeds()) {
      const result = await runAdversary(cp, seed, generateAdversary(seed, count), protectOf(seed), log);
      found.push(result);
      for (const v of result.violations) log(`VIOLATION (${v.invariant}) seed ${seed} (adversary): ${v.detail}`);
      if (result.violations.length > 0) failed++;
      if (abort.signal.aborted) break;
    }
  } finally {
    await cp.stop();
  }
  const ops = found.reduce((n, r) => n + r.tenant.ops, 0);
  const refused = found.reduce((n, r) => n + r.tenant.refused, 0);
  log(
    `adversary: ${found.length} runs, ${ops} tenant operations (${refused} refused under deny), ${
      found.reduce((n, r) => n + r.creates, 0)
    } creates, none refused by labeller's policies unless said; without protection labeller's value back within ${
      Math.max(0, ...found.flatMap((r) => r.restoredMs))
    } ms of a change`,
  );
  console.log(`${found.length - failed} passed, ${failed} failed`);
  process.exit(failed > 0 ? 1 : 0);
}

const results: RunResult[] = [];
try {
  for (const { seed, mode, admission, operations } of runs()) {
    const result = await run(cp, seed, operations, log, mode, admission);
    results.push(result);
    if (result.violations.length > 0) {
      const file = join(
        tmpdir(),
        `labeller-chaos-seed-${seed}${mode === 'sharded' ? '-sharded' : ''}${admission ? '-admission' : ''}.json`,
      );
      writeFileSync(
        file,
        JSON.stringify({ seed, mode, admission, operations, violations: result.violations }, null, 2),
      );
      for (const v of result.violations) {
        log(`VIOLATION (${v.invariant}) seed ${seed} (${mode}${admission ? ', admission' : ''}): ${v.detail}`);
      }
      log(`operations: ${operations.map((o) => JSON.stringify(o)).join(' ')}`);
      log(`replay: npm run chaos -- --replay ${file}`);
    }
    if (abort.signal.aborted) break;
  }
} finally {
  await cp.stop();
}
const failed = results.filter((r) => r.violations.length > 0).length;
log(
  `${results.length} runs, ${
    results.reduce((n, r) => n + r.operations.filter((o) => o.op !== 'pause').length, 0)
  } operations, ${results.reduce((n, r) => n + r.restarts, 0)} restarts, ${
    results.reduce((n, r) => n + r.violations.length, 0)
  } violations`,
);
const admitted = results.filter((r) => r.admission);
if (admitted.length > 0) {
  const sum = (count: (r: RunResult) => number) => admitted.reduce((n, r) => n + count(r), 0);
  const lags = admitted.flatMap((r) => r.reloadLags).sort((a, b) => a - b);
  log(
    `${admitted.length} runs with admission policies: ${sum((r) => r.creates.judged)} of ${
      sum((r) => r.creates.made)
    } creates and ${sum((r) => r.probes.judged)} of ${
      sum((r) => r.probes.made)
    } dry-run creates judged at their create; ${lags.length} reloads seen enforced in a namespace${
      lags.length > 0
        ? `, ${(lags[lags.length >> 1]! / 1000).toFixed(1)} s after the file changed (median), ${
          (lags.at(-1)! / 1000).toFixed(1)
        } s at most`
        : ''
    }`,
  );
}
console.log(`${results.length - failed} passed, ${failed} failed`);
process.exitCode = failed > 0 ? 1 : 0;
