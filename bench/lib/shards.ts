// --shards (rows SH1–SH5): replicas that all write, each its share of the namespaces (`--shards
// auto`, src/shard/), against one labeller. N ConfigMaps over N/100 namespaces on a control plane
// of the bench's own, labeller cluster-wide (no --namespace: a shard is a set of namespaces):
//   SH1  one member, cold: spawn → its last PATCH, CPU, peak RSS, bytes received from the API server;
//   SH2  three members started together, each run a full relabel (a label value of its own): spawn
//        of the first → the last PATCH, and per member what SH1 measures, against SH1's;
//   SH4  with the three converged, one killed (SIGKILL; the one writing the most namespaces): a new
//        ConfigMap in each of its namespaces, timed until all are labelled (the survivors take its
//        buckets once its Lease expires);
//   SH5  a member joining, another joining, one leaving (SIGTERM), each waited for until the
//        ranges settle: the PATCH requests of that window, on objects all converged;
//   SH3  on a second control plane with the ShardedListAndWatch gate off (the first stopped, so
//        the second runs alone as the first did), the same objects and three members again: the
//        whole stream reaches each member, which filters it (memory still follows the shard).
// Before the first run on each control plane, labeller's field manager applies a label to every
// object once, untimed, so that every run is a later apply (a manager's first is cheaper for the
// server). Who labelled what is read from the API server's audit log as it grows (labeller's
// successful PATCHes, one object each), as outside.ts does, and confirmed by a metadata-only list;
// kube-apiserver's and etcd's CPU is read from /proc alongside.
import { readFileSync } from 'node:fs';
import { KubeClient } from '../../src/kube/client.ts';
import type { Lease } from '../../src/kube/lease.ts';
import { LeaseApi } from '../../src/kube/lease.ts';
import { Layout } from '../../src/shard/layout.ts';
import { BUCKETS, bucketsOf, decodeBuckets } from '../../src/shard/ranges.ts';
import { type AuditEvent, auditTail } from '../../test/cluster/audit.ts';
import { type ControlPlane, startControlPlane } from '../../test/controlplane/controlplane.ts';
import { freePorts } from '../../test/controlplane/process.ts';
import { describeExit } from '../../test/process/child.ts';
import type { Labeller } from '../../test/process/labeller.ts';
import { cpuSeconds, processesWith, ProcSampler } from '../../test/process/procstat.ts';
import { sleep } from '../../test/process/sleep.ts';
import { controlPlanes } from './children.ts';
import type { Bench } from './context.ts';
import { FIELD_MANAGER, type Launch, startLabeller } from './launch.ts';
import { createObject, KINDS, pool, retrying } from './objects.ts';
import { load1, mib, type Row, seconds, table, verdict } from './report.ts';

export interface ShardsOptions extends Launch {
  readonly n: number;
  /** Namespaces named `shards-bench-NNNN`, the counter last (FNV-1a puts them in few buckets). */
  readonly sequentialNames: boolean;
  readonly concurrency: number;
  readonly createConcurrency: number;
}

/** One member's figures over a run (spawn → convergence). */
export interface MemberResults {
  readonly identity: string;
  /** The bench namespaces in the buckets it writes once converged, and their objects. */
  readonly namespaces: number;
  readonly objects: number;
  /** utime + stime from spawn to the run's last PATCH (/proc/<pid>/stat). */
  readonly cpuSeconds: number | undefined;
  /** VmHWM when convergence was confirmed. */
  readonly peakRss: number;
  /** rchar of /proc/<pid>/io from its `joining shard group` line to convergence. */
  readonly receivedBytes: number | undefined;
  /** labeller_shard_filtering of its ConfigMap cache: server or client. */
  readonly filtering: string | undefined;
}

export interface RunResults {
  /** The label value this run applied (each run relabels every object). */
  readonly label: string;
  /** Spawn of the first member → the end of the last PATCH that labelled a bench object. */
  readonly seconds: number;
  /** Successful PATCHes of bench objects (one per object at best). */
  readonly patches: number;
  /** kube-apiserver's and etcd's CPU over the same span (utime + stime, /proc). */
  readonly serverCpuSeconds: number | undefined;
  /** labeller's ConfigMap requests besides PATCH until convergence, by verb (lists and watches of all members). */
  readonly configMapRequests: Record<string, number>;
  readonly members: readonly MemberResults[];
  readonly load: number;
}

export interface KillResults {
  /** The killed member's bench namespaces, one new ConfigMap each. */
  readonly namespaces: number;
  /** Kill → the end of the last PATCH that labelled a new object. */
  readonly seconds: number;
  /** Kill → the first survivor's `shard ranges changed` that took buckets. */
  readonly takenSeconds: number | undefined;
  /** Kill → the new ConfigMaps all created. */
  readonly createdSeconds: number;
  /** labeller's PATCHes in the window: of the new objects, and of objects that were labelled before. */
  readonly newPatches: number;
  readonly otherPatches: number;
  readonly leaseDurationSeconds: number;
  readonly load: number;
  /** Per survivor, kill → each step of its takeover, from its log: where the time goes. */
  readonly survivors: readonly TakeoverSteps[];
}

/** `seconds`, or n/a when the step is not in the log. */
function optional(value: number | undefined): string {
  return value === undefined ? 'n/a' : seconds(value);
}

/** One survivor's takeover, seconds after the kill (undefined: not in its log). */
export interface TakeoverSteps {
  readonly identity: string;
  /** It judged the killed member's Lease expired. */
  readonly expiredSeconds: number | undefined;
  /** Its caches listed what the taken ranges add (ConfigMaps, the last cache to do so), and how many objects. */
  readonly listedSeconds: number | undefined;
  readonly added: number | undefined;
  /** It took buckets. */
  readonly takenSeconds: number | undefined;
  /** It relisted its whole share (the watch's version expired, say) instead. */
  readonly relistedSeconds: number | undefined;
}

