// One seeded chaos run against a full test control plane (controllers, scheduler, kwok nodes):
// replicas of labeller, as a ServiceAccount, label namespaces' ConfigMaps, Deployments,
// ReplicaSets, Pods and (while its CRD is installed) Widgets from the namespace's `team` label, a
// ConfigMap source of cost centres and an HTTPS source of sites, while a sequence of operations
// drawn from the seed changes the world and disturbs labeller. A run has one of two modes:
//   leader   two replicas under leader election, two namespaces: the leader writes everything;
//   sharded  members of a shard group (--shards auto), two at the start and up to three, four
//            namespaces: each member writes the namespaces it wins.
// The oracle (oracle.ts) says what every object's labels must be, whoever wrote them, so in the
// sharded mode the invariants hold over the union of the shards. They are checked as the run goes
// and at its end:
//   never strip  no key the config in force wants, from readable inputs, disappears from an
//                object that still exists (sampled every second; a key not wanted at some moment
//                of the last GRACE_MS may go);
//   convergence  within CONVERGE_MS of the last operation every object carries exactly the
//                oracle's labels of the scenario's keys;
//   bounded      labeller's PATCHes stay within twice the changes the oracle predicts, plus a
//                constant per process started after the first ones (restart or join);
//   health       no replica exits by itself but for a named reason (lost leadership, no API
//                server at start, an invalid config file) nor is unready without one (/readyz),
//                each running one is ready once converged and stops cleanly (exit 0, no crash) on
//                SIGTERM, whether a member leaving mid-run or any replica at the end, peak RSS
//                stays bounded, and no Lease is left but the run's own (and, sharded, the
//                field-manager guard's of a process stopped mid-run: see leftLeases);
//   shard ranges (sharded) once converged, the running members' Leases are all ready, the
//                buckets they publish as written are disjoint and cover the hash space under one
//                layout (every namespace has one writer), and no other member's Lease is left;
//   labels at create (with admission) a ConfigMap the harness creates while the admission
//                policies of the config in force are enforced carries what they set in its create
//                response (windows.ts: the grace after each change), and so do ConfigMaps created
//                once converged, after the last change's grace;
//   one writer   (handovers) no PATCH a process made before it handed over, held in the network
//                past that, reaches the API server after its successor's of the same object
//                (writeproxy.ts: lateWrites); and no Lease is taken from a live, undisturbed
//                holder (leadership lost to another, a member's Lease deleted as expired: see
//                leaseTakeovers), whatever its clock says.
// A seed also draws whether its replicas keep the config's admission policies
// (--admission-policies, on a server that serves them): then reloads change the policies too, and
// objects created after the policies are enforced need no PATCH for the keys they set.
// Operations: ConfigMaps created and deleted, namespace labels changed, Deployments scaled (the
// controllers make and delete Pods), a node's zone label changed or removed (pods read it by
// reference, `node.*`: exactly the pods on it are written; drawn from a stream of their own, so
// that a seed's other operations are what they were before), a CRD installed (with Widgets) and removed, the ConfigMap
// source rewritten with good, empty, malformed and mass-removing content (taken once it has stayed
// the same for the source's acceptSmallerAfter, SOURCE_ACCEPT_MS) or deleted for a while,
// the HTTPS source answering the same, too large a body, no answer for a while or flipping
// between two contents, live reloads that add and drop keys and ones that do not parse, a kind's
// RBAC revoked for a while, another manager overwriting a key once; with admission, creates right
// after a reload, labeller's rights on its policies revoked for a while (the next operations run
// meanwhile), the policies deleted meanwhile or not (a server without them: the controller alone
// labels what is created then), and an operator deleting or editing the ConfigMaps policy or
// deleting its binding (put back at the next --requeue-after). Perturbations: SIGKILL and
// restart of a replica (between a write and its echo, at random), SIGSTOP for part of a lease
// duration or more (leader: the other replica takes over; sharded: the others take the starved
// member's namespaces, and it may find its Lease deleted when it resumes), every connection
// dropped, every byte delayed (a stale view), kube-apiserver restarted; sharded only, a member
// joining (a new process), leaving (SIGTERM) and crashing (SIGKILL, started again only by a later
// join), one member at least running throughout. The oracle takes what is served as read, so an
// HTTPS body stays CATALOG_READ_MS before the next, and a process an operation starts has read
// its sources before the next operation.
// Handovers (issue 47): a seed also draws, apart, whether it has four more operations (about half
// of the seeds; the others draw what they always did):
//   skew            one replica's wall clock 2-3 lease durations ahead or behind (libfaketime,
//                   its monotonic clock left alone; skipped without it), started on it with
//                   SIGTERM and, leader mode, made the leader;
//   hold            the PATCHes of the leader or a member held in the network (the write proxy,
//                   behind the fault proxy, which tells the places apart by TLS server name) while
//                   the source changes, it stops (SIGTERM: it hands over) and the source changes
//                   again, which its successor writes; then started again;
//   shrink-restart  the ConfigMap source given content that drops most keys and at once replicas
//                   SIGKILLed and started into it: not taken before it stayed SOURCE_ACCEPT_MS
//                   (objects sampled every 200 ms, and the processes' logs), taken within
//                   SHRINK_TAKEN_MS more of their first read (never refused for ever);
//   split           (sharded) a member on a config of an older generation that sets the static
//                   key to STALE, with --shard-config-skew SPLIT_SKEW_MS: after SPLIT_SETTLE_MS
//                   every object as the newest config says, every member reporting the split (log
//                   line, /readyz note); back on the newest config, it rejoins.
//
// Why no general check that two members never write one object at once: the audit log cannot
// tell the members apart (one ServiceAccount, one user agent `labeller/<version>`, one field
// manager, one source address behind the fault proxy), and even per-member identities would not
// make it sound: a member's belief that it writes a namespace is only in its log, a PATCH claimed
// just before a SIGSTOP may reach the server after the others took over, and the membership itself
// lets two members that took a bucket in the same round both hold it until the next. Convergence
// and never strip judge what those writes leave behind. The write proxy of a run with holds tells
// the places apart and judges the case that is sound: writes made before a handover, held past
// it, must not land after the successor's.
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { isConflict, isNotFound } from '../../src/apimachinery/errors.ts';
import { dump } from 'js-yaml';
import { auditEvents, byLabeller } from '../cluster/audit.ts';
import { Cluster, clusterCa, copyKubeconfig, type PolicyRule } from '../cluster/cluster.ts';
import { FaultProxy } from '../cluster/faultproxy.ts';
import { lateWrites, serverName, WriteProxy } from '../cluster/writeproxy.ts';
import type { ControlPlane } from '../controlplane/controlplane.ts';
import { Catalog } from '../cluster/catalog.ts';
import { crashed } from '../process/crash.ts';
import { freePorts } from '../controlplane/process.ts';
import { eventually } from '../process/eventually.ts';
import { describeExit } from '../process/child.ts';
import { Labeller, libfaketime, type LogLine } from '../process/labeller.ts';
import { procSample } from '../process/procstat.ts';
import { sleep } from '../process/sleep.ts';
import { POLICY_RULE, removePolicies, type Tamper, tamper } from './admission.ts';
import {
  atCreate,
  CATALOG_MAX_BYTES,
  catalogVerdict,
  type ConfigState,
  DOMAIN,
  expected,
  type HeldSource,
  type HeldValues,
  KEYS,
  matches,
  NODE_ZONE,
  sourceVerdict,
  wanted,
  type WorldState,
} from './oracle.ts';
import { Random } from './random.ts';
import { PolicyWindows } from './windows.ts';

/** A removal is justified if the key was not wanted at some moment this long before it was seen. */
const GRACE_MS = 45_000;
const CONVERGE_MS = 120_000;
/**
 * The ConfigMap source's acceptSmallerAfter: short enough that smaller content stays that long
 * between the source's operations, and that a source-gone (1 to 5 s) can come in the middle.
 */
const SOURCE_ACCEPT_MS = 4000;
const MAX_RSS_MIB = 300;
/** How long a body of the HTTPS source stays before the next: its poll interval (1 s), and a margin for a busy machine. */
const CATALOG_READ_MS = 2500;
const TEAMS = ['red', 'blue', 'green', 'gray'] as const;
/** The zones the nodes' NODE_ZONE label takes; the control plane has NODES simulated nodes (kwok-node-<i>). */
const ZONES = ['zone-a', 'zone-b', 'zone-c'] as const;
const NODES = 3;
const INTRUDER = 'intruder';

/** The kinds whose RBAC an operation may revoke: each of the config's built-in kinds. */
const REVOCABLE = ['configmaps', 'deployments', 'replicasets', 'pods'] as const;
/** What a revoke of labeller's admission policies (and their bindings) names. */
const POLICIES = 'mutatingadmissionpolicies';
/**
 * With admission, how often everything is looked at again (--requeue-after): the policies are
 * applied again then, so one deleted or edited by hand is back within it.
 */
const REQUEUE_S = 10;
/**
 * The grace windows of "labels at create" (windows.ts). Measured on the 2-core machine, busy (a
 * create every 50 ms until it carried the change; docs/reliability.md): a reload enforced 0.9–3.3 s
 * after the file changed, an edit by hand 0.2–0.9 s after it, a binding's deletion 1.0–1.1 s; a
 * policy put back 6–10 s later (--requeue-after 10s); a namespace's new label at once (within
 * 0.12 s). The windows add a margin for a busier machine.
 */
const GRACES = {
  reloadMs: 8_000,
  resyncMs: REQUEUE_S * 1_100 + 6_000,
  namespaceMs: 2_000,
  takeoverMs: 16_000,
  enforcedMs: 5_000,
} as const;
/**
 * What may keep a change of the policies from being applied (the writer stopped, killed, slowed,
 * away from the API server, or another member taking the cluster-scoped objects): see windows.ts.
 */
const DISTURBANCES: ReadonlySet<Operation['op']> = new Set([
  'kill',
  'stop',
  'crash',
  'leave',
  'join',
  'drop',
  'delay',
  'restart-apiserver',
  'reload-invalid',
  'skew',
  'hold',
  'shrink-restart',
  'split',
]);
/** What may keep a process from renewing its Leases (see EXPLAIN_MS); a stop, only the stopped replica's. */
const LEASE_DISTURBANCES: ReadonlySet<Operation['op']> = new Set(['stop', 'drop', 'delay', 'restart-apiserver']);

/** How the replicas share the work: one leader writes everything, or each shard member its namespaces. */
export type Mode = 'leader' | 'sharded';
/**
 * Each mode's namespaces, replicas (at most; processes started at first) and longest SIGSTOP.
 * Four namespaces give two or three members something to split (two could well hash to one);
 * a member's SIGSTOP of up to 2.5 lease durations outlasts the one after which the others take
 * its namespaces and delete its Lease.
 */
const SHAPES = {
  leader: { namespaces: 2, replicas: 2, initial: 2, maxStopMs: 8000 },
  sharded: { namespaces: 4, replicas: 3, initial: 2, maxStopMs: 10_000 },
} as const satisfies Record<Mode, object>;
/** The leader mode's timings: a lease of 6 s, a renew deadline of 4 s, a retry every second. */
const LEADER_TIMINGS = ['--lease-duration', '6s', '--renew-deadline', '4s', '--retry-period', '1s'];
/** The shard members' timings, as test/e2e/shards.test.ts's: a lease of 4 s, a round every second. */
const SHARD_TIMINGS = ['--lease-duration', '4s', '--renew-deadline', '3s', '--retry-period', '1s'];
/** The shard group's name (--shard-group's default): its members' Leases carry it. */
const SHARD_GROUP = 'labeller';
const BUCKETS = 256;
/** A run with split operations runs its members with --shard-config-skew this long. */
const SPLIT_SKEW_MS = 6000;
/**
 * How long after a split begins the objects of the member on the older config may still carry
 * its value: the skew allowed, its reload seen (the file polled every 5 s at worst) or its start,
 * a few rounds for the others to take its buckets, and a margin for a busy machine.
 */
const SPLIT_SETTLE_MS = SPLIT_SKEW_MS + 20_000;
/** The value the older config of a split gives the static key (the newest's is `on`, or none). */
const STALE = 'stale';
/**
 * A Lease taken from a live holder (leadership lost to another, a member's Lease deleted as
 * expired) is explained by a disturbance of that holder (a SIGSTOP, a network delay or drop, an
 * API server restart) under way or over for less than this: two lease durations and more.
 */
const EXPLAIN_MS = 15_000;
/**
 * How long a hold waits for a write of the process to hold when the source's change makes none:
 * with admission, the policies' resync (--requeue-after REQUEUE_S, ±10 %) comes within it.
 */
