// One writer at a time across a leader handover. Replicas with conflicting label values (so any
// overlap would show as a fight) and `--conflicts force`, each under its own ServiceAccount so the
// audit log tells them apart, each behind its own fault proxy. A churn of foreign label changes
// keeps the leader patching. Each trial ends the leader's reign one of two ways:
//   delay:   its traffic is delayed through the proxy so renewals miss the renew deadline;
//   sigterm: it is sent SIGTERM mid-burst (it drains, renewing, then releases; a renewal that misses
//            the deadline while it drains ends the lease instead, and the exit is still 0).
// A leader may also miss its deadline by itself on a starved machine: that handover is judged
// as well, and the test goes on until it has its trials of each fault.
// In every handover the audit log must show no PATCH from the old identity completed after the new
// leader's first PATCH was received.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { type AuditEvent, receivedAt } from '../cluster/audit.ts';
import { figure, stats } from '../process/figures.ts';
import {
  adminClient,
  auditSkip,
  auditTail,
  create,
  createNamespace,
  patchLabels,
  serviceAccountKubeconfig,
  skip,
} from './cluster.ts';
import { Labeller, type LogLine } from '../process/labeller.ts';
import { FaultProxy } from '../cluster/faultproxy.ts';
import { sleep } from '../process/sleep.ts';

const timings = ['--lease-duration', '5s', '--renew-deadline', '3s', '--retry-period', '500ms'];
const MARGIN_MS = 5000 - 3000;
// One way, so a renewal round (GET and PUT, each a round trip) takes 3.2 s: past the deadline.
// Well below the margin: a PATCH sent just before the deadline still lands before any takeover,
// even from a process whose timers run late on a loaded machine.
const DELAY_MS = 800;
const TRIALS = 20;
const OBJECTS = 60;

interface Replica {
  readonly labeller: Labeller;
  readonly proxy: FaultProxy;
  readonly username: string;
}

/** How the old leader's reign ended: the test's two faults, or a renew deadline missed on a starved machine. */
type Mode = 'delay' | 'sigterm' | 'by itself';

interface Trial {
  readonly mode: Mode;
  /** From the old leader's last PATCH completed to the new leader's first PATCH received. */
  readonly gapMs: number;
  readonly oldPatches: number;
  readonly overlapping: number;
  /** From the fault to the new leader's first PATCH. */
  readonly handoverMs: number;
}

const completedAt = (e: AuditEvent): number => Date.parse(e.stageTimestamp ?? e.requestReceivedTimestamp ?? '');

