// Rows for labels that follow something other than the object: a change fanned out to every
// object that reads it (twice, each followed by the tight loop) against the tight loop's time for
// as many applies, the requests it took, a restart's PATCHes, and the heap the index that finds
// those objects adds per cached object. Two drivers: a namespace's label read by
// {{namespace.labels.team}} (--related, R rows), and an entry of a source of truth read by
// {{teams[namespace.labels.team].costCenter}} (--sources, S rows; bench/lib/sources.ts).
import { MetadataApi } from '../../src/kube/api.ts';
import { type AuditRequest, byVerb, fillsCache, formatVerbs } from '../../test/cluster/audit.ts';
import type { Labeller } from '../../test/process/labeller.ts';
import { cpuSeconds, processesWith, procSample } from '../../test/process/procstat.ts';
import { sleep } from '../../test/process/sleep.ts';
import type { Bench } from './context.ts';
import { converged } from './converged.ts';
import { type IndexHeap, measureIndexHeap } from './indexheap.ts';
import { type Launch, startLabeller, TEAM } from './launch.ts';
import { applyAll, loopLabels } from './loop.ts';
import { createNamespace } from '../../test/cluster/cluster.ts';
import { createObjects, KINDS } from './objects.ts';
import { bytes, type Row, seconds } from './report.ts';

export interface RelatedOptions extends Launch {
  readonly n: number;
  readonly concurrency: number;
  readonly createConcurrency: number;
}

/** What a fan-out measurement found. */
export interface FanOutResults {
  readonly n: number;
  /** The first labeller's spawn → its last PATCH (every object labelled from the namespace's label). */
  coldSeconds?: number;
  /** Namespace label changed → the last PATCH of the fan-out completed; twice (a→b, b→c). */
  fanOutSeconds?: number[];
  /** Requests of both fan-outs, by verb, their successful PATCHes, and their lists (streaming ones too). */
  fanOutRequests?: Record<string, number>;
  fanOutPatches?: number;
  fanOutLists?: number;
  /** The tight loop after each fan-out (labeller stopped). */
  loopSeconds?: number[];
  /** CPU seconds of the API server and etcd, and of labeller (fan-outs) or this process (loops). */
  fanOutCpu?: number[];
  loopCpu?: number[];
  restartPatches?: number;
  restartRequests?: Record<string, number>;
}

export interface RelatedResults extends FanOutResults {
  /** Heap per object: the controller reference kept for owner and root templates, and the two indexes. */
  heap?: IndexHeap | undefined;
}

/** What a fan-out measurement changes, and how labeller is told to follow it. */
export interface FanOutDriver {
  /** Names the measurement in log lines: "related", "sources". */
  readonly name: string;
  /** Sets up what the objects of `namespace` follow, with the value `a` (before the objects exist). */
  prepare(bench: Bench, namespace: string): Promise<void>;
  /** labeller's arguments that make it label TEAM from what it follows. */
  labelArgs(namespace: string): string[];
  /** Changes what the objects follow, so that their TEAM label should become `value`. */
  set(bench: Bench, namespace: string, value: string): Promise<unknown>;
  /** Kinds besides the labelled ones whose first list a restart waits for. */
  readonly alsoListed: readonly string[];
}

/** Labels from namespaces: the --related driver. */
export const namespaceLabel: FanOutDriver = {
  name: 'related',
  prepare: (bench, namespace) => createNamespace(bench.admin, namespace, { team: 'a' }),
  labelArgs: () => ['--label', `${TEAM}={{namespace.labels.team}}`],
  set: (bench, namespace, team) =>
    bench.admin.json('PATCH', `/api/v1/namespaces/${namespace}`, {
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ metadata: { labels: { team } } }),
    }),
  alsoListed: ['Namespace'],
};

export function benchRelated(bench: Bench, options: RelatedOptions): Promise<RelatedResults> {
  const heap = measureIndexHeap(options.n);
  if (heap) {
    bench.log(
      `relation indexes: ${bytes(heap.indexes)}/object (by namespace ${bytes(heap.byNamespace)}, by owner uid ${
        bytes(heap.byOwner)
      }), controller reference ${bytes(heap.ownerRef)}/object`,
    );
  }
  return fanOut(bench, options, namespaceLabel, { n: options.n, heap });
}