const HOLD_WAIT_MS = REQUEUE_S * 1_100 + 1_000;
/**
 * How long after the restarted processes of a shrink-restart first read the smaller content
 * every object must carry it, beyond SOURCE_ACCEPT_MS: a few resyncs' worth on a busy machine.
 */
const SHRINK_TAKEN_MS = 20_000;

/** One step of a run, as drawn from the seed (and written out to replay it). */
export type Operation =
  | { readonly op: 'create'; readonly ns: number; readonly name: string }
  | { readonly op: 'delete'; readonly ns: number; readonly name: string }
  | { readonly op: 'team'; readonly ns: number; readonly team: string | null }
  | { readonly op: 'source'; readonly document: unknown }
  /** The HTTPS source's body, as served. */
  | { readonly op: 'catalog'; readonly body: string }
  /** The HTTPS source answering nothing (connection refused) for `ms`. */
  | { readonly op: 'catalog-down'; readonly ms: number }
  /** The HTTPS source flipping between two bodies every 300 ms for `ms`, ending on the second. */
  | { readonly op: 'catalog-flip'; readonly bodies: readonly [string, string]; readonly ms: number }
  | { readonly op: 'reload'; readonly config: ConfigState }
  | { readonly op: 'intrude'; readonly ns: number; readonly name: string }
  | { readonly op: 'scale'; readonly ns: number; readonly replicas: number }
  /** The Widgets CRD installed (with two Widgets per namespace) or removed. */
  | { readonly op: 'crd'; readonly install: boolean }
  /** Every right on `resource` taken from labeller's ServiceAccount for `ms`, then given back. */
  | { readonly op: 'revoke'; readonly resource: (typeof REVOCABLE)[number]; readonly ms: number }
  /**
   * Every right on labeller's admission policies and bindings taken for `ms`, while the next
   * operations run, then given back; with `remove`, an operator deletes them meanwhile (a server
   * without them: what is created then gets its labels from the controller only).
   */
  | { readonly op: 'revoke'; readonly resource: typeof POLICIES; readonly ms: number; readonly remove: boolean }
  /** An operator deletes the ConfigMaps policy or its binding, or edits its CEL (admission.ts). */
  | { readonly op: 'tamper'; readonly how: Tamper }
  /** The replica SIGKILLed and started again (a new process, as the kubelet would). */
  | { readonly op: 'kill'; readonly replica: number }
  /** The replica SIGSTOPped for `ms`, then SIGCONT. */
  | { readonly op: 'stop'; readonly replica: number; readonly ms: number }
  /** Sharded: a new member started in the free place `replica`. */
  | { readonly op: 'join'; readonly replica: number }
  /** Sharded: the member stopped with SIGTERM: it leaves the group (exit 0, its Leases deleted). */
  | { readonly op: 'leave'; readonly replica: number }
  /** Sharded: the member SIGKILLed and not started again; a later join takes its place. */
  | { readonly op: 'crash'; readonly replica: number }
  | { readonly op: 'drop' }
  /** Every byte between labeller and the API server `delayMs` late, for `ms`: a stale view. */
  | { readonly op: 'delay'; readonly delayMs: number; readonly ms: number }
  | { readonly op: 'restart-apiserver'; readonly ms: number }
  /** A config file that does not parse, for `ms`, then the config in force again. */
  | { readonly op: 'reload-invalid'; readonly ms: number }
  /** The source's ConfigMap deleted for `ms`, then written again with the content in use. */
  | { readonly op: 'source-gone'; readonly ms: number }
  /**
   * Replica `replica`'s wall clock `seconds` off the others' from now on (libfaketime; its
   * monotonic clock is the host's): it is stopped (SIGTERM) and started again on that clock; in
   * the leader mode the other replica is then stopped and started too if it leads, so that the
   * skewed one leads. Skipped (said once) without libfaketime.
   */
  | { readonly op: 'skew'; readonly replica: number; readonly seconds: number }
  /**
   * The PATCHes of the leader (leader mode) or of member `replica` (sharded) held in the network
   * (writeproxy.ts) while the ConfigMap source gets the first of `documents` (its writes of it
   * are held; with none to make, with admission, its policies' next resync is), the process is
   * stopped (SIGTERM: it hands over) and the source gets the second (which its successor writes),
   * until `ms` after the SIGTERM; then it is started again. No held PATCH may reach the API
   * server after its successor's.
   */
  | {
    readonly op: 'hold';
    readonly replica?: number;
    readonly ms: number;
    readonly documents: readonly [Catalogue, Catalogue];
  }
  /**
   * The ConfigMap source rewritten with `full` (every team), then with `document`, which drops
   * most of its keys, and at once `replicas` SIGKILLed and started again: each starts into the
   * smaller content, which must not be taken before SOURCE_ACCEPT_MS after it was written, and
   * must be within SOURCE_ACCEPT_MS (and a margin) after the restarted processes read it.
   */
  | {
    readonly op: 'shrink-restart';
    readonly full: Catalogue;
    readonly document: Catalogue;
    readonly replicas: readonly number[];
  }
  /**
   * Sharded: member `replica` on a config of an older generation that sets the static key to
   * STALE, for `ms` (a live reload, or SIGKILLed and started on it with `restart`), then the
   * newest again (a reload). The members run with --shard-config-skew SPLIT_SKEW_MS.
   */
  | { readonly op: 'split'; readonly replica: number; readonly ms: number; readonly restart: boolean }
  /** Node `kwok-node-<node>`'s NODE_ZONE label set to `zone` (null: removed): its pods' zone key follows (references). */
  | { readonly op: 'zone'; readonly node: number; readonly zone: string | null }
  | { readonly op: 'pause'; readonly ms: number };

/** A source document of every team's value, or some. */
type Catalogue = Readonly<Record<string, string>>;

export interface Violation {
  readonly invariant:
    | 'never strip'
    | 'convergence'
    | 'bounded writes'
    | 'health'
    | 'shard ranges'
    | 'labels at create'
    | 'one writer';
  readonly detail: string;
}

export interface RunResult {
  readonly seed: number;
  readonly mode: Mode;
  /** Whether the replicas kept the admission policies. */
  readonly admission: boolean;
  readonly operations: readonly Operation[];
  readonly violations: readonly Violation[];
  readonly patches: number;
  readonly predicted: number;
  readonly convergedSeconds: number | undefined;
  readonly peakRssMiB: number;
  readonly restarts: number;
  /** The ConfigMaps the harness created, and how many of them were judged at their create (outside the grace windows). */
  readonly creates: { readonly made: number; readonly judged: number };
  /** The same for the dry-run creates that probe the policies every second. */
  readonly probes: { readonly made: number; readonly judged: number };
  /** How long after each reload that changed what the policies set they did so, in ms (dry-run creates). */
  readonly reloadLags: readonly number[];
}

const INITIAL_SOURCE = { red: 'cc-1', blue: 'cc-2', green: 'cc-3', gray: 'cc-4' };
const INITIAL_CATALOG = { red: 'site-1', blue: 'site-2', green: 'site-3', gray: 'site-4' };
const INITIAL_CONFIG: ConfigState = { static: true, team: true, cc: true, site: true };
const CRD = { group: DOMAIN, plural: 'widgets', kind: 'Widget' } as const;

/** How likely each operation is; the leader mode's are these, in this order (its seeds draw as they always did). */
const WEIGHTS = {
  create: 4,
  delete: 2,
  team: 4,
  source: 3,
  catalog: 3,
  'catalog-down': 0.7,
  'catalog-flip': 0.7,
  reload: 2,
  intrude: 1,
  scale: 2,
  crd: 1,
  revoke: 1,
  kill: 1,
  stop: 1,
  drop: 1,
  delay: 0.7,
  'restart-apiserver': 0.3,
  'reload-invalid': 1,
  'source-gone': 0.7,
} as const;
/** The sharded mode's: joins about as often as members leave or crash, so the group neither dwindles nor stays full. */
const SHARDED_WEIGHTS = { ...WEIGHTS, join: 1.4, leave: 0.7, crash: 0.7 } as const;
/** With admission, added to either mode's (after them, so a seed without admission draws as it always did). */
const ADMISSION_WEIGHTS = { tamper: 1.2, 'revoke-policies': 0.8 } as const;
/**
 * With handovers (issue 47), added after those: a skewed clock, writes held across a handover, a
 * restart while the catalogue shrinks; sharded, a member on another config too.
 */
const HANDOVER_WEIGHTS = { skew: 1, hold: 1, 'shrink-restart': 0.8 } as const;
const SHARDED_HANDOVER_WEIGHTS = { ...HANDOVER_WEIGHTS, split: 0.8 } as const;
type Drawn = keyof typeof SHARDED_WEIGHTS | keyof typeof ADMISSION_WEIGHTS | keyof typeof SHARDED_HANDOVER_WEIGHTS;
const TAMPERS: readonly Tamper[] = ['delete', 'unbind', 'edit'];

/**
 * Whether the replicas of `seed` keep the config's admission policies: drawn apart from the
 * operations, so that a seed without them draws the operations it always did. Each half of the
 * seeds: those without keep testing the controller alone, as it runs on servers without the
 * policies (before 1.36) and wherever the flag is off, the default.
 */
export function admissionOf(seed: number): boolean {
  return new Random(seed ^ 0xad).chance(0.5);
}

/**
 * Whether `seed` also draws the handover operations (skew, hold, shrink-restart, split): drawn
 * apart as well, so that the other half of the seeds draw what they always did.
 */
export function handoversOf(seed: number): boolean {
  return new Random(seed ^ 0x47).chance(0.5);
}

