// --peers (issue 27): labeller side by side with labellers written on kube-rs, controller-runtime
// and @kubernetes/client-node for the comparison (bench/peers/), the Node floor (the least a Node
// program does for the job, bench/peers/node-floor/), and with the tight loop, one
// after another on one control plane. Each gets N ConfigMaps of its own in a fresh namespace,
// created as the main bench creates them, so each starts from the same state (the previous
// ones are deleted first), and applies one label at concurrency C. The table: time to converge
// from spawn, CPU and peak RSS (/proc), RSS after a restart with all N labelled and cached, and
// that restart's PATCH requests, with ratios to kube-rs and to the Node floor. With --rounds R, R
// batches, each in the opposite order of the one before (the machine's load drifts), each row's
// ratios to the rows of its own batch.
import { ApiError, ConnectionError } from '../../src/apimachinery/errors.ts';
import { sleep } from '../../test/process/sleep.ts';
import type { Bench } from './context.ts';
import { TEAM } from './launch.ts';
import { tightLoop } from './loop.ts';
import { type ControllerCommand, measureOutside, type OutsideResults } from './outside.ts';
import { type Assignment, type ContenderId, contenders } from './peercommands.ts';
import { markdownTable, mib, seconds } from './report.ts';
import { setUp } from './setup.ts';

export interface PeersOptions {
  readonly n: number;
  /** Contenders left out (client-node at 100 000 objects: gigabytes and many minutes). */
  readonly without: readonly ContenderId[];
  readonly concurrency: number;
  readonly createConcurrency: number;
  /** Batches, every other one in reverse order. */
  readonly rounds: number;
}

export interface PeersResults {
  readonly n: number;
  readonly concurrency: number;
  readonly label: string;
  /** The tight loop of each batch: wall time and this process's CPU. */
  readonly loops: { batch: number; seconds: number; cpuSeconds: number; load: number }[];
  readonly controllers: (
    & { readonly id: ContenderId; readonly name: string; readonly batch: number; readonly command: ControllerCommand }
    & OutsideResults
  )[];
}

const VALUE = 'platform';