describe('leader handover', { skip }, () => {
  test(
    `no PATCH from the old leader after the new leader's first, in ${TRIALS} handovers (delayed renewals, SIGTERM mid-burst)`,
    { skip: auditSkip, timeout: 240_000 },
    async (t) => {
      const ns = await createNamespace('handover');
      const admin = await adminClient();
      await Promise.all(
        Array.from(
          { length: OBJECTS },
          (_, i) => create(`/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: `cm-${i}` } }),
        ),
      );
      const rules = [
        { apiGroups: [''], resources: ['configmaps'], verbs: ['list', 'watch', 'patch'] },
        // Leader election, and the field-manager guard (which lets replicas of one group differ).
        {
          apiGroups: ['coordination.k8s.io'],
          resources: ['leases'],
          verbs: ['get', 'list', 'create', 'update', 'delete'],
        },
      ];
      let started = 0;
      const replica = async (): Promise<Replica> => {
        const n = started++;
        const proxy = await FaultProxy.start(admin.server);
        const kubeconfig = await serviceAccountKubeconfig(ns, `replica-${n}`, rules, proxy.url);
        const labeller = new Labeller([
          '--kinds',
          'configmaps',
          '--namespace',
          ns,
          '--label',
          `team=replica-${n}`,
          '--conflicts',
          'force',
          '--leader-elect',
          '--leader-election-namespace',
          ns,
          ...timings,
          // A line per write (debug): the faults come right after one of the leader's PATCHes.
          '--log-level',
          'debug',
        ], { kubeconfig });
        return { labeller, proxy, username: `system:serviceaccount:${ns}:replica-${n}` };
      };
      const newPatches = auditTail((e) =>
        e.verb === 'patch' && e.objectRef?.namespace === ns && e.objectRef.resource === 'configmaps'
      );
      const patches: AuditEvent[] = [];
      const patchesBy = (username: string): AuditEvent[] => {
        patches.push(...newPatches());
        return patches.filter((e) => e.user?.username === username);
      };

      // Foreign label changes, about 40 a second, so the leader is always patching.
      let churning = true;
      const churn = (async () => {
        for (let i = 0; churning; i++) {
          await patchLabels(`/api/v1/namespaces/${ns}/configmaps/cm-${i % OBJECTS}`, { team: `user-${i}` }, 'churn')
            .catch(() => {});
          await sleep(25);
        }
      })();

      const everyone: Replica[] = [];
      const trials: Trial[] = [];
      try {
        let leader = await replica();
        everyone.push(leader);
        await leader.labeller.waitForLog((l) => l.msg === 'became leader');
        // Two standbys, so a fresh one has started by the time it is needed.
        const standbys = [await replica(), await replica()];
        everyone.push(...standbys);
        for (let i = 1; trials.filter((x) => x.mode !== 'by itself').length < TRIALS; i++) {
          assert.ok(
            i <= TRIALS * 2,
            `too many handovers without a fault: ${trials.filter((x) => x.mode === 'by itself').length}`,
          );
          await Promise.any(standbys.map((s) => s.labeller.waitForLog((l) => l.msg === 'initial list complete')));
          // Mid-burst: right after one of the leader's PATCHes. A leader starved of CPU (a loaded
          // machine) may miss its renew deadline by itself first: that handover is judged too.
          const lost = (l: LogLine): boolean => l.msg === 'lost leadership';
          const from = leader.labeller.logs.length;
          const lostByItself = leader.labeller.logs.some(lost) ||
            lost(await leader.labeller.waitForLog((l) => l.msg === 'labels applied' || lost(l), 10_000, from));
          const designed = trials.filter((x) => x.mode !== 'by itself').length;
          const mode: Mode = lostByItself ? 'by itself' : designed % 2 === 0 ? 'delay' : 'sigterm';
          const faultAt = Date.now();
          if (mode === 'delay') leader.proxy.delay(DELAY_MS);
          else if (mode === 'sigterm') leader.labeller.process.kill('SIGTERM');
          const next = await Promise.any(
            standbys.map((s) => s.labeller.waitForLog((l) => l.msg === 'became leader', 20_000).then(() => s)),
          );
          const old = leader;
          leader = next;
          // A new standby starts while this trial is judged.
          standbys.splice(standbys.indexOf(next), 1, await replica());
          everyone.push(...standbys.filter((s) => !everyone.includes(s)));

          const exit = await old.labeller.exited;
          assert.equal(
            exit.code,
            mode === 'sigterm' ? 0 : 1,
            `${mode}: exit ${exit.code}\n${exit.stderr.slice(-2000)}`,
          );
          // Draining after SIGTERM it releases the lease, or, on a loaded machine, loses it when a
          // renewal misses the deadline; either way it stops writing and exits 0.
          const ended = mode === 'sigterm' ? ['released leadership', 'lost leadership'] : ['lost leadership'];
          assert.ok(old.labeller.logs.some((l) => ended.includes(l.msg)), `${mode}: the old leader's log`);
          // Bytes still inside the proxy reach the API server before it is closed.
          await sleep(DELAY_MS + 500);
          await old.proxy.close();

          const newFirst = Math.min(...patchesBy(next.username).map(receivedAt));
          assert.ok(Number.isFinite(newFirst), `${mode}: the new leader patched`);
          const oldPatches = patchesBy(old.username);
          const lastOld = Math.max(...oldPatches.map(completedAt));
          const overlapping = oldPatches.filter((e) => completedAt(e) >= newFirst).length;
          trials.push({
            mode,
            gapMs: newFirst - lastOld,
            oldPatches: oldPatches.length,
            overlapping,
            handoverMs: newFirst - faultAt,
          });
          t.diagnostic(
            `handover ${i} [${mode}]: old leader's last PATCH → new leader's first ${
              newFirst - lastOld
            } ms; ${overlapping} old PATCHes after it; new leader's first PATCH ${
              newFirst - faultAt
            } ms after the fault`,
          );
        }
      } finally {
        churning = false;
        await churn;
        for (const r of everyone) r.labeller.kill();
        await Promise.all(everyone.map((r) => r.proxy.close()));
      }

      for (const mode of ['delay', 'sigterm', 'by itself'] as const) {
        const of = trials.filter((x) => x.mode === mode);
        if (of.length === 0) continue;
        const gap = stats(of.map((x) => x.gapMs));
        const handover = stats(of.map((x) => x.handoverMs));
        figure(
          t,
          `handover [${mode}], ${of.length} trials: 0 overlapping PATCHes in ${
            of.filter((x) => x.overlapping === 0).length
          }; old leader's last PATCH → new leader's first: min ${gap.min} ms, median ${gap.median} ms, max ${gap.max} ms; fault → new leader's first PATCH median ${handover.median} ms (max ${handover.max} ms)`,
        );
      }
      assert.ok(trials.every((x) => x.oldPatches > 0), 'every old leader was patching before the fault');
      assert.deepEqual(
        trials.map((x) => x.overlapping),
        trials.map(() => 0),
        `PATCHes from the old identity after the new leader's first, per trial (margin ${MARGIN_MS} ms, delay ${DELAY_MS} ms)`,
      );
    },
  );
});