/** The operations of `seed`: drawn against a model of what exists, so each makes sense when it runs. */
export function generate(
  seed: number,
  count: number,
  mode: Mode = 'leader',
  admission = false,
  handovers = false,
): Operation[] {
  const shape = SHAPES[mode];
  const random = new Random(seed);
  const configMaps = Array.from({ length: shape.namespaces }, () => new Set(['cm-0', 'cm-1', 'cm-2']));
  /** The replicas running a process: a member that left or crashed has none until one joins in its place. */
  const up = new Set(Array.from({ length: shape.initial }, (_, i) => i));
  const running = () => [...up].sort((a, b) => a - b);
  let serial = 3;
  let config = INITIAL_CONFIG;
  let crd = false;
  const intruded = new Set<string>();
  const operations: Operation[] = [];
  const weights: Readonly<Partial<Record<Drawn, number>>> = {
    ...(mode === 'sharded' ? SHARDED_WEIGHTS : WEIGHTS),
    ...(admission ? ADMISSION_WEIGHTS : {}),
    ...(handovers ? (mode === 'sharded' ? SHARDED_HANDOVER_WEIGHTS : HANDOVER_WEIGHTS) : {}),
  };
  const create = (ns: number) => {
    const name = `cm-${serial++}`;
    configMaps[ns]!.add(name);
    operations.push({ op: 'create', ns, name });
  };
  for (let i = 0; i < count; i++) {
    const ns = random.int(0, shape.namespaces - 1);
    const kind = random.weighted(weights);
    const existing = [...configMaps[ns]!];
    switch (kind) {
      case 'create':
        create(ns);
        break;
      case 'delete': {
        if (existing.length === 0) continue;
        const name = random.pick(existing);
        configMaps[ns]!.delete(name);
        operations.push({ op: 'delete', ns, name });
        break;
      }
      case 'intrude': {
        // Once per object: more would be a fight, which labeller yields (fights.ts), not this oracle's case.
        const fresh = existing.filter((name) => !intruded.has(`${ns}/${name}`));
        if (fresh.length === 0) continue;
        const name = random.pick(fresh);
        intruded.add(`${ns}/${name}`);
        operations.push({ op: 'intrude', ns, name });
        break;
      }
      case 'team':
        operations.push({ op: 'team', ns, team: random.chance(0.2) ? null : random.pick(TEAMS) });
        break;
      case 'source':
        operations.push({ op: 'source', document: sourceDocument(random, 'cc') });
        break;
      case 'catalog':
        operations.push({ op: 'catalog', body: catalogBody(random) });
        break;
      case 'catalog-flip':
        // Two edits that keep every key: whichever of them labeller sees, neither is an outage.
        operations.push({
          op: 'catalog-flip',
          bodies: [JSON.stringify(everyTeam(random, 'site')), JSON.stringify(everyTeam(random, 'site'))],
          ms: random.int(1000, 4000),
        });
        break;
      case 'reload': {
        const next = {
          static: random.chance(0.7),
          team: random.chance(0.7),
          cc: random.chance(0.7),
          site: random.chance(0.7),
        };
        // A config without labels does not load: keep one.
        config = next.static || next.team || next.cc || next.site ? next : { ...next, static: true };
        operations.push({ op: 'reload', config });
        // An object created while the policies change.
        if (admission && random.chance(0.5)) create(ns);
        break;
      }
      case 'scale':
        operations.push({ op: 'scale', ns, replicas: random.int(0, 3) });
        break;
      case 'crd':
        crd = !crd;
        operations.push({ op: 'crd', install: crd });
        break;
      case 'revoke':
        operations.push({ op: 'revoke', resource: random.pick(REVOCABLE), ms: random.int(2000, 8000) });
        break;
      case 'revoke-policies':
        operations.push({ op: 'revoke', resource: POLICIES, ms: random.int(2000, 10_000), remove: random.chance(0.5) });
        break;
      case 'tamper':
        operations.push({ op: 'tamper', how: random.pick(TAMPERS) });
        break;
      case 'kill':
      case 'leave':
      case 'crash': {
        // One member at least keeps running (a killed one is started again only once it has exited).
        if (up.size < 2) continue;
        const replica = random.pick(running());
        if (kind !== 'kill') up.delete(replica);
        operations.push({ op: kind, replica });
        break;
      }
      case 'join': {
        const free = Array.from({ length: shape.replicas }, (_, i) => i).filter((i) => !up.has(i));
        if (free.length === 0) continue;
        up.add(free[0]!);
        operations.push({ op: 'join', replica: free[0]! });
        break;
      }
      case 'stop':
        operations.push({ op: 'stop', replica: random.pick(running()), ms: random.int(1000, shape.maxStopMs) });
        break;
      case 'delay':
        operations.push({ op: 'delay', delayMs: random.int(200, 2000), ms: random.int(2000, 8000) });
        break;
      case 'skew': {
        // Two to three lease durations ahead or behind.
        const lease = mode === 'leader' ? 6 : 4;
        const seconds = (random.chance(0.5) ? 1 : -1) * random.int(2 * lease, 3 * lease);
        operations.push({ op: 'skew', replica: random.pick(running()), seconds });
        break;
      }
      case 'hold': {
        // Someone to hand over to.
        if (up.size < 2) continue;
        const replica = mode === 'sharded' ? { replica: random.pick(running()) } : {};
        // Two contents of every team, each value unlike any other operation's (so the process
        // held has writes to make), and the second's unlike the first's.
        const first = Object.fromEntries(TEAMS.map((team) => [team, `cc-${random.int(10, 12)}`]));
        const second = Object.fromEntries(TEAMS.map((team) => [team, `cc-${random.int(7, 8)}`]));
        operations.push({ op: 'hold', ...replica, ms: random.int(3000, 8000), documents: [first, second] });
        break;
      }
      case 'shrink-restart':
        operations.push({
          op: 'shrink-restart',
          full: everyTeam(random, 'cc'),
          document: { [random.pick(TEAMS)]: 'cc-9' },
          replicas: random.chance(0.5) ? running() : [random.pick(running())],
        });
        break;
      case 'split':
        // Members on the newest config to take its buckets.
        if (up.size < 2) continue;
        operations.push({
          op: 'split',
          replica: random.pick(running()),
          ms: random.int(SPLIT_SETTLE_MS + 6000, SPLIT_SETTLE_MS + 14_000),
          restart: random.chance(0.5),
        });
        break;
      case 'catalog-down':
      case 'restart-apiserver':
      case 'reload-invalid':
      case 'source-gone':
        operations.push({ op: kind, ms: random.int(1000, 5000) });
        break;
      default:
        operations.push({ op: kind });
    }
    operations.push({ op: 'pause', ms: random.int(50, 1500) });
  }
  return withZones(seed, operations);
}

/**
 * `operations` with node relabels among them (the references' operation), drawn from a stream of
 * their own, so that every other operation of a seed stays what it was before they existed.
 */
function withZones(seed: number, operations: readonly Operation[]): Operation[] {
  const random = new Random(seed + 1_000_003);
  return operations.flatMap((operation) =>
    operation.op === 'pause' && random.chance(0.1)
      ? [operation, {
        op: 'zone' as const,
        node: random.int(0, NODES - 1),
        zone: random.chance(0.2) ? null : random.pick(ZONES),
      }]
      : [operation]
  );
}

/** A source document: mostly good edits, sometimes what an outage answers. */
function sourceDocument(random: Random, prefix: string): unknown {
  const shape = random.weighted({ edit: 6, empty: 1, null: 1, 'not a mapping': 1, 'mass removal': 1 });
  switch (shape) {
    case 'empty':
      return {};
    case 'null':
      return null;
    case 'not a mapping':
      return ['maintenance'];
    case 'mass removal':
      return { [random.pick(TEAMS)]: `${prefix}-9` };
    default: {
      const document: Record<string, string> = {};
      for (const team of TEAMS) if (random.chance(0.85)) document[team] = `${prefix}-${random.int(1, 6)}`;
      return document;
    }
  }
}

/** The HTTPS source's body: a source document, or a good-looking one too large to take. */
function catalogBody(random: Random): string {
  if (!random.chance(0.15)) return JSON.stringify(sourceDocument(random, 'site'));
  return JSON.stringify({ ...everyTeam(random, 'site'), padding: 'x'.repeat(CATALOG_MAX_BYTES) });
}

function everyTeam(random: Random, prefix: string): Record<string, string> {
  return Object.fromEntries(TEAMS.map((team) => [team, `${prefix}-${random.int(1, 6)}`]));
}

interface Sample {
  readonly at: number;
  /** `kind/namespace/name` → uid, the scenario's labels, and a pod's node (spec.nodeName). */
  readonly objects: ReadonlyMap<
    string,
    { readonly uid: string; readonly labels: Record<string, string>; readonly node?: string | undefined }
  >;
}

const KINDS = [
  { path: (ns: string) => `/api/v1/namespaces/${ns}/configmaps`, name: 'configmaps' },
  { path: (ns: string) => `/apis/apps/v1/namespaces/${ns}/deployments`, name: 'deployments' },
  { path: (ns: string) => `/apis/apps/v1/namespaces/${ns}/replicasets`, name: 'replicasets' },
  { path: (ns: string) => `/api/v1/namespaces/${ns}/pods`, name: 'pods' },
  { path: (ns: string) => `/apis/${CRD.group}/v1/namespaces/${ns}/${CRD.plural}`, name: CRD.plural, optional: true },
] as const;

/**
 * The rights labeller's ServiceAccount has; `revoked` are left out. Shard members get on Leases
 * the verbs the chart's sharding Role grants (its guard Role's are the same, and its ClusterRole
 * adds list), so a member that needs more fails here as it would in a cluster. With admission,
 * the rights on its policies and bindings the chart grants.
 */