/** Two fan-outs of `driver`'s change over N objects, each followed by the tight loop, and a restart between them. */
export async function fanOut<R extends FanOutResults>(
  bench: Bench,
  options: RelatedOptions,
  driver: FanOutDriver,
  results: R,
): Promise<R> {
  const { admin, controlPlane, audit, resources, signal, log } = bench;
  const namespace = `labeller-${driver.name}-${Date.now().toString(36)}`;
  await driver.prepare(bench, namespace);
  log(`${driver.name}: creating ${options.n} objects in ${namespace}`);
  const objects = await createObjects(admin, namespace, options.n, options.createConcurrency, signal);
  const apis = [...resources.values()].map((r) => new MetadataApi(admin, r, namespace));
  const args = [
    '--kubeconfig',
    controlPlane.kubeconfig,
    '--kinds',
    KINDS.map((k) => k.resource).join(','),
    ...driver.labelArgs(namespace),
    '--namespace',
    namespace,
    '--concurrency',
    String(options.concurrency),
    '--grace-period',
    '10s',
  ];
  /** Resolves when every object carries team=`team` (labeller having logged `applied` patches in all). */
  const labelled = (process: Labeller, team: string, applied: number): Promise<void> =>
    converged(process, apis, `${TEAM}!=${team}`, applied, 120_000 + options.n * 30, signal);

  // CPU as well as wall time: other work on the machine stretches wall times, much less the CPU
  // each side needs (the API server and etcd, and the client: the loop or labeller). Found before
  // any labeller runs: its --kubeconfig lies in the control plane's directory too.
  const server = processesWith(controlPlane.dir);
  const loop = async (when: string): Promise<[number, number]> => {
    const [serverBefore, clientBefore] = [cpuSeconds(server), process.cpuUsage()];
    const { seconds: took } = await applyAll(
      admin,
      resources,
      namespace,
      objects,
      loopLabels([TEAM]),
      'bench-related-loop',
      options.concurrency * KINDS.length,
      signal,
    );
    const usage = process.cpuUsage(clientBefore);
    const [ofServer, ofClient] = [cpuSeconds(server) - serverBefore, (usage.user + usage.system) / 1e6];
    log(
      `${driver.name}: tight loop ${when} ${seconds(took)}, CPU ${seconds(ofServer)} server + ${
        seconds(ofClient)
      } loop`,
    );
    return [took, ofServer + ofClient];
  };
  /** Changes the namespace's label to `team` under `labeller`: the seconds to the last PATCH it caused, the CPU, the requests. */
  const fanOut = async (labeller: Labeller, team: string): Promise<[number, number, AuditRequest[]]> => {
    const labellerCpu = (): number => procSample(labeller.pid)?.cpuSeconds ?? 0;
    const [serverBefore, clientBefore] = [cpuSeconds(server), labellerCpu()];
    const changedAt = Date.now();
    const applied = labeller.counts.applied;
    await driver.set(bench, namespace, team);
    await labelled(labeller, team, applied + options.n);
    const [ofServer, ofClient] = [cpuSeconds(server) - serverBefore, labellerCpu() - clientBefore];
    const requests = audit.requests(changedAt, Date.now());
    const took = lastPatch(requests, changedAt);
    log(
      `${driver.name}: fan-out to team=${team} in ${seconds(took)}, CPU ${seconds(ofServer)} server + ${
        seconds(ofClient)
      } labeller (${formatVerbs(byVerb(requests))})`,
    );
    return [took, ofServer + ofClient, requests];
  };

  // A field manager's first apply to fresh objects (which adds its managedFields entry) cost the
  // API server 13–19 % less CPU than its later ones in these runs: the fan-outs update labeller's
  // entry, so the loop runs once first, not counted, and its timed runs update its own. Two
  // fan-outs, each followed by the loop, as other work on the machine comes and goes; R1 is the
  // ratio of the sums.
  await loop('to give its field manager an entry (not counted)');
  const first = startLabeller(options, args);
  await labelled(first, 'a', options.n);
  results.coldSeconds = lastPatch(audit.requests(first.startedAt, Date.now()), first.startedAt);
  log(`${driver.name}: converged from spawn in ${seconds(results.coldSeconds)}`);
  const fanOuts = [await fanOut(first, 'b')];
  await first.stop('SIGTERM', 15_000);
  const loops = [await loop('after the first')];

  const second = startLabeller(options, args);
  for (const kind of [...KINDS.map((k) => k.kind), ...driver.alsoListed]) {
    await second.waitForLog((l) => l.msg === 'initial list complete' && l.kind === kind, 120_000 + options.n * 5);
  }
  await sleep(3000 + options.n / 5);
  const restart = audit.requests(second.startedAt, Date.now());
  results.restartRequests = byVerb(restart);
  results.restartPatches = restart.filter((r) => r.verb === 'patch').length;
  fanOuts.push(await fanOut(second, 'c'));
  await second.stop('SIGTERM', 15_000);
  loops.push(await loop('after the second'));

  results.loopSeconds = loops.map(([took]) => took);
  results.loopCpu = loops.map(([, cpu]) => cpu);
  results.fanOutSeconds = fanOuts.map(([took]) => took);
  results.fanOutCpu = fanOuts.map(([, cpu]) => cpu);
  const requests = fanOuts.flatMap(([, , r]) => r);
  results.fanOutRequests = byVerb(requests);
  results.fanOutPatches = requests.filter(patched).length;
  results.fanOutLists = requests.filter((r) => fillsCache(r.verb, r.uri)).length;
  return results;
}

