// One controller of --peers measured from outside, whatever it is written in and however little
// it logs: spawned over N unlabelled objects and timed until all carry the label, its CPU and
// peak RSS read from /proc; then spawned again over the labelled objects, its RSS read once its
// cache is synced and it has settled, and its PATCH requests of that run counted.
//
// Which objects are labelled is read from the API server's audit log, which the control plane
// writes for every request anyway: the controller's successful PATCHes in its namespace, one
// distinct object each, read as the log grows (only lines written since the spawn are parsed,
// about one per object). That costs the measured API server nothing; a watch on the label
// would make it encode and send a second event per object (up to 9 % more server CPU for
// labeller's own watch, bench/README.md), and listing often enough to time a 20 s run would scan
// the namespace every few hundred ms. The end is confirmed as for labeller (converged.ts): a
// metadata-only list for objects without the label, every 5 s until the count reaches N and
// then once.
import type { MetadataApi } from '../../src/kube/api.ts';
import { type AuditEvent, auditTail } from '../../test/cluster/audit.ts';
import { type Child, describeExit } from '../../test/process/child.ts';
import { lineSplitter } from '../../test/process/lines.ts';
import { procSample, ProcSampler } from '../../test/process/procstat.ts';
import { sleep } from '../../test/process/sleep.ts';
import { startChild, stopChild } from './children.ts';
import type { Bench } from './context.ts';
import { converged, type Converging } from './converged.ts';
import { load1, mib, seconds } from './report.ts';

/** How a controller is started; the bench adds nothing to `args`. */
export interface ControllerCommand {
  readonly name: string;
  readonly command: readonly [string, ...string[]];
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  /** Matches the line of its stderr that says its cache holds the listed objects. */
  readonly synced: RegExp;
}

export interface OutsideResults {
  /** Spawn → the end of the last PATCH that labelled an object. */
  readonly seconds: number;
  /** utime + stime from spawn to that PATCH. */
  readonly cpuSeconds: number | undefined;
  readonly peakRss: number;
  /** Successful PATCHes while converging (1 per object at best). */
  readonly patches: number;
  readonly exitCode: number | null;
  /** The restart: spawn → its synced line, VmRSS after settling, its PATCH requests (any answer). */
  readonly restartSyncedSeconds: number;
  readonly restartRss: number | undefined;
  readonly restartPatches: number;
  readonly restartExitCode: number | null;
  readonly load: number;
}

/** The user agents of the bench's own clients (creating objects, confirming lists), not counted. */
const BENCH_AGENT = 'labeller-bench';

/** PATCH requests in `namespace` by anyone but the bench, from the audit log as it grows from now. */
class Patches {
  readonly #tail: () => AuditEvent[];
  /** The objects a successful PATCH went to. */
  readonly labelled = new Set<string>();
  requests = 0;
  succeeded = 0;
  /** Epoch ms when the last successful one completed. */
  last = 0;

  constructor(auditLog: string, namespace: string) {
    this.#tail = auditTail(
      auditLog,
      (e) =>
        e.verb === 'patch' && e.stage === 'ResponseComplete' && e.objectRef?.namespace === namespace &&
        !(e.userAgent ?? '').startsWith(BENCH_AGENT),
    );
  }

  read(): this {
    for (const event of this.#tail()) {
      this.requests++;
      const code = event.responseStatus?.code ?? 0;
      if (code < 200 || code >= 300 || !event.objectRef?.name) continue;
      this.succeeded++;
      this.labelled.add(event.objectRef.name);
      this.last = Math.max(this.last, Date.parse(event.stageTimestamp ?? ''));
    }
    return this;
  }
}

/** A controller process, its stderr's lines watched for `synced`. */
class Run {
  readonly controller: ControllerCommand;
  readonly child: Child;
  readonly spawnedAt = Date.now();
  syncedAt: number | undefined;