function rules(mode: Mode, admission: boolean, revoked: ReadonlySet<string>): PolicyRule[] {
  const kinds: PolicyRule[] = [
    { apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch', 'patch'] },
    { apiGroups: ['apps'], resources: ['deployments', 'replicasets'], verbs: ['list', 'watch', 'patch'] },
    { apiGroups: [''], resources: ['pods'], verbs: ['list', 'watch', 'patch'] },
  ].flatMap((rule) => {
    const resources = rule.resources.filter((resource) => !revoked.has(resource));
    return resources.length > 0 ? [{ ...rule, resources }] : [];
  });
  return [
    ...kinds,
    ...(admission && !revoked.has(POLICIES) ? [POLICY_RULE] : []),
    { apiGroups: [CRD.group], resources: [CRD.plural], verbs: ['list', 'watch', 'patch'] },
    { apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list', 'watch'] },
    // What the pods' node.* reads, as the chart grants it.
    { apiGroups: [''], resources: ['nodes'], verbs: ['list', 'watch'] },
    {
      apiGroups: ['coordination.k8s.io'],
      resources: ['leases'],
      verbs: mode === 'sharded' ? ['get', 'list', 'create', 'update', 'delete'] : ['*'],
    },
    { apiGroups: ['', 'events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
  ];
}

/** Runs `operations` (or those of `seed`) in `mode` against `cp`; never throws for a violation, only reports it. */
export async function run(
  cp: ControlPlane,
  seed: number,
  operations: readonly Operation[],
  log: (line: string) => void,
  mode: Mode = 'leader',
  admission = false,
): Promise<RunResult> {
  const shape = SHAPES[mode];
  const has = (op: Operation['op']) => operations.some((operation) => operation.op === op);
  const cluster = await Cluster.connect(cp.kubeconfig);
  // A run that holds writes reads them all: each process through the write proxy, behind the
  // fault proxy, which still drops and delays its connections as before.
  const writeProxy = has('hold')
    ? await WriteProxy.start(
      cp.server,
      clusterCa(cp.kubeconfig),
      Array.from({ length: shape.replicas }, (_, i) => place(i)),
    )
    : undefined;
  const proxy = await FaultProxy.start(writeProxy?.url ?? cp.server);
  const catalog = new Catalog(`chaos-${seed}`);
  catalog.body = JSON.stringify(INITIAL_CATALOG);
  await catalog.up();
  /** When the run's certificates began to be valid: a clock set behind must not read them as not valid yet. */
  const certificatesAt = Date.now();
  const faketime = libfaketime() !== undefined;
  if (has('skew') && !faketime) {
    log(`seed ${seed}: libfaketime is not installed (Debian package faketime): the skew operations are skipped`);
  }
  const violations: Violation[] = [];
  const namespaces: string[] = [];
  for (const suffix of 'abcd'.slice(0, shape.namespaces)) {
    namespaces.push(await cluster.namespace(`chaos-${seed}-${suffix}`));
  }
  const sourceNs = await cluster.namespace(`chaos-${seed}-src`);
  // With admission, the second namespace starts without a team: what is created there gets the
  // constant alone at its create.
  const teams = new Map<string, string | undefined>(
    namespaces.map((ns, i) => [ns, admission && i === 1 ? undefined : TEAMS[i]]),
  );
  let source: ReadonlyMap<string, string> = new Map(Object.entries(INITIAL_SOURCE));
  let sites: ReadonlyMap<string, string> = new Map(Object.entries(INITIAL_CATALOG));
  let config = INITIAL_CONFIG;
  let crd = false;
  const intruded = new Set<string>();
  /** Whether each source's document as written now is refused (labeller keeps an older one). */
  const refused = { cc: false, site: false };
  /** Held sources; record() adds the values wanted since. */
  const held = new Map<HeldSource, Omit<HeldValues, 'since'> & { since: Map<string, Set<string | undefined>> }>();
  // Each node's zone, set on the nodes before the processes start (a run before may have changed them).
  const zones = new Map<string, string | undefined>(
    Array.from({ length: NODES }, (_, i) => [`kwok-node-${i}`, ZONES[i % ZONES.length]]),
  );
  /** Intrusions while labeller wanted the key (it takes it back), by when; and those it stopped wanting within the grace. */
  const intrusions = new Map<string, number>();
  const racing = new Set<string>();
  const world = (): WorldState => ({ config, teams, source, catalog: sites, held, intruded, racing, zones });
  /** What the oracle wanted, over time, per namespace. */
  const history: { at: number; wanted: Map<string, Record<string, string>> }[] = [];
  const record = () => {
    // Once labeller wants the team key of an intruded object again, it takes it back (force):
    // from now, as for an intrusion while it wanted the key, so that the key unwanted once more
    // within the grace may still be the intruder's.
    for (const key of [...intruded, ...racing]) {
      if (!(KEYS.team in wanted(world(), key.split('/')[1]!))) continue;
      intruded.delete(key);
      racing.delete(key);
      intrusions.set(key, Date.now());
    }
    // Unwanted soon after an intrusion (a reload, a namespace's team removed): labeller may not
    // have taken it back yet (a stale view, a member starved), and then it is the intruder's.
    for (const [key, at] of intrusions) {
      if (KEYS.team in wanted(world(), key.split('/')[1]!)) continue;
      if (Date.now() - at < GRACE_MS) racing.add(key);
      intrusions.delete(key);
    }
    history.push({ at: Date.now(), wanted: new Map(namespaces.map((ns) => [ns, wanted(world(), ns)])) });
    for (const [source, { since }] of held) {
      for (const ns of namespaces) since.get(ns)?.add(wanted(world(), ns)[KEYS[source]]);
    }
  };
  /**
   * A process about to start reads each source's document as written: refused, it holds the
   * source's key where it is on each object now (a hold already begun keeps its values).
   */
  const starting = async () => {
    const sources = (['cc', 'site'] as const).filter((source) => refused[source] && !held.has(source));
    if (sources.length === 0) return;
    const now = await snapshot(cluster, namespaces);
    for (const source of sources) {
      held.set(source, {
        objects: new Map([...now.objects].map(([key, { labels }]) => [key, labels[KEYS[source]]])),
        since: new Map(namespaces.map((ns) => [ns, new Set()])),
      });
    }
    record();
  };
  let predicted = 0;
  const creates = { made: 0, judged: 0 };
  /** ConfigMaps created once converged carrying every key the oracle wants (`namespace/name`): they need no write at all. */
  const createdRight = new Set<string>();
  /** With admission, the dry-run creates the sampler makes every second in each namespace. */
  const probes = { made: 0, judged: 0 };
  /** When the admission policies of the config in force must be enforced. */
  const windows = new PolicyWindows(GRACES);
  /** What is revoked from labeller now. */
  const revoked = new Set<string>();
  /** The rights on the policies given back, once a revocation's time is over (the operations go on meanwhile). */
  let restoring: Promise<void> | undefined;
  let patches = 0;
  let peakRssMiB = 0;
  let restarts = 0;
  let convergedSeconds: number | undefined;

  // A run before may have left the CRD installed, or its policies (it stopped part-way): each run
  // starts without them.
  await cluster.deleteCrd(CRD.group, CRD.plural).catch(() => {});
  await removePolicies(cluster).catch(() => {});
  for (const [node, zone] of zones) {
    await cluster.patchLabels(`/api/v1/nodes/${node}`, { [NODE_ZONE]: zone ?? null }, 'chaos');
  }
  for (const [i, ns] of namespaces.entries()) {
    await cluster.patchLabels(`/api/v1/namespaces/${ns}`, { team: teams.get(ns) ?? null }, 'chaos');
    await cluster.createMany(`/api/v1/namespaces/${ns}/configmaps`, ['cm-0', 'cm-1', 'cm-2'], (name) => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name },
    }));
    await cluster.post(`/apis/apps/v1/namespaces/${ns}/deployments`, deployment(`web-${i}`, 1));
  }
  /** Replaces the source's ConfigMap, or creates it when it is gone. */
  const writeSource = (document: unknown) =>
    cluster.put(`/api/v1/namespaces/${sourceNs}/configmaps/teams`, sourceMap(sourceNs, document)).catch(() =>
      cluster.post(`/api/v1/namespaces/${sourceNs}/configmaps`, sourceMap(sourceNs, document))
    );
  await cluster.post(`/api/v1/namespaces/${sourceNs}/configmaps`, sourceMap(sourceNs, INITIAL_SOURCE));
  const splits = has('split');
  /** With split operations, the config's generation: one more at each reload. */
  let generation = 1;
  /** The member on an older config now (split), if any. */
  let split: number | undefined;
  // One file per place, the same but for a member on an older config.
  const configPaths = Array.from(
    { length: shape.replicas },
    (_, i) => cluster.writeFile(`chaos-${seed}-${i}.yaml`, ''),
  );
  const yamlOf = (i: number) =>
    i === split
      ? configYaml({ ...config, static: true }, namespaces, sourceNs, catalog, {
        generation: generation - 1,
        staticValue: STALE,
      })
      : configYaml(config, namespaces, sourceNs, catalog, splits ? { generation } : {});
  const writeConfig = () => {
    for (const [i, path] of configPaths.entries()) writeFileSync(path, yamlOf(i));
  };
  writeConfig();
  // As the chart runs it: a ServiceAccount's token, through the fault proxy.
  const account = await cluster.serviceAccount(sourceNs, 'labeller', rules(mode, admission, revoked), proxy.url);
  const grant = () => cluster.setRules(account.role, rules(mode, admission, revoked));
  // Through the write proxy, each place names itself in TLS (and trusts the proxy's CA).
  const kubeconfigs = Array.from(
    { length: shape.replicas },
    (_, i) =>
      writeProxy
        ? copyKubeconfig(account.kubeconfig, dirname(configPaths[0]!), {
          cluster: {
            'certificate-authority-data': readFileSync(writeProxy.caFile).toString('base64'),
            'tls-server-name': serverName(place(i)),
          },
        })
        : account.kubeconfig,
  );
  // As the chart runs them. Under leader election a restarted process is the same group, so the
  // field-manager guard lets it in whatever config its predecessor's Lease recorded; members of
  // a shard group never block each other either. With the chart's secret key for the sources'
  // memory, so a restart judges the source's key set key by key, as the oracle does.
  const probePorts = await freePorts(shape.replicas);
  const memoryKey = cluster.writeFile(
    `chaos-${seed}.key`,
    `${createHash('sha256').update(`sources' memory, seed ${seed}`).digest('base64')}\n`,
  );
  /** Each place's wall clock, in seconds off the host's (skew). */
  const clocks = Array.from({ length: shape.replicas }, () => 0);
  /** Every process started, in order: what the Leases of each went through is judged at the end (leaseTakeovers). */
  const processes: Process[] = [];
  const start = (i: number) => {
    const labeller = new Labeller([
      '--health-probe-bind-address',
      `127.0.0.1:${probePorts[i]}`,
      '--config',
      configPaths[i]!,
      '--sources-memory-key-file',
      memoryKey,
      ...(mode === 'sharded' ? ['--shards', 'auto', '--shard-group', SHARD_GROUP] : ['--leader-elect']),
      '--leader-election-namespace',
      sourceNs,
      ...(mode === 'sharded' ? SHARD_TIMINGS : LEADER_TIMINGS),
      ...(mode === 'sharded' && splits ? ['--shard-config-skew', `${SPLIT_SKEW_MS / 1000}s`] : []),
      ...(admission ? ['--admission-policies', '--requeue-after', `${REQUEUE_S}s`] : []),
    ], { kubeconfig: kubeconfigs[i], clockOffsetSeconds: clocks[i] });
    const started: Process = { labeller, place: i };
    void labeller.exited.then(() => (started.exitedAt = Date.now()));
    processes.push(started);
    return labeller;
  };
  /** Notes that the scenario signals `labeller` (stopped, killed): what its Leases go through from then on is its own doing. */
  const signalled = (labeller: Labeller) => {
    const found = processes.find((p) => p.labeller === labeller);
    if (found) found.signalledAt ??= Date.now();
  };
  /** Disturbances that may keep processes from renewing their Leases, with the replica for a SIGSTOP. */
  const disturbances: Disturbance[] = [];
  /** When the holds began (writeproxy.ts's heldSince) during which the held process's claim lapsed: their writes are not judged. */
  const lapsedHolds = new Set<number>();
  /** Each place's process; a member that left or crashed has none until one joins in its place. */
  const replicas: (Labeller | undefined)[] = Array.from(
    { length: shape.replicas },
    (_, i) => i < shape.initial ? start(i) : undefined,
  );
  /** The replicas the scenario is stopping on purpose (kill, crash, leave). */
  const killing = new Set<number>();
  /**
   * The identities of the processes stopped mid-run (SIGKILL, or a member leaving): their guard
   * Leases may stay behind (see leftLeases).
   */
  const gone = new Set<string>();
  // The first writer applies the policies once it leads.
  windows.started();
  record();

  /** Violations of "labels at create" said already (one per namespace, what was carried and wanted). */
  const saidAtCreate = new Set<string>();
  /** What the last dry-run create in each namespace carried. */
  const carried = new Map<string, string>();
  /** Since a reload changed what a create in these namespaces must carry (a dry-run create there not yet right). */
  let reloaded: { at: number; namespaces: Set<string> } | undefined;
  /** How long after each such reload a dry-run create in each namespace carried what the new policies set, in ms. */
  const reloadLags: number[] = [];
  /**
   * Judges what `what`, a create in `ns` made at `at`, carried (`labels`) against `set`, what the
   * policies of the config in force then set: once answered, if it was made outside the grace
   * windows (windows.ts), counted in `count`. Answers whether it carried exactly that.
   */
  const atCreateJudged = (
    ns: string,
    what: string,
    at: number,
    set: Readonly<Record<string, string>>,
    labels: Readonly<Record<string, string>>,
    count: { judged: number },
  ): boolean => {
    const right = matches(labels, Object.fromEntries(Object.entries(set).map(([key, value]) => [key, [value]])));
    if (right && reloaded && at >= reloaded.at && reloaded.namespaces.delete(ns)) reloadLags.push(at - reloaded.at);
    if (!windows.settled(ns, at)) return right;
    count.judged++;
    const said = `${ns}: ${JSON.stringify(labels)} for ${JSON.stringify(set)}`;
    if (!right && !saidAtCreate.has(said)) {
      saidAtCreate.add(said);
      violations.push({
        invariant: 'labels at create',
        detail: `${what} in ${ns} at ${new Date(at).toISOString()} carried ${
          JSON.stringify(labels)
        }; the policies of the config in force set ${JSON.stringify(set)}`,
      });
    }
    return right;
  };
  /**
   * Creates ConfigMap `name` in `ns` (`final`: once converged, nothing changing after). One
   * created right needs no write; with admission, it is judged at its create. Tried again after a
   * create whose answer was lost (retrying), it has none to judge and is taken for one that needs a
   * write.
   */
  const createConfigMap = async (ns: string, name: string, final = false) => {
    const at = Date.now();
    const set = atCreate(world(), ns);
    const object = await cluster.post<{ metadata: { labels?: Record<string, string> } }>(
      `/api/v1/namespaces/${ns}/configmaps`,
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name } },
    ).catch(made);
    if (!object) {
      predicted++;
      return;
    }
    const labels = scenarioLabels(object.metadata.labels);
    creates.made++;
    const expectation = expected(world(), `configmaps/${ns}/${name}`, INTRUDER);
    const right = matches(labels, expectation);
    if (!right) predicted++;
    // Needs no write only if nothing else would do: a held source's key admits its value as well
    // as none (a process that read the source writes it, one started into an outage does not).
    else if (final && Object.values(expectation).every((values) => values.length === 1)) {
      createdRight.add(`${ns}/${name}`);
    }
    if (admission) atCreateJudged(ns, `configmaps/${ns}/${name}, created`, at, set, labels, creates);
  };
  /**
   * What a create in `ns` carries now: a server-side dry run (nothing is stored), judged as a
   * create. Answers whether it carried what the policies set.
   */
  const probe = async (ns: string): Promise<boolean> => {
    const at = Date.now();
    const set = atCreate(world(), ns);
    const object = await cluster.client.json<{ metadata: { labels?: Record<string, string> } }>(
      'POST',
      `/api/v1/namespaces/${ns}/configmaps`,
      {
        query: { dryRun: 'All' },
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'dry-run' } }),
      },
    );
    probes.made++;
    carried.set(ns, JSON.stringify(scenarioLabels(object.metadata.labels)));
    return atCreateJudged(ns, 'a dry-run create', at, set, scenarioLabels(object.metadata.labels), probes);
  };

  // Every second: the objects' labels, checked against the oracle's history (never strip), what a
  // create carries (labels at create, with admission), and RSS.
  let previous: Sample | undefined;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      try {
        const sample = await snapshot(cluster, namespaces);
        if (previous) violations.push(...stripped(previous, sample, history));
        previous = sample;
        if (admission) {
          const at = Date.now();
          let right = true;
          for (const ns of namespaces) right = (await probe(ns)) && right;
          windows.observed(right, at);
        }
        for (const [i, labeller] of replicas.entries()) {
          if (!labeller) continue;
          const readiness = await readyz(probePorts[i]!);
          if (readiness && !readiness.ready && !/^- \S/m.test(readiness.text)) {
            violations.push({
              invariant: 'health',
              detail: `replica ${i} unready without a reason: ${readiness.text}`,
            });
          }
          const rss = labeller.running ? procSample(labeller.pid)?.rss : undefined;
          // A process on its way out reads as no RSS.
          if (rss !== undefined && Number.isFinite(rss)) peakRssMiB = Math.max(peakRssMiB, rss / 2 ** 20);
          // Exited by itself: as the kubelet would, start it again. Losing leadership (a stop past
          // the renew deadline; a shard member has none to lose: it gives its namespaces up and
          // takes them again), an API server that cannot be reached at start, and a start while
          // the config file is invalid (exit 2 naming it: a crash loop until it is valid again)
          // are reasons to exit.
          if (labeller.running || killing.has(i)) continue;
          const exit = await labeller.exited;
          // Stopped on purpose meanwhile: the scenario starts it again, or leaves its place empty.
          if (killing.has(i) || replicas[i] !== labeller) continue;
          const reasons = mode === 'leader'
            ? /"lost leadership"|cannot reach the API server/
            : /cannot reach the API server/;
          const named = reasons.test(labeller.stderr) ||
            (exit.code === 2 && configPaths.some((path) => exit.fatal?.includes(path) === true));
          if (!named || crashed(labeller.stderr)) {
            violations.push({
              invariant: 'health',
              detail: `replica ${i} exited ${describeExit(exit)} by itself (whole log: ${
                keepLog(seed, i, labeller)
              }): ${labeller.stderr.slice(-1500)}`,
            });
          }
          restarts++;
          await starting();
          if (killing.has(i) || replicas[i] !== labeller) continue;
          replicas[i] = start(i);
        }
      } catch {
        // The API server restarting: the next sample catches up.
      }
      await sleep(1000);
    }
  })();

  const objectsIn = (ns: string): number =>
    [...(previous?.objects.keys() ?? [])].filter((k) => k.split('/')[1] === ns).length;
  /** Counts the objects whose wanted labels `change` alters, as the oracle sees them. */
  const predict = (change: () => void): void => {
    const before = namespaces.map((ns) => JSON.stringify(wanted(world(), ns)));
    change();
    for (const [i, ns] of namespaces.entries()) {
      if (JSON.stringify(wanted(world(), ns)) !== before[i]) predicted += objectsIn(ns);
    }
    record();
  };
  /** Smaller content written to the ConfigMap source, taken by the oracle SOURCE_ACCEPT_MS later. */
  let accepting: { readonly timer: ReturnType<typeof setTimeout>; readonly at: number } | undefined;
  const accept = (shrunk: ReadonlyMap<string, string>) => {
    const timer = setTimeout(() => {
      log(`seed ${seed}: the source's smaller content (${shrunk.size} of ${source.size} keys) stayed: taken`);
      predict(() => {
        source = shrunk;
        refused.cc = false;
        held.delete('cc');
      });
    }, SOURCE_ACCEPT_MS);
    accepting = { timer, at: Date.now() + SOURCE_ACCEPT_MS };
  };
  /**
   * Before the source changes again: smaller content held stops being taken. labeller's wait
   * began when it read the write, a moment after the oracle's: one due within a second is waited
   * out, taken by both, rather than judged on the side of a race.
   */
  const interruptAcceptance = async () => {
    const left = accepting ? accepting.at - Date.now() : Infinity;
    if (left < 1000) await sleep(Math.max(0, left) + 1000);
    clearTimeout(accepting?.timer);
    accepting = undefined;
  };
  /** Since when the HTTPS source's body as served now can be read. */
  let readableSince = Date.now();
  /**
   * Waits until every process has polled the body served now (every second, no later after a
   * failure): the oracle takes each body as read, and one replaced sooner may be missed by all.
   */
  const bodyRead = async () => {
    const wait = readableSince + CATALOG_READ_MS - Date.now();
    if (wait > 0) await sleep(wait);
  };
  /** The HTTPS source's next body, with what the oracle makes of it. */
  const serve = async (body: string) => {
    await bodyRead();
    const verdict = catalogVerdict(sites, body);
    refused.site = !('good' in verdict);
    if ('good' in verdict) {
      predict(() => {
        sites = verdict.good;
        held.delete('site');
      });
    }
    catalog.body = body;
    readableSince = Date.now();
  };
  /**
   * Stops replica `i` on purpose with `stop`, then lets the sampler look after it again. A process
   * that exited by itself is first replaced by the sampler, which judges its exit.
   */
  const stopping = async (i: number, stop: (labeller: Labeller) => Promise<void>) => {
    await eventually(async () => replicas[i]?.running, `replica ${i} running`, 10_000).catch(() => {});
    killing.add(i);
    try {
      const labeller = replicas[i];
      if (labeller) await stop(labeller);
    } finally {
      killing.delete(i);
    }
  };
  const goneNow = (labeller: Labeller) => {
    const identity = identityOf(labeller);
    if (identity) gone.add(identity);
  };
  /** SIGKILLs `labeller`; its Leases stay behind until the members delete them. */
  const kill = async (labeller: Labeller) => {
    signalled(labeller);
    labeller.kill();
    await labeller.exited;
    goneNow(labeller);
  };
  /** Kills replica `i` and starts it again. */
  const restart = (i: number) =>
    stopping(i, async (labeller) => {
      await kill(labeller);
      restarts++;
      await starting();
      replicas[i] = start(i);
      await firstReads(replicas[i]);
    });
  /** Kills member `i` for good: its place stays empty until a member joins in it. */
  const crash = (i: number) =>
    stopping(i, async (labeller) => {
      await kill(labeller);
      replicas[i] = undefined;
    });
  /** Member `i` leaves: SIGTERM, and it must exit 0 without a crash (its member Lease deleted, checked at the end). */
  const leave = (i: number) =>
    stopping(i, async (labeller) => {
      await terminate(i, labeller);
      replicas[i] = undefined;
    });
  /** Stops `labeller` in place `i` with SIGTERM: it must exit 0 without a crash, within 30 s and `graceMs`. */
  const terminate = async (i: number, labeller: Labeller, graceMs = 0) => {
    // A process just started (the sampler may have replaced one that exited by itself) handles
    // signals once its runtime has started it: its first log line says so.
    await labeller.waitForLog(() => true, 30_000).catch(() => {});
    signalled(labeller);
    const exit = await labeller.stop('SIGTERM', 30_000 + graceMs);
    goneNow(labeller);
    if (exit.code !== 0 || crashed(labeller.stderr)) {
      violations.push({
        invariant: 'health',
        detail: `${mode === 'sharded' ? 'member' : 'replica'} ${i} stopped (SIGTERM) with ${
          describeExit(exit)
        } (whole log: ${keepLog(seed, i, labeller)}): ${labeller.stderr.slice(-2000)}`,
      });
    }
  };
  /** Stops replica `i` with SIGTERM (a rolling update: it hands over) and starts it again, once `meanwhile` is done. */
  const rollOver = (i: number, meanwhile?: () => Promise<unknown>) =>
    stopping(i, async (labeller) => {
      await terminate(i, labeller);
      await meanwhile?.();
      restarts++;
      await starting();
      replicas[i] = start(i);
      await firstReads(replicas[i]);
    });
  /** The place of the leader now (leader mode), by its Lease's holder; undefined when none leads within 20 s. */
  const leaderPlace = async (): Promise<number | undefined> =>
    await eventually(
      async () => {
        const lease = await cluster.get<Lease>(`/apis/coordination.k8s.io/v1/namespaces/${sourceNs}/leases/labeller`);
        const holder = lease.spec.holderIdentity;
        const i = replicas.findIndex((labeller) => labeller?.running && holder && identityOf(labeller) === holder);
        return i >= 0 ? [i] : undefined;
      },
      'a leader',
      20_000,
      250,
    ).then(([i]) => i).catch(() => undefined);

  /** The ConfigMap source rewritten with `document`, and what the oracle makes of it. */
  const rewriteSource = async (document: unknown) => {
    await interruptAcceptance();
    const verdict = sourceVerdict(source, document);
    refused.cc = !('good' in verdict);
    if ('good' in verdict) {
      predict(() => {
        source = verdict.good;
        held.delete('cc');
      });
    }
    // Timed from before the write: labeller may read it before the write's answer is back here.
    if ('shrunk' in verdict && verdict.shrunk) accept(verdict.shrunk);
    await writeSource(document);
  };
  /** Waits until every object is as the oracle says (30 s at most); answers whether it is: an operation that judges what follows starts calm. */
  const calm = async (what: string) => {
    const wrong = await settle(cluster, namespaces, world, 30_000);
    if (wrong.length > 0) log(`seed ${seed}: ${what} starts unsettled: ${wrong.slice(0, 3).join('; ')}`);
    return wrong.length === 0;
  };

  const perform = async (operation: Operation, ns: string): Promise<void> => {
    switch (operation.op) {
      case 'create':
        await createConfigMap(ns, operation.name);
        break;
      case 'delete':
        await cluster.delete(`/api/v1/namespaces/${ns}/configmaps/${operation.name}`).catch(() => {});
        intruded.delete(`configmaps/${ns}/${operation.name}`);
        intrusions.delete(`configmaps/${ns}/${operation.name}`);
        racing.delete(`configmaps/${ns}/${operation.name}`);
        break;
      case 'team':
        await windows.change('namespace', async () => {
          predict(() => teams.set(ns, operation.team ?? undefined));
          await cluster.patchLabels(`/api/v1/namespaces/${ns}`, { team: operation.team }, 'chaos');
        }, ns);
        break;
      case 'zone': {
        const node = `kwok-node-${operation.node}`;
        const zone = operation.zone ?? undefined;
        // Exactly the pods on the node are written, once each, where the zone changes.
        if (zones.get(node) !== zone) {
          predicted += [...(previous?.objects.values() ?? [])].filter((object) => object.node === node).length;
        }
        zones.set(node, zone);
        await cluster.patchLabels(`/api/v1/nodes/${node}`, { [NODE_ZONE]: operation.zone }, 'chaos');
        break;
      }
      case 'source':
        await rewriteSource(operation.document);
        break;
      case 'catalog':
        await serve(operation.body);
        break;
      case 'catalog-down':
        // Unreachable: its last good content stays.
        await catalog.down();
        await sleep(operation.ms);
        await catalog.up();
        readableSince = Date.now();
        break;
      case 'catalog-flip':
        await bodyRead();
        for (let i = 0, end = Date.now() + operation.ms; Date.now() < end; i++) {
          catalog.body = operation.bodies[i % 2]!;
          await sleep(300);
        }
        await serve(operation.bodies[1]);
        break;
      case 'reload':
        await windows.change('reload', () => {
          predict(() => (config = operation.config));
          generation++;
          writeConfig();
        });
        reloaded = {
          at: Date.now(),
          namespaces: new Set(
            namespaces.filter((namespace) => JSON.stringify(atCreate(world(), namespace)) !== carried.get(namespace)),
          ),
        };
        break;
      case 'intrude':
        // Wanted by labeller: it takes the key back (force); else the intruder's value stays theirs.
        if (!(KEYS.team in wanted(world(), ns))) intruded.add(`configmaps/${ns}/${operation.name}`);
        else intrusions.set(`configmaps/${ns}/${operation.name}`, Date.now());
        record();
        await cluster.patchLabels(
          `/api/v1/namespaces/${ns}/configmaps/${operation.name}`,
          { [KEYS.team]: INTRUDER },
          'intruder',
        );
        predicted++;
        break;
      case 'scale': {
        await cluster.client.json('PATCH', `/apis/apps/v1/namespaces/${ns}/deployments/web-${operation.ns}/scale`, {
          headers: { 'content-type': 'application/merge-patch+json' },
          body: JSON.stringify({ spec: { replicas: operation.replicas } }),
        });
        // Pods created while the policies are enforced need no write when the policies set every key wanted.
        const right = admission && windows.settled(ns, Date.now()) &&
          Object.keys(atCreate(world(), ns)).length === Object.keys(wanted(world(), ns)).length;
        predicted += right ? 0 : operation.replicas + 1;
        break;
      }
      case 'crd':
        if (operation.install) {
          // Tried again after failing part-way (retrying), what was made stays: made once.
          await cluster.createCrd(CRD.group, CRD.plural, CRD.kind).catch(made);
          crd = true;
          for (const namespace of namespaces) {
            for (const name of ['widget-0', 'widget-1']) {
              const widget = await cluster.post(`/apis/${CRD.group}/v1/namespaces/${namespace}/${CRD.plural}`, {
                apiVersion: `${CRD.group}/v1`,
                kind: CRD.kind,
                metadata: { name },
              }).catch(made);
              if (widget !== undefined) predicted++;
            }
          }
        } else {
          await cluster.deleteCrd(CRD.group, CRD.plural);
          crd = false;
        }
        break;
      case 'revoke':
        if (operation.resource === POLICIES) {
          // labeller cannot change its policies meanwhile (they are refused, and reported), nor put
          // back those removed; given back, it applies them at its next resync. One at a time.
          await restoring;
          revoked.add(POLICIES);
          windows.revoked(true);
          await grant();
          if (operation.remove) await removePolicies(cluster);
          restoring = (async () => {
            await sleep(operation.ms);
            revoked.delete(POLICIES);
            await retrying('giving the rights on the policies back', grant, log);
            windows.revoked(false);
          })();
          // Awaited after the operations (and by the next revocation of them); until then, not unhandled.
          restoring.catch(() => {});
          break;
        }
        // Unreadable or unwritable meanwhile: nothing of that kind changes; given back, it converges.
        revoked.add(operation.resource);
        await grant();
        await sleep(operation.ms);
        revoked.delete(operation.resource);
        await grant();
        break;
      case 'tamper':
        await windows.change('tamper', () => tamper(cluster, operation.how));
        break;
      case 'kill':
        await restart(operation.replica);
        break;
      case 'crash':
        await crash(operation.replica);
        break;
      case 'leave':
        await leave(operation.replica);
        break;
      case 'join':
        // A replay that joins where a member runs has nothing to start.
        if (replicas[operation.replica]) break;
        restarts++;
        await starting();
        await firstReads(replicas[operation.replica] = start(operation.replica));
        break;
      case 'stop': {
        const labeller = replicas[operation.replica];
        if (!labeller?.running) break;
        process.kill(labeller.pid, 'SIGSTOP');
        await sleep(operation.ms);
        process.kill(labeller.pid, 'SIGCONT');
        break;
      }
      case 'drop':
        proxy.drop();
        break;
      case 'delay':
        proxy.delay(operation.delayMs);
        await sleep(operation.ms);
        proxy.delay(0);
        break;
      case 'reload-invalid':
        // Rejected: the config in force stays; then it is written back, so a restart finds a valid one.
        for (const path of configPaths) writeFileSync(path, 'labels: [unclosed\n');
        await sleep(operation.ms);
        writeConfig();
        break;
      case 'source-gone':
        // Unreadable: its last good content stays, and smaller content held did not stay; then
        // back with the content in use.
        await interruptAcceptance();
        await cluster.delete(`/api/v1/namespaces/${sourceNs}/configmaps/teams`).catch(() => {});
        await sleep(operation.ms);
        await writeSource(Object.fromEntries(source));
        refused.cc = false;
        // Held keys stay held: the content written back is the oracle's last good, which the
        // process that holds them never read; it reads it now and takes it (same keys).
        predict(() => held.delete('cc'));
        break;
      case 'restart-apiserver':
        await cp.stopApiServer();
        await sleep(operation.ms);
        await cp.startApiServer();
        restarts++;
        break;
      case 'skew': {
        if (!faketime) break;
        const i = operation.replica;
        clocks[i] = operation.seconds;
        // Behind, it must find the run's certificates (the HTTPS source's, the write proxy's) valid already.
        await sleep(Math.max(0, certificatesAt + Math.abs(operation.seconds) * 1000 + 2000 - Date.now()));
        if (replicas[i]) await rollOver(i);
        if (mode === 'leader') {
          // The skewed replica leads: the other hands over to it, and starts again once it has.
          const leader = await leaderPlace();
          if (leader !== undefined && leader !== i) await rollOver(leader, leaderPlace);
        }
        log(
          `seed ${seed}: replica ${i}'s clock ${Math.abs(operation.seconds)} s ${
            operation.seconds > 0 ? 'ahead' : 'behind'
          }`,
        );
        break;
      }
      case 'hold': {
        if (!writeProxy) break;
        // From a calm start: the last operation's disturbance over (a delay's backlog could make
        // the claim lapse during the hold, which is not the handover judged here).
        await calm('hold');
        const i = mode === 'leader' ? await leaderPlace() : operation.replica;
        const holder = i === undefined ? undefined : replicas[i];
        if (i === undefined || !holder?.running) break;
        const name = place(i);
        const mark = holder.logs.length;
        const since = writeProxy.hold(name);
        const heldNow = () =>
          writeProxy.writes.filter((write) => write.place === name && write.heldSince === since).length;
        const released = Promise.withResolvers<void>();
        let stopped: Promise<void> | undefined;
        try {
          // Its writes of the first content are sent, and held. With none to make (the config
          // reads no source now), another: with admission, the policies' next resync.
          await rewriteSource(operation.documents[0]);
          await sleep(1500);
          await eventually(async () => heldNow() > 0, 'a write held', admission ? HOLD_WAIT_MS : 1500, 100)
            .catch(() => {});
          // It stops (SIGTERM), handing over once they are answered, and is started again after
          // (as a rolling update would), its writes no longer held.
          const until = Date.now() + operation.ms;
          stopped = stopping(i, async (labeller) => {
            await terminate(i, labeller, operation.ms);
            await released.promise;
            restarts++;
            await starting();
            replicas[i] = start(i);
            await firstReads(replicas[i]);
          });
          await sleep(1000);
          // Its successor writes the second content, after it.
          await rewriteSource(operation.documents[1]);
          await sleep(Math.max(0, until - Date.now()));
        } finally {
          writeProxy.release(name);
          released.resolve();
        }
        await stopped;
        log(`seed ${seed}: ${heldNow()} PATCHes of replica ${i} held until ${operation.ms} ms after it was stopped`);
        // Its claim lapsed before it let go (its renewals late, not its writes): writes sent
        // while it held the claim may land up to the hold's length after it, more than the margin
        // a lapse leaves (lease duration against renew deadline). Not the handover judged here.
        const lapse = holder.since(mark).find((line) =>
          line.msg === 'lost leadership' || line.msg.startsWith('shard membership Lease lapsed')
        );
        if (lapse) {
          lapsedHolds.add(since);
          log(
            `seed ${seed}: replica ${i}'s claim lapsed during the hold (${lapse.msg}): its held writes are not judged`,
          );
          // Its renewals are not held: only a disturbance of late explains a lapse.
          const explained = disturbances.some((d) =>
            (d.place === undefined || d.place === i) && d.to >= since - EXPLAIN_MS
          );
          if (!explained) {
            violations.push({
              invariant: 'one writer',
              detail: `replica ${i}'s claim lapsed while only its PATCHes were held (since ${
                iso(since)
              }), with no disturbance in the ${EXPLAIN_MS / 1000} s before: ${JSON.stringify(lapse)}`,
            });
          }
        }
        break;
      }
      case 'shrink-restart': {
        await rewriteSource(operation.full);
        const calmed = await calm('shrink-restart');
        const before = await snapshot(cluster, namespaces);
        const marks = new Map(replicas.flatMap((labeller) => labeller ? [[labeller, labeller.logs.length]] : []));
        const written = Date.now();
        await rewriteSource(operation.document);
        const verdict = sourceVerdict(new Map(Object.entries(operation.full)), operation.document);
        const smaller = 'shrunk' in verdict ? verdict.shrunk?.size : undefined;
        // Not taken before it stayed SOURCE_ACCEPT_MS (labeller's wait begins when it reads it, after the write).
        const premature = calmed ? watchPremature(before, written + SOURCE_ACCEPT_MS - 500) : Promise.resolve();
        // Every replica named SIGKILLed, then each started again: each reads the smaller content first.
        const killed = operation.replicas.filter((i) => replicas[i]);
        const allKilled = Promise.withResolvers<void>();
        let left = killed.length;
        await Promise.all(killed.map((i) =>
          stopping(i, async (labeller) => {
            await kill(labeller);
            if (--left === 0) allKilled.resolve();
            await allKilled.promise;
            restarts++;
            await starting();
            replicas[i] = start(i);
          })
        ));
        await Promise.all(killed.map((i) => replicas[i] && firstReads(replicas[i])));
        const read = Date.now();
        await premature;
        // Nor taken so in any process's own view: a restarted one may take longer than that to write.
        for (const [i, labeller] of replicas.entries()) {
          const from = labeller ? marks.get(labeller) ?? 0 : 0;
          const index = labeller?.logs.findIndex((line, index) =>
            index >= from && (line.msg === 'source loaded' || line.msg === 'source changed') &&
            line['source'] === 'teams' && line['keys'] === smaller
          ) ?? -1;
          if (index < 0 || labeller!.arrivals[index]! >= written + SOURCE_ACCEPT_MS - 200) {
            continue;
          }
          violations.push({
            invariant: 'never strip',
            detail: `replica ${i} took the ConfigMap source's smaller content (${smaller} keys, written ${
              iso(written)
            }) at ${iso(labeller!.arrivals[index]!)}, before it had stayed ${SOURCE_ACCEPT_MS / 1000} s: ${
              JSON.stringify(labeller!.logs[index])
            }`,
          });
        }
        // The oracle takes it SOURCE_ACCEPT_MS after the write; from then on, labeller must within the margin.
        await sleep(Math.max(0, written + SOURCE_ACCEPT_MS + 200 - Date.now()));
        const wrong = await settle(cluster, namespaces, world, read + SOURCE_ACCEPT_MS + SHRINK_TAKEN_MS - Date.now());
        if (wrong.length > 0) {
          violations.push({
            invariant: 'convergence',
            detail: `the ConfigMap source's smaller content (written ${iso(written)}; replicas ${
              killed.join(', ')
            } restarted into it had read it by ${iso(read)}) not taken ${
              (SOURCE_ACCEPT_MS + SHRINK_TAKEN_MS) / 1000
            } s after they read it: ${wrong.slice(0, 5).join('; ')}`,
          });
        }
        break;
      }
      case 'split': {
        const i = operation.replica;
        if (!replicas[i]?.running || replicas.filter((labeller) => labeller?.running).length < 2) break;
        await calm('split');
        const marks = new Map(replicas.flatMap((labeller) => labeller ? [[labeller, labeller.logs.length]] : []));
        // Its objects get the older config's value, then the newest's again: two writes each (its
        // namespaces are not known here, so any namespace's).
        predicted += 2 * namespaces.reduce((sum, namespace) => sum + objectsIn(namespace), 0);
        const from = Date.now();
        await windows.change('reload', () => {
          split = i;
          writeConfig();
        });
        // A live reload to the older config, or a process started on it.
        if (operation.restart) {
          await stopping(i, async (labeller) => {
            await kill(labeller);
            restarts++;
            await starting();
            replicas[i] = start(i);
            await firstReads(replicas[i]);
          });
        }
        log(`seed ${seed}: member ${i} on an older config (generation ${generation - 1}, ${KEYS.static}: ${STALE})`);
        await judgeSplit(i, from, from + operation.ms, marks);
        // The newest config again: it rejoins.
        await windows.change('reload', () => {
          split = undefined;
          writeConfig();
        });
        const problem = await rejoined(i);
        if (problem) {
          violations.push({
            invariant: 'shard ranges',
            detail: `member ${i}, on the newest config again, had not rejoined the group 30 s later: ${problem}`,
          });
        }
        break;
      }
      case 'pause':
        await sleep(operation.ms);
        break;
    }
  };
  /**
   * Until `until`, no object of `before` (same uid) carries another value of the ConfigMap
   * source's key than it did: the smaller content is not taken before it stayed SOURCE_ACCEPT_MS.
   */
  const watchPremature = async (before: Sample, until: number) => {
    const said = new Set<string>();
    while (Date.now() < until) {
      const now = await snapshot(cluster, namespaces).catch(() => undefined);
      // Read entirely before the deadline: a list answered after it may show the content taken, rightly.
      const done = Date.now();
      for (const [key, object] of done < until ? now?.objects ?? [] : []) {
        const then = before.objects.get(key);
        if (!then || then.uid !== object.uid || then.labels[KEYS.cc] === object.labels[KEYS.cc] || said.has(key)) {
          continue;
        }
        said.add(key);
        violations.push({
          invariant: 'never strip',
          detail: `${KEYS.cc} of ${key} went from ${then.labels[KEYS.cc] ?? 'none'} to ${
            object.labels[KEYS.cc] ?? 'none'
          } at ${iso(now!.at)}, before the source's smaller content had stayed ${SOURCE_ACCEPT_MS / 1000} s (until ${
            iso(until + 500)
          })`,
        });
      }
      await sleep(200);
    }
  };
  /**
   * A split from `from` to `until`: every running member reports it (its log line, a /readyz
   * note) by SPLIT_SETTLE_MS, and from then on every object carries what the newest config says.
   */
  const judgeSplit = async (i: number, from: number, until: number, marks: ReadonlyMap<Labeller, number>) => {
    const settledAt = from + SPLIT_SETTLE_MS;
    const members = replicas.flatMap((labeller, j) => labeller?.running ? [{ labeller, j }] : []);
    const reports = Promise.all(members.map(async ({ labeller, j }) => {
      const line = await labeller.waitForLog(
        (l) => l.msg === 'shard group split between configs',
        Math.max(0, settledAt - Date.now()),
        // From the split on (a line the member logged before is another split's).
        marks.get(labeller) ?? 0,
      ).catch(() => undefined);
      if (!line) {
        violations.push({
          invariant: 'health',
          detail: `member ${j} did not report member ${i}'s older config within ${
            SPLIT_SETTLE_MS / 1000
          } s (no "shard group split between configs" line)`,
        });
      }
    }));
    const noted = new Set<number>();
    let wrongBefore = new Set<string>();
    let said = false;
    while (Date.now() < until) {
      await sleep(1000);
      if (Date.now() < settledAt) continue;
      const sample = await snapshot(cluster, namespaces).catch(() => undefined);
      if (!sample) continue;
      const wrong = new Map(
        [...sample.objects].flatMap(([key, { labels, node }]) =>
          matches(labels, expected(world(), key, INTRUDER, node)) ? [] : [[key, JSON.stringify(labels)] as const]
        ),
      );
      // Wrong in two samples in a row: not a write under way.
      const lasting = [...wrong].filter(([key]) => wrongBefore.has(key));
      if (lasting.length > 0 && !said) {
        said = true;
        violations.push({
          invariant: 'shard ranges',
          detail: `${
            ((sample.at - from) / 1000).toFixed(0)
          } s after member ${i} loaded an older config (${KEYS.static}: ${STALE}; skew allowed ${
            SPLIT_SKEW_MS / 1000
          } s), not as the newest config says: ${
            lasting.slice(0, 5).map(([key, labels]) => `${key}: ${labels}`).join('; ')
          }`,
        });
      }
      wrongBefore = new Set(wrong.keys());
      for (const { j } of members) {
        if ((await readyz(probePorts[j]!))?.text.includes('shard group: ')) noted.add(j);
      }
    }
    await reports;
    for (const { labeller, j } of members) {
      if (noted.has(j) || !labeller.running) continue;
      violations.push({
        invariant: 'health',
        detail: `member ${j}'s /readyz did not note member ${i}'s older config between ${
          SPLIT_SETTLE_MS / 1000
        } s after the split and its end`,
      });
    }
  };
  /** Why member `i` has not rejoined (its Lease on the others' config, writing buckets) within 30 s; '' once it has. */
  const rejoined = async (i: number): Promise<string> => {
    let problem = '';
    const ok = await eventually(
      async () => {
        const identities = replicas.flatMap((labeller) => labeller?.running ? [identityOf(labeller)] : []);
        const leases = (await cluster.get<{ items: Lease[] }>(
          `/apis/coordination.k8s.io/v1/namespaces/${sourceNs}/leases?labelSelector=${
            encodeURIComponent(`labeller.io/shard-group=${SHARD_GROUP}`)
          }`,
        )).items.filter((lease) => identities.includes(lease.spec.holderIdentity ?? ''));
        const identity = replicas[i] ? identityOf(replicas[i]) : '';
        const mine = leases.find((lease) => lease.spec.holderIdentity === identity);
        const configs = new Set(leases.map((lease) => lease.metadata.annotations?.['labeller.io/shard-config']));
        const writes = writtenBuckets(mine?.metadata.annotations?.['labeller.io/shard-writes']).length;
        problem = !mine
          ? 'no Lease'
          : configs.size > 1
          ? `configs ${[...configs].join(', ')}`
          : writes === 0
          ? 'it writes no bucket'
          : '';
        return problem === '';
      },
      'the member to rejoin',
      30_000,
      500,
    ).catch(() => false);
    return ok ? '' : problem;
  };

  try {
    await settle(cluster, namespaces, world, CONVERGE_MS);
    for (const operation of operations) {
      const ns = 'ns' in operation ? namespaces[operation.ns]! : '';
      // Through an API server restart the operation is tried again until it goes through.
      const performed = () => retrying(JSON.stringify(operation), () => perform(operation, ns), log);
      const from = Date.now();
      try {
        await (DISTURBANCES.has(operation.op) ? windows.disturbance(performed) : performed());
      } finally {
        if (LEASE_DISTURBANCES.has(operation.op)) {
          disturbances.push({ from, to: Date.now(), place: operation.op === 'stop' ? operation.replica : undefined });
        }
      }
    }
    await restoring;
    const ended = Date.now();
    const wrong = await settle(cluster, namespaces, world, CONVERGE_MS);
    if (wrong.length > 0) {
      violations.push({
        invariant: 'convergence',
        detail: `not as the oracle says ${CONVERGE_MS / 1000} s after the last operation: ${
          wrong.slice(0, 10).join('; ')
        }`,
      });
    } else convergedSeconds = (Date.now() - ended) / 1000;
    if (admission) {
      // Every window closed, the policies are as the config in force renders them, whatever was
      // done to them: a ConfigMap created now in each namespace carries what they set.
      await sleep(windows.remainingMs());
      for (const [i, ns] of namespaces.entries()) await createConfigMap(ns, `probe-${i}`, true);
      // Time for the controller to look at them (it sees a create within a second), and to write
      // to those created right, which it must not.
      await sleep(3000);
    }
    // Converged, every replica is ready again (a standby is ready too), whatever it went through.
    for (const [i, port] of probePorts.entries()) {
      if (!replicas[i]) continue;
      const ready = await eventually(async () => (await readyz(port))?.ready, 'ready', 30_000).catch(() => false);
      if (!ready) {
        const last = await readyz(port);
        violations.push({
          invariant: 'health',
          detail: `replica ${i} not ready at the end: ${last?.text ?? 'no answer'}`,
        });
      }
    }
    if (mode === 'sharded') {
      const identities = replicas.flatMap((labeller) => labeller ? [identityOf(labeller)] : []);
      violations.push(...(await shardRanges(cluster, sourceNs, identities)));
    }
  } finally {
    clearTimeout(accepting?.timer);
    sampling = false;
    await sampler;
    for (const [i, labeller] of replicas.entries()) {
      if (!labeller) continue;
      signalled(labeller);
      const exit = await labeller.stop('SIGTERM', 30_000);
      if (exit.code !== 0 || crashed(labeller.stderr)) {
        violations.push({
          invariant: 'health',
          detail: `replica ${i} exited ${describeExit(exit)} (whole log: ${keepLog(seed, i, labeller)}): ${
            labeller.stderr.slice(-2000)
          }`,
        });
      }
    }
    violations.push(...(await leftLeases(cluster, sourceNs, mode, gone)));
    violations.push(...leaseTakeovers(processes, disturbances, mode));
    const judged = (writeProxy?.writes ?? []).filter((write) => !lapsedHolds.has(write.heldSince ?? -1));
    for (const { held, overtaken } of lateWrites(judged)) {
      violations.push({
        invariant: 'one writer',
        detail: `${held.path}: a PATCH of ${held.place} held since ${iso(held.heldSince!)} (${
          JSON.stringify(held.labels)
        }) reached the API server at ${iso(held.sentAt!)}, after ${overtaken.place}'s (${
          JSON.stringify(overtaken.labels)
        }) was answered at ${iso(overtaken.answeredAt!)}: its successor wrote first`,
      });
    }
    // The field-manager guard's Lease outlives the processes by design, and its namespace's deletion
    // takes a while: fresh, it would refuse the next run's config, another, under the same field
    // manager as soon as both keep admission policies (they are cluster-wide).
    await cluster.client.json('DELETE', `/apis/coordination.k8s.io/v1/namespaces/${sourceNs}/leases`).catch(() => {});
    const labellerPatches = auditEvents(
      cp.auditLog,
      (e) =>
        byLabeller(e) && e.verb === 'patch' && namespaces.includes(e.objectRef?.namespace ?? '') &&
        (e.responseStatus?.code ?? 0) < 300,
    );
    patches = labellerPatches.length;
    // Created right once converged: any write to them was one too many.
    const needless = labellerPatches.filter((e) =>
      e.objectRef?.resource === 'configmaps' && createdRight.has(`${e.objectRef.namespace}/${e.objectRef.name}`)
    );
    if (needless.length > 0) {
      violations.push({
        invariant: 'bounded writes',
        detail: `${needless.length} PATCHes to ConfigMaps created with every key wanted: ${
          [...new Set(needless.map((e) => `${e.objectRef?.namespace}/${e.objectRef?.name}`))].join(', ')
        }`,
      });
    }
    if (crd) {
      await cluster.deleteCrd(CRD.group, CRD.plural).catch(() => {});
    }
    if (admission) {
      await removePolicies(cluster).catch(() => {});
    }
    if (writeProxy && violations.length > 0) {
      // What each place wrote, and when, for a look into the violations.
      const file = join(tmpdir(), `labeller-chaos-seed-${seed}-writes.json`);
      writeFileSync(file, JSON.stringify(writeProxy.writes, null, 1));
      log(`seed ${seed}: the PATCHes through the write proxy: ${file}`);
    }
    await catalog.close();
    await proxy.close();
    await writeProxy?.close();
    await cluster.close();
  }
  const bound = 2 * predicted + 30 * (restarts + 1);
  if (patches > bound) {
    violations.push({
      invariant: 'bounded writes',
      detail: `${patches} PATCHes, more than 2 × ${predicted} predicted changes + ${30 * (restarts + 1)}`,
    });
  }
  if (peakRssMiB > MAX_RSS_MIB) {
    violations.push({ invariant: 'health', detail: `peak RSS ${peakRssMiB.toFixed(0)} MiB` });
  }
  log(
    `seed ${seed} (${mode}${admission ? ', admission' : ''}): ${
      operations.filter((o) => o.op !== 'pause').length
    } operations, ${patches} PATCHes (${predicted} changes predicted), ${restarts} restarts, converged ${
      convergedSeconds?.toFixed(1) ?? '-'
    } s after the last, ${
      admission
        ? `labels at create: ${creates.judged} of ${creates.made} creates and ${probes.judged} of ${probes.made} dry-run creates judged, reloads enforced within ${
          reloadLags.length > 0 ? (Math.max(...reloadLags) / 1000).toFixed(1) : '-'
        } s, `
        : ''
    }peak RSS ${peakRssMiB.toFixed(0)} MiB, ${violations.length} violations`,
  );
  return {
    seed,
    mode,
    admission,
    operations,
    violations,
    patches,
    predicted,
    convergedSeconds,
    peakRssMiB,
    restarts,
    creates,
    probes,
    reloadLags,
  };
}