export interface HandoverStep {
  readonly what: string;
  /** The step's start → every running member publishing what it wins among them, ready. */
  readonly settledSeconds: number;
  /** `shard ranges changed` lines in the step, all members. */
  readonly changes: number;
  readonly patches: number;
  /** Buckets without a running writer, or with two, until settled (Lease annotations, polled). */
  readonly coverage: Coverage;
}

export interface HandoverResults {
  readonly steps: readonly HandoverStep[];
  /** labeller's PATCH requests from the first step's start to the end of the wait after the last. */
  readonly patches: number;
  /** The wait after the last step: the reconciles of buckets taken over. */
  readonly waitSeconds: number;
  /** Requests of other verbs on ConfigMaps (lists and watches of caches that grew; a watch counted when it starts). */
  readonly configMapRequests: Record<string, number>;
  readonly load: number;
}

export interface ShardsResults {
  readonly n: number;
  readonly namespaces: number;
  /** How they are named, e.g. `shards-NNNN-bench`, and the equal buckets of the namespace hash space they fall in (the uniform layout). */
  readonly naming: string;
  readonly buckets: number;
  readonly concurrency: number;
  readonly leaseDurationSeconds: number;
  /** Creating the objects on each control plane. */
  setupSeconds: number[];
  /** The untimed first apply of labeller's field manager to every object, on each control plane. */
  warmUpSeconds: number[];
  single?: RunResults;
  three?: RunResults;
  kill?: KillResults;
  handover?: HandoverResults;
  clientSide?: RunResults;
}

const LABEL = 'bench.example.com/run';
/** Every bench object carries it (objects.ts), the control plane's own ConfigMaps do not. */
const BENCH_SELECTOR = 'app.kubernetes.io/managed-by=argocd';
const GROUP = 'bench-shards';
const LEASE_NAMESPACE = 'default';
/** labeller's default --leader-elect-lease-duration, which the members keep. */
const LEASE_DURATION_SECONDS = 15;
const CONFIGMAPS = KINDS.find((k) => k.resource === 'configmaps')!;
/** What a member publishes on its Lease (src/shard/membership.ts). */
const READY = 'labeller.io/shard-ready';
const WRITES = 'labeller.io/shard-writes';
const LAYOUT = 'labeller.io/shard-layout';

export function shardsResults(options: ShardsOptions): ShardsResults {
  const names = namespaceNames(options.n, options.sequentialNames);
  return {
    n: options.n,
    namespaces: names.length,
    naming: options.sequentialNames ? 'shards-bench-NNNN' : 'shards-NNNN-bench',
    buckets: new Set(names.map((name) => Layout.uniform.bucketOf(name))).size,
    concurrency: options.concurrency,
    leaseDurationSeconds: LEASE_DURATION_SECONDS,
    setupSeconds: [],
    warmUpSeconds: [],
  };
}

const namespaceCount = (n: number): number => Math.max(1, Math.ceil(n / 100));

/**
 * The bench's namespaces. The counter is not at the end of the name unless `sequential`: FNV-1a
 * (the API server's shardRange hash) barely moves the top byte of the hash for the last bytes of
 * a value, so names that differ only there share a bucket (1 000 `shards-bench-NNNN` fall in 13
 * of the 256).
 */
function namespaceNames(n: number, sequential: boolean): string[] {
  return Array.from({ length: namespaceCount(n) }, (_, i) => {
    const counter = String(i).padStart(4, '0');
    return sequential ? `shards-bench-${counter}` : `shards-${counter}-bench`;
  });
}

// ---------------------------------------------------------------- members

/** rchar of /proc/<pid>/io (bytes the process read: sockets, pipes and files), sampled from outside. */
class ReadSampler {
  readonly samples: { at: number; rchar: number }[] = [];
  readonly #pid: number;
  readonly #timer: ReturnType<typeof setInterval>;

  constructor(pid: number) {
    this.#pid = pid;
    this.sample();
    this.#timer = setInterval(() => this.sample(), 100);
  }

  sample(): number | undefined {
    try {
      const rchar = Number(/^rchar: (\d+)$/m.exec(readFileSync(`/proc/${this.#pid}/io`, 'utf8'))?.[1]);
      if (Number.isFinite(rchar)) {
        this.samples.push({ at: Date.now(), rchar });
        return rchar;
      }
    } catch {
      // gone
    }
    return undefined;
  }

  /** The last reading at or before `at`. */
  at(at: number): number | undefined {
    let value: number | undefined;
    for (const s of this.samples) if (s.at <= at) value = s.rchar;
    return value;
  }

  stop(): void {
    clearInterval(this.#timer);
  }
}

/** One labeller of the shard group, its /proc read from outside. */
class Member {
  readonly labeller: Labeller;
  readonly port: number;
  readonly proc: ProcSampler;
  readonly reads: ReadSampler;

  constructor(launch: Launch, args: readonly string[], port: number) {
    this.port = port;
    this.labeller = startLabeller(launch, [...args, '--metrics-bind-address', `127.0.0.1:${port}`]);
    this.proc = new ProcSampler(this.labeller.pid);
    this.reads = new ReadSampler(this.labeller.pid);
  }

  #joined(): { identity: string; lease: string; at: number } | undefined {
    const index = this.labeller.logs.findIndex((l) => l.msg === 'joining shard group');
    const line = this.labeller.logs[index];
    if (!line) return undefined;
    return { identity: String(line['identity']), lease: String(line['lease']), at: this.labeller.arrivals[index]! };
  }

