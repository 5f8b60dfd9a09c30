// The long soak: `npm run soak -- --minutes 10 [--restart-every 150] [--drop-every 15] [--ops 10]`.
// Starts its own control plane, churns objects under a running labeller while its connections are
// dropped and the API server restarts, then checks the result and prints the figures.
// Exit status 0 when the cluster converged exactly and memory stayed flat, 1 otherwise.
import { parseArgs } from 'node:util';
import { startControlPlane } from '../controlplane/controlplane.ts';
import { describeSoak, soak } from './soak.ts';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '10' },
    'restart-every': { type: 'string', default: '150' },
    'drop-every': { type: 'string', default: '15' },
    ops: { type: 'string', default: '10' },
    'max-growth': { type: 'string', default: '40' },
  },
});
const minutes = Number(values.minutes);
const maxGrowth = Number(values['max-growth']);
const abort = new AbortController();
process.once('SIGINT', () => abort.abort());
const started = Date.now();
const cp = await startControlPlane(abort.signal);
let status = 1;
try {
  console.log(
    `soak: control plane at ${cp.server}; ${minutes} min of churn, connections dropped every ${
      values['drop-every']
    } s, API server restarted every ${values['restart-every']} s`,
  );
  const result = await soak({
    controlPlane: cp,
    durationMs: minutes * 60_000,
    dropEveryMs: Number(values['drop-every']) * 1000,
    restartEveryMs: Number(values['restart-every']) * 1000,
    opsPerSecond: Number(values.ops),
    log: (line) => console.log(line),
  });
  for (const line of describeSoak(result, minutes)) console.log(line);
  // RSS every 30 s, to see the trend and not just the two ends.
  console.log(
    `soak RSS by 30 s (MiB): ${result.rss.samples.filter((_, i) => i % 30 === 0).map((v) => v.toFixed(0)).join(' ')}`,
  );
  const growth = result.rss.endMiB - result.rss.startMiB;
  const problems = [
    ...(result.exitCode === 0 ? [] : [`labeller exited ${result.exitCode}:\n${result.stderrTail}`]),
    ...result.wrong.slice(0, 10).map((w) => `wrong labels: ${w}`),
    ...result.unexpected.slice(0, 10).map((u) => `unexpected: ${u}`),
    ...(growth < maxGrowth ? [] : [`memory grew ${growth.toFixed(0)} MiB (limit ${maxGrowth})`]),
  ];
  for (const p of problems) console.error(`soak FAILED: ${p}`);
  status = problems.length === 0 ? 0 : 1;
  console.log(`soak ${status === 0 ? 'passed' : 'FAILED'} in ${((Date.now() - started) / 60_000).toFixed(1)} min`);
} finally {
  await cp.stop();
}
process.exit(status);