/** A replica's /readyz: undefined when it does not answer within a second (stopped, exited). */
async function readyz(port: number): Promise<{ ready: boolean; text: string } | undefined> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(1000) });
    return { ready: response.ok, text: await response.text() };
  } catch {
    return undefined;
  }
}

/**
 * Resolves once `labeller` has read each source for the first time (loaded, or held as
 * unreadable), has exited, or after 30 s. `starting` judges the documents served as it starts;
 * an operation that served another before the process read them would make that its first.
 */
async function firstReads(labeller: Labeller): Promise<void> {
  const first = (line: LogLine) =>
    line.msg === 'source loaded' || line.msg.startsWith('source cannot be read; it has not loaded yet');
  await Promise.all(
    ['teams', 'sites'].map((source) =>
      labeller.waitForLog((line) => first(line) && line['source'] === source, 30_000).catch(() => {})
    ),
  );
}

/**
 * A process's identity, from the line it logs as it joins the shard group or waits for
 * leadership, before it holds any Lease ('' before it has: none of its Leases can be left).
 */
function identityOf(labeller: Labeller): string {
  const identity = labeller.logs.find((line) =>
    line.msg === 'joining shard group' || line.msg === 'waiting for leadership'
  )
    ?.['identity'];
  return typeof identity === 'string' ? identity : '';
}