  /** Its identity in the group, once it has joined. */
  async joined(signal: AbortSignal): Promise<{ identity: string; lease: string }> {
    await this.labeller.waitForLog((l) => l.msg === 'joining shard group', 120_000);
    signal.throwIfAborted();
    return this.#joined()!;
  }

  get identity(): string {
    return this.#joined()?.identity ?? '?';
  }

  /** Its Lease's name (in LEASE_NAMESPACE). */
  get leaseName(): string {
    return (this.#joined()?.lease ?? '').split('/').pop() ?? '';
  }

  /** Bytes read from its joining line to `at`: what the API server sent it, its own files loaded before. */
  receivedUntil(at: number): number | undefined {
    const joined = this.#joined();
    const from = joined && this.reads.at(joined.at);
    const to = this.reads.at(at);
    return from === undefined || to === undefined ? undefined : to - from;
  }

  /** labeller_shard_filtering of its caches, e.g. `server`. */
  async filtering(): Promise<string | undefined> {
    try {
      const text = await (await fetch(`http://127.0.0.1:${this.port}/metrics`)).text();
      const found = [...text.matchAll(/^labeller_shard_filtering\{[^}]*filtering="(\w+)"[^}]*\} 1$/gm)].map((m) =>
        m[1]
      );
      return [...new Set(found)].join(',') || undefined;
    } catch {
      return undefined;
    }
  }

  stopSampling(): void {
    this.proc.stop();
    this.reads.stop();
  }
}

/** kube-apiserver's and etcd's CPU, read every 500 ms from now until stopped. */
class ServerCpu {
  readonly #pids: number[];
  readonly #samples: { at: number; cpu: number }[] = [];
  readonly #timer: ReturnType<typeof setInterval>;

  constructor(dir: string) {
    this.#pids = processesWith(dir);
    const sample = () => this.#samples.push({ at: Date.now(), cpu: cpuSeconds(this.#pids) });
    sample();
    this.#timer = setInterval(sample, 500);
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#samples.push({ at: Date.now(), cpu: cpuSeconds(this.#pids) });
  }

  /** CPU used from `from` to `to` (epoch ms), each end interpolated between readings. */
  between(from: number, to: number): number | undefined {
    const at = (t: number): number | undefined => {
      const after = this.#samples.findIndex((s) => s.at >= t);
      if (after < 0) return this.#samples.at(-1)?.cpu;
      const b = this.#samples[after]!;
      const a = this.#samples[after - 1];
      if (!a || b.at === a.at) return b.cpu;
      return a.cpu + ((b.cpu - a.cpu) * (t - a.at)) / (b.at - a.at);
    };
    const [start, end] = [at(from), at(to)];
    return this.#pids.length === 0 || start === undefined || end === undefined ? undefined : end - start;
  }
}

/** A control plane's handles: its admin client, its audit log, and the member Leases. */
interface Plane {
  readonly controlPlane: ControlPlane;
  readonly admin: KubeClient;
  readonly leases: LeaseApi;
}

/** labeller's PATCH requests as the audit log grows, from now. */
class Patches {
  readonly #tail: () => AuditEvent[];
  /** Objects (namespace/name) a PATCH succeeded on, with when it completed. */
  readonly labelled = new Map<string, number>();
  requests = 0;
  readonly other: Record<string, number> = {};

  constructor(auditLog: string) {
    this.#tail = auditTail(
      auditLog,
      // A watch once when it starts (it completes only when it ends), every other request when it completes.
      (e) =>
        (e.verb === 'watch' ? e.stage === 'ResponseStarted' : e.stage === 'ResponseComplete') &&
        (e.userAgent ?? '').startsWith('labeller/'),
    );
  }

  read(): this {
    for (const event of this.#tail()) {
      const resource = event.objectRef?.resource ?? '';
      if (event.verb !== 'patch') {
        if (resource === 'configmaps') this.other[event.verb] = (this.other[event.verb] ?? 0) + 1;
        continue;
      }
      this.requests++;
      const code = event.responseStatus?.code ?? 0;
      if (code < 200 || code >= 300 || resource !== 'configmaps') continue;
      const key = `${event.objectRef?.namespace ?? ''}/${event.objectRef?.name ?? ''}`;
      this.labelled.set(key, Date.parse(event.stageTimestamp ?? '') || Date.now());
    }
    return this;
  }

  /** How many of `keys` were labelled, and when the last of them was. */
  of(keys: (key: string) => boolean): { count: number; last: number } {
    let count = 0;
    let last = 0;
    for (const [key, at] of this.labelled) {
      if (!keys(key)) continue;
      count++;
      last = Math.max(last, at);
    }
    return { count, last };
  }
}