const patched = (r: AuditRequest): boolean => r.verb === 'patch' && r.code !== undefined && r.code < 300;

/** Seconds from `from` (epoch ms) to the end of the last successful PATCH among `requests`. */
const lastPatch = (requests: readonly AuditRequest[], from: number): number =>
  (requests.filter(patched).reduce((t, r) => Math.max(t, r.completed ?? r.received), from) - from) / 1000;

export function relatedRows(r: RelatedResults, load: number | undefined): Row[] {
  const rows = fanOutRows(r, load, { prefix: 'R', change: 'Namespace label changed', in: 'in it' });
  if (r.heap) {
    rows.push({
      id: 'R4',
      measurement:
        `Heap of the relation indexes (by namespace, by owner uid), ${r.heap.objects} pods of 3-replica ReplicaSets in 20 namespaces, one cache`,
      result: `${bytes(r.heap.indexes)}/object (by namespace ${bytes(r.heap.byNamespace)}, by owner uid ${
        bytes(r.heap.byOwner)
      }; + ${bytes(r.heap.ownerRef)}/object for the controller reference kept when templates read owners)`,
      target: '≤ 64 B/object',
      verdict: r.heap.indexes <= 64 ? 'pass' : 'miss',
      load,
    });
  }
  return rows;
}

/** Rows 1–3 of a fan-out measurement: `prefix` R or S, `change` what changed, `in` where its objects are. */
export function fanOutRows(
  r: FanOutResults,
  load: number | undefined,
  words: { readonly prefix: string; readonly change: string; readonly in: string },
): Row[] {
  const rows: Row[] = [];
  const sum = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0);
  const list = (values: readonly number[]): string => values.map(seconds).join(' and ');
  const loops = r.loopSeconds === undefined ? undefined : sum(r.loopSeconds) / r.loopSeconds.length;
  const ratio = r.fanOutSeconds && loops ? sum(r.fanOutSeconds) / r.fanOutSeconds.length / loops : undefined;
  if (r.fanOutSeconds) {
    rows.push({
      id: `${words.prefix}1`,
      measurement:
        `${words.change} → all ${r.n} objects ${words.in} relabelled (twice, each followed by the tight loop)`,
      result: `${list(r.fanOutSeconds)}; tight loop of ${r.n} applies ${
        r.loopSeconds ? `${list(r.loopSeconds)} (after each)` : 'n/a'
      }; **${ratio?.toFixed(2) ?? 'n/a'}×** (cold convergence from spawn: ${
        r.coldSeconds === undefined || !loops
          ? 'n/a'
          : `${seconds(r.coldSeconds)}, ${(r.coldSeconds / loops).toFixed(2)}×`
      })${
        r.fanOutCpu && r.loopCpu
          ? `; CPU of the API server, etcd and the client: ${list(r.fanOutCpu)} against ${list(r.loopCpu)}, ${
            (sum(r.fanOutCpu) / sum(r.loopCpu)).toFixed(2)
          }×`
          : ''
      }`,
      target: '≤ 1.1× the tight loop',
      verdict: ratio === undefined ? '' : ratio <= 1.1 ? 'pass' : 'miss',
      load,
    });
  }
  if (r.fanOutRequests) {
    const changes = r.fanOutSeconds?.length ?? 1;
    const gets = r.fanOutRequests['get'] ?? 0;
    const lists = r.fanOutLists ?? 0;
    rows.push({
      id: `${words.prefix}2`,
      measurement: `Requests on the changes (${changes})`,
      result: `${formatVerbs(r.fanOutRequests)} (${
        ((r.fanOutPatches ?? 0) / r.n / changes).toFixed(2)
      } PATCH per object and change)`,
      target: '1 PATCH per object, 0 GET, 0 LIST',
      verdict: r.fanOutPatches === r.n * changes && gets === 0 && lists === 0 ? 'pass' : 'miss',
      load,
    });
  }
  if (r.restartPatches !== undefined) {
    rows.push({
      id: `${words.prefix}3`,
      measurement: 'Restart over the converged cluster: PATCH requests',
      result: `${r.restartPatches} (${formatVerbs(r.restartRequests ?? {})})`,
      target: '0',
      verdict: r.restartPatches === 0 ? 'pass' : 'miss',
      load,
    });
  }
  return rows;
}