/** A process the run started, in place `place`, and when the scenario signalled it and it exited. */
interface Process {
  readonly labeller: Labeller;
  readonly place: number;
  signalledAt?: number;
  exitedAt?: number;
}

/** A disturbance that may keep processes (`place`'s only, for a SIGSTOP) from renewing their Leases. */
interface Disturbance {
  readonly from: number;
  readonly to: number;
  readonly place: number | undefined;
}

/**
 * Leases taken from live holders, from the processes' logs: leadership lost because another
 * replica took the Lease (leader mode), or a member's Lease deleted as expired by another
 * (sharded), while its process ran, was not being stopped, and no disturbance of it (a SIGSTOP, a
 * network delay or drop, an API server restart) was under way or over for less than EXPLAIN_MS.
 * Liveness judged by another host's clock (renewTime) does that to a process whose clock is
 * skewed: the others count it expired while it renews, or it counts them expired.
 */
function leaseTakeovers(processes: readonly Process[], disturbances: readonly Disturbance[], mode: Mode): Violation[] {
  /** Per process whose Lease was taken: the first time said, and how many times. */
  const taken = new Map<Process, { readonly detail: string; times: number }>();
  for (const process of processes) {
    for (const [index, line] of process.labeller.logs.entries()) {
      const at = process.labeller.arrivals[index]!;
      const victim = mode === 'leader'
        ? line.msg === 'lost leadership' && /held by/.test(String(line['reason'])) ? process : undefined
        : line.msg === 'shard member gone: its Lease expired'
        ? processes.find((p) => identityOf(p.labeller) === line['identity'])
        : undefined;
      if (!victim || (victim.signalledAt ?? Infinity) <= at || (victim.exitedAt ?? Infinity) <= at) continue;
      const explained = disturbances.some((d) =>
        (d.place === undefined || d.place === victim.place) && d.from <= at && d.to >= at - EXPLAIN_MS
      );
      if (explained) continue;
      const said = taken.get(victim);
      if (said) said.times++;
      else {
        taken.set(victim, {
          times: 1,
          detail: mode === 'leader'
            ? `replica ${victim.place} (${identityOf(victim.labeller)}) lost leadership to another at ${
              iso(at)
            } while it ran undisturbed: ${String(line['reason'])}`
            : `member ${victim.place}'s Lease (${
              String(line['identity'])
            }) deleted as expired by member ${process.place} at ${iso(at)} while it ran undisturbed`,
        });
      }
    }
  }
  return [...taken.values()].map(({ detail, times }) => ({
    invariant: 'one writer' as const,
    detail: times > 1 ? `${detail} (${times - 1} times more since)` : detail,
  }));
}