/** Runs the loop and each contender in turn, recording into `results` as it goes. */
export async function benchPeers(bench: Bench, options: PeersOptions, results: PeersResults): Promise<void> {
  const { admin, controlPlane, signal, log } = bench;
  const { n, concurrency } = options;
  const list = (await contenders(controlPlane.kubeconfig, log)).filter((c) => !options.without.includes(c.id));
  /** A fresh namespace with N ConfigMaps, once the server has finished creating them. */
  const fresh = async (prefix: string) => {
    const setup = await setUp(bench, n, options.createConcurrency, prefix);
    await sleep(2000, signal);
    return setup;
  };
  // deletecollection: the namespace itself would stay Terminating (no kube-controller-manager).
  // At 100 000 objects it outlasts a request's timeout (the server's 60 s, and the client's), so
  // it is sent again until the namespace holds none.
  const clear = async (namespace: string): Promise<void> => {
    const collection = `/api/v1/namespaces/${namespace}/configmaps`;
    const headers = { accept: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json' };
    for (;;) {
      try {
        await admin.json('DELETE', collection, { headers, timeoutMs: 120_000 });
      } catch (error) {
        if (!(error instanceof ConnectionError || (error instanceof ApiError && error.status === 504))) throw error;
      }
      const left = await admin.json<{ items: unknown[] | null }>('GET', collection, { headers, query: { limit: 1 } });
      if (!left.items?.length) return;
    }
  };

  for (let batch = 1; batch <= options.rounds; batch++) {
    const loopSetup = await fresh('labeller-peers-loop');
    const loop = await tightLoop(bench, loopSetup.namespace, loopSetup.objects, concurrency, { [TEAM]: VALUE });
    results.loops.push({ batch, seconds: loop.seconds, cpuSeconds: loop.cpuSeconds, load: loop.load });
    log(`batch ${batch}, tight loop: ${seconds(loop.seconds)}, CPU ${loop.cpuSeconds.toFixed(2)} s`);
    await clear(loopSetup.namespace);

    for (const contender of batch % 2 === 1 ? list : list.toReversed()) {
      const setup = await fresh('labeller-peers');
      const api = [...setup.apis.values()][0]!;
      const assignment: Assignment = { namespace: setup.namespace, key: TEAM, value: VALUE, concurrency };
      const command = contender.command(assignment);
      const measured = await measureOutside(bench, command, api, `${TEAM}!=${VALUE}`, n);
      results.controllers.push({ id: contender.id, name: contender.name, batch, command, ...measured });
      await clear(setup.namespace);
    }
  }
}

export function peersResults(options: PeersOptions): PeersResults {
  return { n: options.n, concurrency: options.concurrency, label: `${TEAM}=${VALUE}`, loops: [], controllers: [] };
}

/**
 * The table: one row per controller and batch, each figure with its ratios to kube-rs and to the
 * Node floor of the same batch (the least a Node program does for the job,
 * bench/peers/node-floor/): what labeller's own work costs is the gap to the second. labeller's
 * rows are set against the floor run with the image's flags where it ran, as their V8 settings
 * are the same; the other rows against the floor as Node runs it by default.
 */
export function peersTable(r: PeersResults): string {
  type Figures = { seconds: number; cpuSeconds: number | undefined; peakRss: number };
  const find = (id: ContenderId, batch: number) => r.controllers.find((c) => c.id === id && c.batch === batch);
  const floorFor = (id: ContenderId | 'loop', batch: number) =>
    (id.startsWith('labeller') ? find('node-floor-image', batch) : undefined) ?? find('node-floor', batch);
  const ratio = (x: number | undefined, to: number | undefined): string =>
    x === undefined || !to ? '–' : `${(x / to).toFixed(2)}×`;
  /** `figure (× kube-rs / × floor)`. */
  const cell = (
    shown: string,
    pick: (c: Figures) => number | undefined,
    x: number | undefined,
    against: readonly (Figures | undefined)[],
  ): string => {
    const ratios = against.filter((c) => c !== undefined).map((c) => ratio(x, pick(c)));
    return ratios.length === 0 ? shown : `${shown} (${ratios.join(' / ')})`;
  };
  const cpu = (s: number | undefined): string => (s === undefined ? 'n/a' : seconds(s));
  const rows = [];
  for (const loop of r.loops) {
    const against = [find('kube-rs', loop.batch), floorFor('loop', loop.batch)];
    rows.push([
      `tight loop: the same ${r.n} applies from the bench process (TypeScript, bench/lib/loop.ts), ${r.concurrency} in flight`,
      String(loop.batch),
      cell(seconds(loop.seconds), (c) => c.seconds, loop.seconds, against),
      cell(cpu(loop.cpuSeconds), (c) => c.cpuSeconds, loop.cpuSeconds, against),
      'n/a',
      'n/a',
      'n/a',
      loop.load.toFixed(2),
    ]);
  }
  const order = [...new Set(r.controllers.map((c) => c.id))];
  const sorted = r.controllers.toSorted((a, b) => order.indexOf(a.id) - order.indexOf(b.id) || a.batch - b.batch);
  for (const c of sorted) {
    const against = [find('kube-rs', c.batch), floorFor(c.id, c.batch)];
    rows.push([
      c.name,
      String(c.batch),
      cell(seconds(c.seconds), (b) => b.seconds, c.seconds, against),
      cell(cpu(c.cpuSeconds), (b) => b.cpuSeconds, c.cpuSeconds, against),
      cell(mib(c.peakRss), (b) => b.peakRss, c.peakRss, against),
      c.restartRss === undefined ? 'n/a' : mib(c.restartRss),
      String(c.restartPatches),
      c.load.toFixed(2),
    ]);
  }
  const kubeRs = r.controllers.some((c) => c.id === 'kube-rs');
  const floor = r.controllers.some((c) => c.id === 'node-floor');
  const against = [kubeRs && '× kube-rs', floor && '× Node floor'].filter((x) => typeof x === 'string');
  const unit = against.length === 0 ? '' : ` (${against.join(' / ')})`;
  return markdownTable([
    'controller',
    'batch',
    `time to converge${unit}`,
    `CPU${unit}`,
    `peak RSS${unit}`,
    `RSS after restart (${r.n} cached)`,
    'PATCH on restart',
    'load (1 min)',
  ], rows);
}

/** Notes under the table: exits that were not clean, PATCHes beyond one per object. */
export function peersNotes(r: PeersResults): string[] {
  const notes: string[] = [];
  for (const c of r.controllers) {
    if (c.exitCode !== 0 || c.restartExitCode !== 0) {
      notes.push(
        `${c.command.name} (batch ${c.batch}) exited with status ${c.exitCode} and ${c.restartExitCode} on SIGTERM`,
      );
    }
    if (c.patches !== r.n) {
      notes.push(`${c.command.name} (batch ${c.batch}) sent ${c.patches} successful PATCHes for ${r.n} objects`);
    }
  }
  return notes;
}
