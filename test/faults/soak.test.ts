// The short soak (about a minute of churn) on a control plane of its own: creates, updates,
// deletes and label removals across two kinds while every connection is dropped every 10 s and
// the API server restarts once. The full one is `npm run soak -- --minutes 10` (test/faults/longsoak.ts).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ControlPlane } from '../controlplane/controlplane.ts';
import { assertNoCrash } from '../process/crash.ts';
import { figure } from '../process/figures.ts';
import { startControlPlane } from '../controlplane/controlplane.ts';
import { ownSkip } from '../cluster/testrun.ts';
import { describeSoak, soak } from './soak.ts';

const SECONDS = Number(process.env['FAULTS_SOAK_SECONDS'] ?? 60);

describe('soak (short)', { skip: ownSkip }, () => {
  let cp: ControlPlane;
  before(async () => {
    cp = await startControlPlane();
  });
  after(() => cp?.stop());

  test(`${SECONDS} s of churn with dropped connections and an API server restart: exactly the desired labels, memory flat`, async (t) => {
    const result = await soak({
      controlPlane: cp,
      durationMs: SECONDS * 1000,
      dropEveryMs: 10_000,
      restartEveryMs: SECONDS * 500,
      opsPerSecond: 10,
      log: (line) => t.diagnostic(line),
    });
    for (const line of describeSoak(result, SECONDS / 60)) figure(t, line);
    assert.equal(result.exitCode, 0, result.stderrTail);
    assertNoCrash(result.stderrTail);
    assert.deepEqual(result.unexpected.slice(0, 10), [], 'no object recreated or lost');
    assert.deepEqual(result.wrong.slice(0, 10), [], 'every object carries exactly the desired labels');
    assert.ok(result.restarts >= 1 && result.drops >= 3, 'the watches were forced to reconnect');
    // Flat memory: a minute is short, so this only catches gross growth; the full soak says more.
    assert.ok(
      result.rss.endMiB - result.rss.startMiB < 40,
      `RSS ${result.rss.startMiB.toFixed(0)} → ${result.rss.endMiB.toFixed(0)} MiB`,
    );
  });
});