/** Whether a bench object without `value` is left: a cluster-wide metadata-only list, one item. */
async function anyLeft(admin: KubeClient, value: string): Promise<boolean> {
  const page = await admin.json<{ items: unknown[] | null }>('GET', '/api/v1/configmaps', {
    headers: { accept: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json' },
    query: { labelSelector: `${BENCH_SELECTOR},${LABEL}!=${value}`, limit: 1 },
  });
  return (page.items?.length ?? 0) > 0;
}

/**
 * Waits until `want` objects matching `keys` are labelled (audit log), confirmed by a list finding
 * no bench object without `value` (also every 5 s before that); throws if a member exits.
 */
async function untilLabelled(
  plane: Plane,
  patches: Patches,
  keys: (key: string) => boolean,
  want: number,
  value: string,
  members: readonly Member[],
  timeoutMs: number,
  signal: AbortSignal,
): Promise<{ count: number; last: number }> {
  let listed = 0;
  for (const deadline = Date.now() + timeoutMs;;) {
    for (const m of members) m.labeller.assertRunning();
    signal.throwIfAborted();
    const done = patches.read().of(keys);
    if (done.count >= want || Date.now() - listed > 5000) {
      listed = Date.now();
      if (!(await anyLeft(plane.admin, value))) return patches.read().of(keys);
    }
    if (Date.now() > deadline) {
      throw new Error(
        `${done.count} of ${want} objects labelled ${LABEL}=${value} after ${Math.round(timeoutMs / 1000)} s\n${
          members.map((m) => m.labeller.stderr.slice(-1500)).join('\n---\n')
        }`,
      );
    }
    await sleep(200, signal);
  }
}

/** The member Leases of the group, by name. */
async function groupLeases(plane: Plane, signal: AbortSignal): Promise<Map<string, Lease>> {
  const leases = await plane.leases.list(LEASE_NAMESPACE, `labeller.io/shard-group=${GROUP}`, signal);
  return new Map(leases.map((l) => [l.metadata.name, l]));
}

const sameSet = (a: ReadonlySet<number>, b: ReadonlySet<number>): boolean =>
  a.size === b.size && [...a].every((x) => b.has(x));

/** Buckets no running member published as written, and published by more than one, while waiting. */
export interface Coverage {
  /** The most buckets seen without a writer at once, and for how long any was (polled every 250 ms). */
  unwrittenMax: number;
  unwrittenSeconds: number;
  /** The most buckets seen published by two running members at once. */
  doubleMax: number;
}

/**
 * Waits until every member of `running` is ready and publishes on its Lease that it writes what it
 * wins among them: the ranges have settled. Answers the time it took from `since`; `coverage`, if
 * given, is told of buckets nobody or two members wrote meanwhile.
 */
async function settled(
  plane: Plane,
  running: readonly Member[],
  since: number,
  timeoutMs: number,
  signal: AbortSignal,
  coverage?: Coverage,
): Promise<number> {
  const identities = running.map((m) => m.identity);
  let polled = Date.now();
  for (const deadline = Date.now() + timeoutMs;;) {
    for (const m of running) m.labeller.assertRunning();
    const leases = await groupLeases(plane, signal);
    const now = Date.now();
    const writes = running.map((m) => decodeBuckets(leases.get(m.leaseName)?.metadata.annotations?.[WRITES]));
    if (coverage) {
      const counts = new Map<number, number>();
      for (const set of writes) for (const b of set) counts.set(b, (counts.get(b) ?? 0) + 1);
      const unwritten = BUCKETS - counts.size;
      coverage.unwrittenMax = Math.max(coverage.unwrittenMax, unwritten);
      if (unwritten > 0) coverage.unwrittenSeconds += (now - polled) / 1000;
      coverage.doubleMax = Math.max(coverage.doubleMax, [...counts.values()].filter((c) => c > 1).length);
    }
    polled = now;
    const done = running.every((m, i) =>
      leases.get(m.leaseName)?.metadata.annotations?.[READY] === 'true' &&
      sameSet(writes[i]!, bucketsOf(m.identity, identities))
    );
    if (done) return (now - since) / 1000;
    if (Date.now() > deadline) {
      throw new Error(`shard ranges of ${identities.join(', ')} not settled after ${Math.round(timeoutMs / 1000)} s`);
    }
    await sleep(250, signal);
  }
}

/** The buckets `member` publishes that it writes. */
/** Whether `member` writes a namespace, by the buckets and layout on its Lease. */
async function writesOf(plane: Plane, member: Member, signal: AbortSignal): Promise<(namespace: string) => boolean> {
  const annotations = (await groupLeases(plane, signal)).get(member.leaseName)?.metadata.annotations;
  const writes = decodeBuckets(annotations?.[WRITES]);
  const layout = Layout.decode(annotations?.[LAYOUT]) ?? Layout.uniform;
  return (namespace) => writes.has(layout.bucketOf(namespace));
}

/** `shard ranges changed` lines of `members` that arrived at or after `since`. */
function rangeChanges(members: readonly Member[], since: number): { at: number; taken: boolean }[] {
  return members.flatMap((m) =>
    m.labeller.logs.flatMap((line, i) =>
      line.msg === 'shard ranges changed' && m.labeller.arrivals[i]! >= since
        ? [{ at: Date.parse(line.time), taken: line['taken'] !== undefined }]
        : []
    )
  );
}

// ---------------------------------------------------------------- the runs

/** Everything --shards measures, recorded into `results` as it goes. */
export async function benchShards(bench: Bench, options: ShardsOptions, results: ShardsResults): Promise<void> {
  const { signal, log } = bench;
  const namespaces = namespaceNames(options.n, options.sequentialNames);
  const first: Plane = { controlPlane: bench.controlPlane, admin: bench.admin, leases: new LeaseApi(bench.admin) };
  results.setupSeconds.push(await createAll(first, namespaces, options, signal, log));
  results.warmUpSeconds.push(await warmUp(first, namespaces, options, signal, log));

  const runId = Date.now().toString(36);
  let sequence = 0;
  const args = (kubeconfig: string, value: string): string[] => [
    '--kubeconfig',
    kubeconfig,
    '--kinds',
    'configmaps',
    '--label',
    `${LABEL}=${value}`,
    '--field-manager',
    FIELD_MANAGER,
    '--concurrency',
    String(options.concurrency),
    '--grace-period',
    '10s',
    '--shards',
    'auto',
    '--shard-group',
    GROUP,
    '--leader-elect-resource-namespace',
    LEASE_NAMESPACE,
  ];
  const start = async (plane: Plane, value: string, count: number): Promise<Member[]> => {
    const ports = await freePorts(count);
    return ports.map((port) => new Member(options, args(plane.controlPlane.kubeconfig, value), port));
  };
  const value = (name: string): string => `${name}-${runId}-${sequence++}`;

  // SH1: one member.
  {
    const label = value('one');
    log(`SH1: one member (--shards auto) over ${options.n} ConfigMaps in ${namespaces.length} namespaces`);
    const members = await start(first, label, 1);
    try {
      results.single = await converge(first, members, namespaces, label, options.n, signal);
    } finally {
      await stopAll(members);
    }
    logRun(log, 'SH1', results.single);
  }

  // SH2, then SH4 and SH5 over the three converged.
  {
    const label = value('three');
    log('SH2: three members started together');
    const members = await start(first, label, 3);
    const running = [...members];
    try {
      results.three = await converge(first, members, namespaces, label, options.n, signal);
      logRun(log, 'SH2', results.three);
      await settled(first, running, Date.now(), 60_000, signal);
      results.kill = await killOne(first, running, namespaces, label, options, signal, log);
      results.handover = await handOver(first, running, label, options, start, signal, log);
    } finally {
      await stopAll(running);
      for (const m of members) m.stopSampling();
    }
  }

  // SH3: the gate off, on a control plane of its own.
  log('SH3: stopping the first control plane; starting one with the ShardedListAndWatch gate off');
  await bench.controlPlane.stop();
  const controlPlane = await startControlPlane(signal, { shardedListAndWatch: false });
  controlPlanes.add(controlPlane);
  const admin = await KubeClient.load({ kubeconfig: controlPlane.kubeconfig, userAgent: 'labeller-bench' });
  try {
    const second: Plane = { controlPlane, admin, leases: new LeaseApi(admin) };
    results.setupSeconds.push(await createAll(second, namespaces, options, signal, log));
    results.warmUpSeconds.push(await warmUp(second, namespaces, options, signal, log));
    const label = value('client');
    log('SH3: three members, the server ignoring shardSelector');
    const members = await start(second, label, 3);
    try {
      results.clientSide = await converge(second, members, namespaces, label, options.n, signal);
    } finally {
      await stopAll(members);
    }
    logRun(log, 'SH3', results.clientSide);
  } finally {
    await admin.close();
    await controlPlane.stop();
    controlPlanes.delete(controlPlane);
  }
}

/** Creates the namespaces and N ConfigMaps over them, as the main bench creates its objects; answers the seconds it took. */
async function createAll(
  plane: Plane,
  namespaces: readonly string[],
  options: ShardsOptions,
  signal: AbortSignal,
  log: Bench['log'],
): Promise<number> {
  const { n, createConcurrency } = options;
  log(`creating ${namespaces.length} namespaces and ${n} ConfigMaps, ${createConcurrency} requests in flight`);
  const started = performance.now();
  await pool(namespaces, createConcurrency, async (name) => {
    await plane.admin.json('POST', '/api/v1/namespaces', {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } }),
    });
  }, signal);
  const plan = Array.from({ length: n }, (_, i) => i);
  await pool(plan, createConcurrency, async (i) => {
    const namespace = namespaces[i % namespaces.length]!;
    await createObject(plane.admin, namespace, CONFIGMAPS, objectName(i), i);
  }, signal);
  const took = (performance.now() - started) / 1000;
  log(`created in ${seconds(took)}`);
  // Let the server finish what creating left it (watch cache, etcd compaction) before timing anything.
  await sleep(2000, signal);
  return took;
}