function iso(at: number): string {
  return new Date(at).toISOString();
}

/** The name a place is known by to the write proxy. */
function place(i: number): string {
  return `place-${i}`;
}

interface Lease {
  readonly metadata: {
    readonly name: string;
    readonly annotations?: Record<string, string>;
  };
  readonly spec: { readonly holderIdentity?: string | null };
}

/**
 * Leases in labeller's namespace other than its group's own once every replica has stopped. The
 * leader-election group's Lease, guard and sources' memory stay by design. A shard group keeps
 * only the sources' memory (one per field manager): a member that stops deletes its member and
 * guard Leases, and the members delete the member Leases of those that did not (shardRanges
 * checks that). A process stopped mid-run may leave its guard Lease: killed, or leaving while its
 * requests fail (it gives the Lease up once, within a second, as the API server may be away);
 * the members delete it once one has seen it unchanged for its lease duration, by its own clock,
 * which a run ending soon after may not reach. So `gone` (those processes' identities) excuses a
 * guard Lease; the replicas stopped at the end, with the API server there and the network calm,
 * leave none.
 */
async function leftLeases(
  cluster: Cluster,
  namespace: string,
  mode: Mode,
  gone: ReadonlySet<string>,
): Promise<Violation[]> {
  const own = (lease: Lease) =>
    mode === 'leader'
      ? ['labeller', 'labeller-field-manager', 'labeller-sources'].includes(lease.metadata.name)
      : /^sources-labeller-[0-9a-f]{10}$/.test(lease.metadata.name) ||
        (lease.metadata.name.startsWith('field-manager-') && gone.has(lease.spec.holderIdentity ?? ''));
  const leases = await cluster.get<{ items: Lease[] }>(`/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`);
  const left = leases.items.filter((lease) => !own(lease))
    .map((lease) => `${lease.metadata.name} (held by ${lease.spec.holderIdentity ?? 'nobody'})`);
  return left.length === 0 ? [] : [{ invariant: 'health', detail: `Leases left behind: ${left.join(', ')}` }];
}

