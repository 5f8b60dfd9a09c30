// `npm run chaos`: seeded runs of the chaos scenario (scenario.ts) on one full test control plane,
// each reporting the invariants it broke. A run that breaks one writes its operations to a file
// and prints how to replay them; a violation found and fixed keeps its operations in regressions/.
//
//   npm run chaos                          seeds 1, 2, 3, 30 operations each
//   npm run chaos -- --seeds 7,8 --ops 60  those seeds, 60 operations each
//   npm run chaos -- --minutes 30          seeds 1, 2, 3, … until 30 minutes are over
//   npm run chaos -- --mode sharded …      the seeds with shard members instead of a leader
//                                          (scenario.ts; a seed draws other operations there)
//   npm run chaos -- --replay FILE,FILE    the operations a failed run wrote (or a regression), again,
//                                          in the mode the file names (leader if none); with
//                                          --seeds, those seeds after them
import { readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startControlPlane } from '../controlplane/controlplane.ts';
import { generate, type Mode, type Operation, run, type RunResult } from './scenario.ts';

const { values } = parseArgs({
  options: {
    seeds: { type: 'string' },
    ops: { type: 'string', default: '30' },
    minutes: { type: 'string' },
    replay: { type: 'string' },
    mode: { type: 'string', default: 'leader' },
  },
});
if (values.mode !== 'leader' && values.mode !== 'sharded') {
  throw new Error(`--mode leader or sharded, not ${values.mode}`);
}
const mode: Mode = values.mode;
const log = (line: string) => console.log(`[chaos ${new Date().toISOString().slice(11, 19)}] ${line}`);
const count = Number(values.ops);
const deadline = values.minutes === undefined ? undefined : Date.now() + Number(values.minutes) * 60_000;
const replays = (values.replay?.split(',') ?? []).map((file) => {
  const replay = JSON.parse(readFileSync(file, 'utf8')) as { seed: number; mode?: Mode; operations: Operation[] };
  return { ...replay, mode: replay.mode ?? 'leader' };
});
const seeds = (values.seeds ?? (replays.length > 0 || deadline ? '' : '1,2,3')).split(',').filter(Boolean).map(Number);
/** The runs in order: the replays, the seeds given, then (with --minutes) seeds 1, 2, … until the deadline. */
function* runs(): Generator<{ seed: number; mode: Mode; operations: readonly Operation[] }> {
  yield* replays;
  for (const seed of seeds) yield { seed, mode, operations: generate(seed, count, mode) };
  for (let seed = 1; deadline && Date.now() < deadline; seed++) {
    yield { seed, mode, operations: generate(seed, count, mode) };
  }
}

const abort = new AbortController();
process.once('SIGINT', () => abort.abort());
const cp = await startControlPlane(abort.signal, { full: true });
log(`full control plane at ${cp.server}`);
const results: RunResult[] = [];
try {
  for (const { seed, mode, operations } of runs()) {
    const result = await run(cp, seed, operations, log, mode);
    results.push(result);
    if (result.violations.length > 0) {
      const file = join(tmpdir(), `labeller-chaos-seed-${seed}${mode === 'sharded' ? '-sharded' : ''}.json`);
      writeFileSync(file, JSON.stringify({ seed, mode, operations, violations: result.violations }, null, 2));
      for (const v of result.violations) log(`VIOLATION (${v.invariant}) seed ${seed} (${mode}): ${v.detail}`);
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
console.log(`${results.length - failed} passed, ${failed} failed`);
process.exitCode = failed > 0 ? 1 : 0;