/**
 * Applies LABEL=warm-up to every object as labeller's field manager (forced), untimed: the
 * manager's first apply to an object, which adds its managedFields entry, costs the server 13–19 %
 * less CPU than a later one (bench/README.md, "Labels from related objects"), and every run
 * after this one is a later one, whichever comes first. Answers the seconds it took.
 */
async function warmUp(
  plane: Plane,
  namespaces: readonly string[],
  options: ShardsOptions,
  signal: AbortSignal,
  log: Bench['log'],
): Promise<number> {
  const { n, createConcurrency } = options;
  log(`warm-up: labeller's field manager applies a label to the ${n} ConfigMaps once, untimed`);
  const started = performance.now();
  await pool(Array.from({ length: n }, (_, i) => i), createConcurrency, async (i) => {
    const namespace = namespaces[i % namespaces.length]!;
    const name = objectName(i);
    await retrying(() =>
      plane.admin.json('PATCH', `/api/v1/namespaces/${namespace}/configmaps/${name}`, {
        query: { fieldManager: FIELD_MANAGER, force: true },
        headers: {
          'content-type': 'application/apply-patch+yaml',
          accept: 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json',
        },
        body: JSON.stringify({
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name, namespace, labels: { [LABEL]: 'warm-up' } },
        }),
      })
    );
  }, signal);
  const took = (performance.now() - started) / 1000;
  log(`warmed up in ${seconds(took)}`);
  await sleep(2000, signal);
  return took;
}

const objectName = (i: number): string => `configmap-${String(i).padStart(6, '0')}`;

/** `members` (just started) until every bench object carries `label`: the run's figures. */
async function converge(
  plane: Plane,
  members: readonly Member[],
  namespaces: readonly string[],
  label: string,
  n: number,
  signal: AbortSignal,
): Promise<RunResults> {
  const patches = new Patches(plane.controlPlane.auditLog);
  const spawned = Math.min(...members.map((m) => m.labeller.startedAt));
  const server = new ServerCpu(plane.controlPlane.dir);
  const bench = new Set(namespaces);
  const isBench = (key: string): boolean => bench.has(key.slice(0, key.indexOf('/')));
  let done: { count: number; last: number };
  try {
    done = await untilLabelled(plane, patches, isBench, n, label, members, 120_000 + n * 30, signal);
  } finally {
    server.stop();
  }
  const convergedAt = done.last || Date.now();
  await Promise.all(members.map((m) => m.joined(signal)));
  // Once converged, each member's buckets are what it wins among them all.
  await settled(plane, members, Date.now(), 60_000, signal);
  const measured: MemberResults[] = [];
  for (const m of members) {
    m.proc.sample();
    const writes = await writesOf(plane, m, signal);
    const mine = namespaces.filter(writes);
    const objects = Math.floor(n / namespaces.length) * mine.length +
      mine.filter((ns) => namespaces.indexOf(ns) < n % namespaces.length).length;
    measured.push({
      identity: m.identity,
      namespaces: mine.length,
      objects,
      cpuSeconds: m.proc.cpuAt(convergedAt),
      peakRss: m.proc.peakRss,
      receivedBytes: m.receivedUntil(Date.now()),
      filtering: await m.filtering(),
    });
  }
  return {
    label,
    seconds: (convergedAt - spawned) / 1000,
    patches: done.count,
    serverCpuSeconds: server.between(spawned, convergedAt),
    configMapRequests: { ...patches.other },
    members: measured,
    load: load1(),
  };
}