/**
 * The shard group once converged, as its Leases on the server say: each running member (by
 * `identities`) holds one marked ready, and the buckets they publish as written, under one
 * layout (what bucket numbers mean), are disjoint and cover the hash space, so every namespace
 * has one writer; no other member Lease is left (the members delete one once it expired: a
 * killed member's, or one that could not delete its own as it left). Members agree within a few
 * rounds after a change; 30 s allows for a busy machine.
 */
async function shardRanges(cluster: Cluster, namespace: string, identities: readonly string[]): Promise<Violation[]> {
  let problem = '';
  const agreed = await eventually(
    async () => {
      const leases = await cluster.get<{ items: Lease[] }>(
        `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases?labelSelector=${
          encodeURIComponent(`labeller.io/shard-group=${SHARD_GROUP}`)
        }`,
      );
      const writers = new Map<number, string>();
      const layouts = new Set<string>();
      const problems: string[] = [];
      for (const identity of identities) {
        const lease = leases.items.find((l) => l.spec.holderIdentity === identity);
        const annotations = lease?.metadata.annotations ?? {};
        // None published reads as the uniform layout.
        layouts.add(annotations['labeller.io/shard-layout'] ?? 'uniform');
        if (!lease) problems.push(`no Lease held by ${identity || 'a member that never joined'}`);
        else if (annotations['labeller.io/shard-ready'] !== 'true') problems.push(`${lease.metadata.name} not ready`);
        for (const bucket of writtenBuckets(annotations['labeller.io/shard-writes'])) {
          const other = writers.get(bucket);
          if (other) problems.push(`bucket ${bucket} written by ${other} and ${identity}`);
          writers.set(bucket, identity);
        }
      }
      if (layouts.size > 1) {
        problems.push(`${layouts.size} layouts: ${[...layouts].map((l) => l.slice(0, 16)).join(', ')}`);
      }
      if (writers.size < BUCKETS) problems.push(`${BUCKETS - writers.size} of ${BUCKETS} buckets written by nobody`);
      for (const lease of leases.items) {
        const holder = lease.spec.holderIdentity ?? '';
        if (!identities.includes(holder)) problems.push(`${lease.metadata.name} of ${holder}, gone, not deleted`);
      }
      problem = problems.slice(0, 10).join('; ');
      return problems.length === 0;
    },
    'the shard group to agree',
    30_000,
    1000,
  ).catch(() => false);
  return agreed ? [] : [{ invariant: 'shard ranges', detail: `30 s after converging: ${problem}` }];
}

/**
 * A member's `labeller.io/shard-writes` annotation, read here rather than with src/shard/: a bitmap
 * of the buckets in hex, bucket b at bit b % 8 of byte b / 8.
 */
function writtenBuckets(hex: string | undefined): number[] {
  if (!hex || !/^[0-9a-f]+$/.test(hex) || hex.length !== BUCKETS / 4) return [];
  const buckets: number[] = [];
  for (let bucket = 0; bucket < BUCKETS; bucket++) {
    if (Number.parseInt(hex.slice(2 * (bucket >> 3), 2 * (bucket >> 3) + 2), 16) & (1 << (bucket & 7))) {
      buckets.push(bucket);
    }
  }
  return buckets;
}

/** Waits until every object carries exactly the oracle's labels; answers what is still wrong after `timeoutMs`. */
async function settle(
  cluster: Cluster,
  namespaces: readonly string[],
  world: () => WorldState,
  timeoutMs: number,
): Promise<string[]> {
  let wrong: string[] = [];
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline;) {
    try {
      const sample = await snapshot(cluster, namespaces);
      wrong = [...sample.objects].flatMap(([key, { labels, node }]) => {
        const want = expected(world(), key, INTRUDER, node);
        return matches(labels, want) ? [] : [`${key}: ${JSON.stringify(labels)}, wanted ${JSON.stringify(want)}`];
      });
      if (wrong.length === 0) return [];
    } catch {
      // The API server restarting: try again.
    }
    await sleep(1000);
  }
  return wrong;
}

/** Keys that disappeared between two samples from an object that still exists, while wanted throughout the grace. */
function stripped(
  before: Sample,
  after: Sample,
  history: readonly { at: number; wanted: Map<string, Record<string, string>> }[],
): Violation[] {
  const violations: Violation[] = [];
  for (const [key, now] of after.objects) {
    const then = before.objects.get(key);
    if (!then || then.uid !== now.uid) continue;
    const ns = key.split('/')[1]!;
    for (const label of Object.keys(then.labels)) {
      if (label in now.labels) continue;
      const window = history.filter((h, i) =>
        h.at >= after.at - GRACE_MS || history[i + 1] === undefined || history[i + 1]!.at >= after.at - GRACE_MS
      );
      if (window.every((h) => label in (h.wanted.get(ns) ?? {}))) {
        violations.push({
          invariant: 'never strip',
          detail: `${label} removed from ${key} at ${
            new Date(after.at).toISOString()
          } while the config wanted it throughout the last ${GRACE_MS / 1000} s`,
        });
      }
    }
  }
  return violations;
}

/** Nothing, for a create answered 409: made by an earlier try of the same operation. */
function made(error: unknown): undefined {
  if (!isConflict(error)) throw error;
  return undefined;
}

/** The scenario's keys of `labels`: the others are not the oracle's business. */
function scenarioLabels(labels: Readonly<Record<string, string>> | undefined): Record<string, string> {
  return Object.fromEntries(Object.entries(labels ?? {}).filter(([key]) => key.startsWith(`${DOMAIN}/`)));
}

async function snapshot(cluster: Cluster, namespaces: readonly string[]): Promise<Sample> {
  const at = Date.now();
  const objects = new Map<string, { uid: string; labels: Record<string, string>; node?: string | undefined }>();
  for (const ns of namespaces) {
    for (const kind of KINDS) {
      type List = {
        items: {
          metadata: { name: string; uid: string; labels?: Record<string, string>; deletionTimestamp?: string };
          spec?: { nodeName?: string };
        }[];
      };
      // A kind whose CRD is not installed has no objects.
      const list = await cluster.get<List>(kind.path(ns)).catch((error: unknown) => {
        if ('optional' in kind && isNotFound(error)) return { items: [] };
        throw error;
      });
      for (const { metadata, spec } of list.items) {
        // On its way out: labelled no more, and not the oracle's business.
        if (metadata.deletionTimestamp) continue;
        objects.set(`${kind.name}/${ns}/${metadata.name}`, {
          uid: metadata.uid,
          labels: scenarioLabels(metadata.labels),
          node: kind.name === 'pods' ? spec?.nodeName : undefined,
        });
      }
    }
  }
  return { at, objects };
}

function sourceMap(namespace: string, document: unknown): object {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'teams', namespace },
    data: { 'teams.yaml': JSON.stringify(document) },
  };
}

/**
 * kinds.yaml for `config`: written by the harness, read only by labeller. With `generation`, it
 * says it (split operations); `staticValue` is the static key's value (`on`).
 */
function configYaml(
  config: ConfigState,
  namespaces: readonly string[],
  sourceNs: string,
  catalog: Catalog,
  { generation, staticValue = 'on' }: { generation?: number; staticValue?: string } = {},
): string {
  const labels: Record<string, string> = {};
  if (config.static) labels[KEYS.static] = staticValue;
  if (config.team) labels[KEYS.team] = '{{namespace.labels.team}}';
  if (config.cc) labels[KEYS.cc] = '{{teams[namespace.labels.team]}}';
  if (config.site) labels[KEYS.site] = '{{sites[namespace.labels.team]}}';
  return dump({
    ...(generation === undefined ? {} : { generation }),
    sources: {
      teams: {
        configMap: { namespace: sourceNs, name: 'teams', key: 'teams.yaml' },
        acceptSmallerAfter: `${SOURCE_ACCEPT_MS}ms`,
      },
      sites: {
        url: catalog.url,
        interval: '1s',
        timeout: '2s',
        caFile: catalog.caFile,
        bearerTokenFile: catalog.tokenFile,
        maxBytes: CATALOG_MAX_BYTES,
      },
    },
    labels,
    kinds: ['configmaps', 'deployments', 'replicasets', 'pods', `${CRD.plural}.${CRD.group}`].map((resource) => ({
      resource,
      namespaces,
      // Pods read their node by reference: a relation a field names, outside every namespace.
      ...(resource === 'pods' ? { labels: { [KEYS.zone]: `{{node.labels.${NODE_ZONE}}}` } } : {}),
    })),
  });
}

function deployment(name: string, replicas: number): object {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: { containers: [{ name, image: 'registry.k8s.io/pause:3.10' }] },
      },
    },
  };
}

/**
 * Runs `operation` until it goes through (an API server restarting refuses it for a while): a
 * minute at most. Each failure is logged (`what` failed), so that a run that gives up says why.
 */
async function retrying(what: string, operation: () => Promise<void>, log: (line: string) => void): Promise<void> {
  for (const deadline = Date.now() + 60_000;;) {
    try {
      return await operation();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      log(`${what} failed; trying again: ${error instanceof Error ? error.message : String(error)}`);
      await sleep(1000);
    }
  }
}

/**
 * Writes a replica's whole output (its arguments, then stderr) beside the run's operations file;
 * answers the path. A health violation's detail quotes only the end of it.
 */
function keepLog(seed: number, replica: number, labeller: Labeller): string {
  const file = join(tmpdir(), `labeller-chaos-seed-${seed}-replica-${replica}-${labeller.pid}.log`);
  writeFileSync(file, labeller.stderr);
  return file;
}