  constructor(controller: ControllerCommand, kubeconfig: string) {
    this.controller = controller;
    const [command, ...prefix] = controller.command;
    this.child = startChild(command, [...prefix, ...controller.args], {
      env: { KUBECONFIG: kubeconfig, ...controller.env },
      onStderr: lineSplitter((line) => {
        if (this.syncedAt === undefined && controller.synced.test(line)) this.syncedAt = Date.now();
      }),
      outputLimit: 4000,
    });
  }

  get pid(): number {
    if (this.child.pid === undefined) throw new Error(`${this.controller.name} did not start`);
    return this.child.pid;
  }

  /** Throws if it has exited (`when` says at which point). */
  assertRunning(when: string): void {
    const exit = this.child.exit;
    if (exit) {
      throw new Error(`${this.controller.name} exited ${when} (${describeExit(exit)})\n${exit.stderr.slice(-3000)}`);
    }
  }
}

/** Both runs of `controller` over the `n` objects `api` lists; `selector` matches those not yet labelled. */
export async function measureOutside(
  bench: Bench,
  controller: ControllerCommand,
  api: MetadataApi,
  selector: string,
  n: number,
): Promise<OutsideResults> {
  const { controlPlane, signal, log } = bench;

  log(`${controller.name}: cold, ${n} objects`);
  const patches = new Patches(controlPlane.auditLog, api.namespace);
  const cold = new Run(controller, controlPlane.kubeconfig);
  const proc = new ProcSampler(cold.pid);
  const following: Converging = {
    assertRunning: () => cold.assertRunning('before labelling every object'),
    get stderr() {
      return cold.child.stderr;
    },
    counts: {
      get applied() {
        return patches.read().labelled.size;
      },
    },
  };
  try {
    await converged(following, [api], selector, n, 120_000 + n * 30, signal);
  } finally {
    proc.sample();
    proc.stop();
  }
  patches.read();
  const coldExit = await stopChild(cold.child);
  const convergedAt = patches.last || Date.now();
  const cpuSeconds = proc.cpuAt(convergedAt);
  log(
    `${controller.name}: converged in ${seconds((convergedAt - cold.spawnedAt) / 1000)}, CPU ${
      cpuSeconds?.toFixed(2) ?? '?'
    } s, peak RSS ${mib(proc.peakRss)}, ${patches.succeeded} PATCH`,
  );

  log(`${controller.name}: restart over the labelled objects`);
  const again = new Patches(controlPlane.auditLog, api.namespace);
  const restarted = new Run(controller, controlPlane.kubeconfig);
  for (const deadline = Date.now() + 120_000 + n * 5; restarted.syncedAt === undefined;) {
    restarted.assertRunning('before its cache was synced');
    if (Date.now() > deadline) {
      throw new Error(
        `${controller.name}: no line matching ${controller.synced}\n${restarted.child.stderr.slice(-3000)}`,
      );
    }
    await sleep(50, signal);
  }
  // Every object is reconciled from the cache right after the list; let that happen, then read.
  await sleep(3000 + n / 5, signal);
  restarted.assertRunning('after its restart');
  const atRest = procSample(restarted.pid);
  again.read();
  const restartExit = await stopChild(restarted.child);
  const results: OutsideResults = {
    seconds: (convergedAt - cold.spawnedAt) / 1000,
    cpuSeconds,
    peakRss: proc.peakRss,
    patches: patches.succeeded,
    exitCode: coldExit.code,
    restartSyncedSeconds: (restarted.syncedAt - restarted.spawnedAt) / 1000,
    restartRss: atRest?.rss,
    restartPatches: again.requests,
    restartExitCode: restartExit.code,
    load: load1(),
  };
  log(
    `${controller.name}: synced ${seconds(results.restartSyncedSeconds)} after its restart, RSS ${
      atRest ? mib(atRest.rss) : '?'
    }, ${results.restartPatches} PATCH`,
  );
  return results;
}