function logRun(log: Bench['log'], id: string, run: RunResults): void {
  log(
    `${id}: converged in ${seconds(run.seconds)} (${run.patches} objects PATCHed); ${
      run.members.map((m) =>
        `${m.identity}: ${m.objects} objects, CPU ${m.cpuSeconds?.toFixed(2) ?? '?'} s, peak RSS ${
          mib(m.peakRss)
        }, read ${m.receivedBytes === undefined ? '?' : mib(m.receivedBytes)}, filtering ${m.filtering ?? '?'}`
      ).join('; ')
    }`,
  );
}

/** SIGTERM to each, together; throws if one did not exit 0. */
async function stopAll(members: readonly Member[]): Promise<void> {
  const exits = await Promise.all(members.map(async (m) => {
    const exit = m.labeller.running ? await m.labeller.stop('SIGTERM', 15_000) : undefined;
    m.stopSampling();
    return { m, exit };
  }));
  const bad = exits.find(({ exit }) => exit !== undefined && exit.code !== 0);
  if (bad?.exit) {
    throw new Error(
      `a member exited with ${describeExit(bad.exit)} on SIGTERM\n${bad.m.labeller.stderr.slice(-3000)}`,
    );
  }
}

/**
 * SH4: one of `running` killed (SIGKILL), a new ConfigMap created at once in each namespace it
 * wrote, timed until all are labelled. `running` loses the member.
 */
async function killOne(
  plane: Plane,
  running: Member[],
  namespaces: readonly string[],
  label: string,
  options: ShardsOptions,
  signal: AbortSignal,
  log: Bench['log'],
): Promise<KillResults> {
  // The member writing the most namespaces (with few buckets in use, one may write none).
  const shares = await Promise.all(running.map(async (m) => {
    const writes = await writesOf(plane, m, signal);
    return { m, theirs: namespaces.filter(writes) };
  }));
  const { m: victim, theirs } = shares.reduce((a, b) => (b.theirs.length > a.theirs.length ? b : a));
  log(`SH4: killing ${victim.identity} (${theirs.length} namespaces); a new ConfigMap in each`);
  const patches = new Patches(plane.controlPlane.auditLog);
  const since = Date.now();
  victim.labeller.kill();
  await victim.labeller.exited;
  const killedAt = Date.now();
  running.splice(running.indexOf(victim), 1);
  const name = `new-after-kill-${killedAt.toString(36)}`;
  await pool(theirs, options.createConcurrency, async (namespace) => {
    await createObject(plane.admin, namespace, CONFIGMAPS, name, options.n);
  }, signal);
  const createdAt = Date.now();
  const isNew = (key: string): boolean => key.endsWith(`/${name}`);
  const done = await untilLabelled(
    plane,
    patches,
    isNew,
    theirs.length,
    label,
    running,
    LEASE_DURATION_SECONDS * 1000 * 4 + 60_000,
    signal,
  );
  await settled(plane, running, Date.now(), 60_000, signal);
  const taken = rangeChanges(running, since).filter((c) => c.taken).map((c) => c.at);
  const afterKill = (m: Member, msg: string, predicate: (line: Record<string, unknown>) => boolean = () => true) => {
    const i = m.labeller.logs.findIndex((line, i) =>
      line.msg === msg && m.labeller.arrivals[i]! >= killedAt && predicate(line)
    );
    return i < 0 ? { at: undefined, line: undefined } : {
      at: (m.labeller.arrivals[i]! - killedAt) / 1000,
      line: m.labeller.logs[i],
    };
  };
  const survivors = running.map((m): TakeoverSteps => {
    const listed = afterKill(m, 'listed what the widened selector adds', (l) => l['kind'] === 'ConfigMap');
    return {
      identity: m.identity,
      expiredSeconds: afterKill(m, 'shard member gone: its Lease expired').at,
      listedSeconds: listed.at,
      added: listed.line === undefined ? undefined : Number(listed.line['added']),
      takenSeconds: afterKill(m, 'shard ranges changed', (l) => l['taken'] !== undefined).at,
      relistedSeconds: afterKill(m, 'relist complete', (l) => l['kind'] === 'ConfigMap').at,
    };
  });
  const results: KillResults = {
    namespaces: theirs.length,
    seconds: ((done.last || Date.now()) - killedAt) / 1000,
    takenSeconds: taken.length ? (Math.min(...taken) - killedAt) / 1000 : undefined,
    createdSeconds: (createdAt - killedAt) / 1000,
    newPatches: done.count,
    otherPatches: patches.read().requests - done.count,
    leaseDurationSeconds: LEASE_DURATION_SECONDS,
    load: load1(),
    survivors,
  };
  for (const s of survivors) {
    log(
      `SH4: ${s.identity}: expired judged at ${optional(s.expiredSeconds)}, ${s.added ?? '?'} objects listed by ${
        optional(s.listedSeconds)
      }, buckets taken at ${optional(s.takenSeconds)}${
        s.relistedSeconds === undefined ? '' : `; relisted its share by ${seconds(s.relistedSeconds)}`
      }`,
    );
  }
  log(
    `SH4: ${results.namespaces} new ConfigMaps labelled ${seconds(results.seconds)} after the kill (buckets taken at ${
      results.takenSeconds === undefined ? '?' : seconds(results.takenSeconds)
    }); ${results.otherPatches} other PATCH`,
  );
  return results;
}

/**
 * SH5: over converged objects, a member joins (the group back to three), another joins (four), and
 * one leaves (SIGTERM), each step waited for until the ranges settle; labeller's PATCH requests
 * in the window, and for a few seconds after (the reconciles of buckets taken over).
 */
async function handOver(
  plane: Plane,
  running: Member[],
  label: string,
  options: ShardsOptions,
  start: (plane: Plane, value: string, count: number) => Promise<Member[]>,
  signal: AbortSignal,
  log: Bench['log'],
): Promise<HandoverResults> {
  const patches = new Patches(plane.controlPlane.auditLog);
  const steps: HandoverStep[] = [];
  const waitMs = 5000 + options.n / 10;
  const step = async (what: string, act: () => Promise<void>): Promise<void> => {
    const before = patches.read().requests;
    const since = Date.now();
    const coverage: Coverage = { unwrittenMax: 0, unwrittenSeconds: 0, doubleMax: 0 };
    await act();
    for (const m of running) await m.joined(signal);
    const settledSeconds = await settled(plane, running, since, 120_000 + options.n, signal, coverage);
    steps.push({
      what,
      settledSeconds,
      changes: rangeChanges(running, since).length,
      patches: patches.read().requests - before,
      coverage,
    });
    log(
      `SH5: ${what}: settled in ${
        seconds(settledSeconds)
      }; up to ${coverage.unwrittenMax} buckets without a writer (for ${
        seconds(coverage.unwrittenSeconds)
      }), up to ${coverage.doubleMax} with two`,
    );
  };
  const joined: Member[] = [];
  try {
    await step('a member joins (2 → 3)', async () => {
      const [m] = await start(plane, label, 1);
      joined.push(m!);
      running.push(m!);
    });
    await step('another joins (3 → 4)', async () => {
      const [m] = await start(plane, label, 1);
      joined.push(m!);
      running.push(m!);
    });
    await step('one leaves, SIGTERM (4 → 3)', async () => {
      const leaving = running.shift()!;
      await stopAll([leaving]);
    });
    // Buckets taken are looked at again: wait for those reconciles to be done.
    await sleep(waitMs, signal);
  } finally {
    for (const m of joined) if (!running.includes(m)) running.push(m);
  }
  patches.read();
  const results: HandoverResults = {
    steps,
    patches: patches.requests,
    waitSeconds: waitMs / 1000,
    configMapRequests: { ...patches.other },
    load: load1(),
  };
  log(`SH5: ${results.patches} PATCH over ${steps.length} handovers`);
  return results;
}

// ---------------------------------------------------------------- the table

const ratio = (x: number | undefined, to: number | undefined): string =>
  x === undefined || !to ? '' : ` (${(x / to).toFixed(2)}×)`;
const cpu = (s: number | undefined): string => (s === undefined ? 'n/a' : `${s.toFixed(2)} s`);
const bytes = (b: number | undefined): string => (b === undefined ? 'n/a' : mib(b));
const sum = (xs: readonly (number | undefined)[]): number | undefined =>
  xs.some((x) => x === undefined) ? undefined : xs.reduce<number>((a, b) => a + b!, 0);

function perMember(run: RunResults, figure: (m: MemberResults) => string): string {
  return run.members.map(figure).join(' · ');
}

function runRows(id: string, what: string, run: RunResults, single: RunResults | undefined): Row[] {
  const base = single?.members[0];
  const maxRss = Math.max(...run.members.map((m) => m.peakRss));
  const received = sum(run.members.map((m) => m.receivedBytes));
  const filtering = [...new Set(run.members.map((m) => m.filtering ?? '?'))].join(', ');
  const several = run.members.length > 1;
  return [
    {
      id,
      measurement: `${what}: spawn${several ? ' of the first' : ''} → all objects labelled (last PATCH)`,
      result: `${seconds(run.seconds)}${
        several ? ratio(run.seconds, single?.seconds) : ''
      }; ${run.patches} objects PATCHed; kube-apiserver and etcd CPU meanwhile ${cpu(run.serverCpuSeconds)}${
        several ? ratio(run.serverCpuSeconds, single?.serverCpuSeconds) : ''
      }`,
      target: several && id === 'SH2' ? '≤ 1.00× SH1' : '',
      verdict: several && id === 'SH2' && single ? verdict(run.seconds <= single.seconds) : '',
      load: run.load,
    },
    {
      id,
      measurement: `${
        several ? 'Objects per member (namespaces in the buckets each writes)' : 'Objects (namespaces)'
      }; ConfigMap lists and watches${several ? ', all members' : ''}`,
      result: `${perMember(run, (m) => `${m.objects} (${m.namespaces})`)}; ${
        Object.entries(run.configMapRequests).map(([verb, count]) => `${verb} ${count}`).join(' · ') || 'none'
      }`,
      target: '',
      verdict: '',
      load: run.load,
    },
    {
      id,
      measurement: several ? 'Peak RSS per member (VmHWM)' : 'Peak RSS (VmHWM)',
      result: `${perMember(run, (m) => mib(m.peakRss))}${
        several ? `; max ${ratio(maxRss, base?.peakRss).trim()} SH1` : ''
      }`,
      target: several ? '≤ 0.45× SH1 each' : '',
      verdict: several && base ? verdict(maxRss <= 0.45 * base.peakRss) : '',
      load: run.load,
    },
    {
      id,
      measurement: several
        ? 'CPU per member, spawn → last PATCH (utime + stime)'
        : 'CPU, spawn → last PATCH (utime + stime)',
      result: `${perMember(run, (m) => cpu(m.cpuSeconds))}${
        several
          ? `; ${cpu(sum(run.members.map((m) => m.cpuSeconds)))} in all${
            ratio(sum(run.members.map((m) => m.cpuSeconds)), base?.cpuSeconds)
          }`
          : ''
      }`,
      target: '',
      verdict: '',
      load: run.load,
    },
    {
      id,
      measurement: `Received from the API server${
        several ? ' per member' : ''
      } (rchar, /proc/<pid>/io), filtering: ${filtering}`,
      result: `${
        perMember(run, (m) => `${bytes(m.receivedBytes)}${several ? ratio(m.receivedBytes, base?.receivedBytes) : ''}`)
      }${several ? `; ${bytes(received)} in all${ratio(received, base?.receivedBytes)}` : ''}`,
      target: several ? 'measured' : '',
      verdict: '',
      load: run.load,
    },
  ];
}

export function shardsRows(r: ShardsResults): Row[] {
  const rows: Row[] = [];
  if (r.single) rows.push(...runRows('SH1', 'One member (`--shards auto`)', r.single, undefined));
  if (r.three) rows.push(...runRows('SH2', 'Three members started together', r.three, r.single));
  if (r.clientSide) {
    rows.push(...runRows('SH3', 'Three members, the gate off (filtered in-process)', r.clientSide, r.single));
  }
  if (r.kill) {
    const k = r.kill;
    const target = k.leaseDurationSeconds + 5;
    rows.push({
      id: 'SH4',
      measurement:
        `One member killed (SIGKILL), a new ConfigMap in each of its ${k.namespaces} namespaces: kill → all labelled`,
      result: `${seconds(k.seconds)} (created by ${seconds(k.createdSeconds)}, its buckets taken at ${
        k.takenSeconds === undefined ? 'n/a' : seconds(k.takenSeconds)
      }); ${k.newPatches} PATCH of new objects, ${k.otherPatches} of others`,
      target: `≤ ${target} s (Lease ${k.leaseDurationSeconds} s + 5 s)`,
      verdict: k.namespaces === 0 ? 'incomplete' : verdict(k.seconds <= target && k.newPatches === k.namespaces),
      load: k.load,
    });
    rows.push({
      id: 'SH4',
      measurement:
        'Each survivor, after the kill: its Lease judged expired · what the taken ranges add listed · buckets taken',
      result: k.survivors.map((s) =>
        `${optional(s.expiredSeconds)} · ${optional(s.listedSeconds)} (${s.added ?? '?'} objects) · ${
          optional(s.takenSeconds)
        }${s.relistedSeconds === undefined ? '' : ` (relisted its share by ${seconds(s.relistedSeconds)})`}`
      ).join('; '),
      target: '',
      verdict: '',
      load: k.load,
    });
  }
  if (r.handover) {
    const h = r.handover;
    const other = Object.entries(h.configMapRequests).map(([verb, count]) => `${verb} ${count}`).join(' · ');
    rows.push({
      id: 'SH5',
      measurement: `PATCH from handovers over converged objects: ${
        h.steps.map((s) => s.what).join(', then ')
      }, each waited for until the ranges settle, and ${seconds(h.waitSeconds)} after the last`,
      result: `${h.patches} PATCH (${h.steps.map((s) => s.patches).join(', ')} by step); ConfigMap requests besides: ${
        other || 'none'
      }`,
      target: '0',
      verdict: verdict(h.patches === 0),
      load: h.load,
    });
    for (const s of h.steps) {
      rows.push({
        id: 'SH5',
        measurement: `${s.what}: until every member publishes what it wins (Lease annotations, polled every 250 ms)`,
        result: `settled in ${
          seconds(s.settledSeconds)
        }, ${s.changes} \`shard ranges changed\`; buckets without a writer: ${
          s.coverage.unwrittenMax
            ? `up to ${s.coverage.unwrittenMax}, for ${seconds(s.coverage.unwrittenSeconds)}`
            : 'none'
        }; with two: ${s.coverage.doubleMax ? `up to ${s.coverage.doubleMax}` : 'none'}`,
        target: 'one writer per bucket',
        verdict: verdict(s.coverage.doubleMax === 0),
        load: h.load,
      });
    }
  }
  return rows;
}

/** The section's setup lines and table. */
export function shardsSetup(r: ShardsResults): string[] {
  return [
    `- objects: ${r.n} ConfigMaps over ${r.namespaces} namespaces (\`${r.naming}\`, in ${r.buckets} of the ${BUCKETS} equal buckets of the namespace hash space, before the members lay the buckets out over them), each with 6 labels, 4 annotations and managedFields of \`kubectl-create\` (Update) and \`argocd-controller\` (Apply); created in ${
      r.setupSeconds.map(seconds).join(' and ')
    } (the second control plane's for SH3); then labeller's field manager applied a label to each once, untimed (${
      r.warmUpSeconds.map(seconds).join(' and ')
    }), so that every run is a later apply (a manager's first costs the server 13–19 % less CPU)`,
    `- labeller cluster-wide with \`--kinds configmaps --shards auto\`, one label of a value of each run's own (so each run relabels every object), \`--concurrency ${r.concurrency}\` per member, Leases of ${r.leaseDurationSeconds} s renewed every 2 s (the defaults); time: spawn → the end of the last labeller PATCH of a bench object (audit log), confirmed by a metadata-only list; CPU and peak RSS from /proc; received: rchar of /proc/<pid>/io from the member's \`joining shard group\` line to convergence`,
    '',
    table(shardsRows(r)),
  ];
}
