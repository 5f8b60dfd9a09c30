// Replicas that share the work (--shards auto) against the real API server: each member holds a
// Lease in the shard group, the namespaces' hash space (256 buckets) is dealt over the live
// members, and each caches and writes only its share. Three members split it (disjoint, covering,
// each cache its share, filtered by the server where it honours shardSelector); a member joins
// under churn, one leaves cleanly, one crashes, each without a write to an object that was right
// already; on a server without the gate each member filters the whole stream itself; a config
// reload reaches every member with no two writing one object; and the flags refuse what cannot
// work. Every group here labels only its own ConfigMaps (a label selector of its own) under a
// field manager of its own, so other files' tests on the shared cluster neither see nor disturb it.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import type { KubeClient } from '../../src/kube/client.ts';
import { type AuditEvent, auditEvents as readAudit, auditTail as tailAudit, byLabeller } from '../cluster/audit.ts';
import { Cluster } from '../cluster/cluster.ts';
import { ownSkip } from '../cluster/testrun.ts';
import { freePorts, startControlPlane } from '../controlplane/controlplane.ts';
import { assertCleanExit } from '../process/crash.ts';
import { figure } from '../process/figures.ts';
import { Labeller, runLabeller } from '../process/labeller.ts';
import { sample } from '../process/metrics.ts';
import { sleep } from '../process/sleep.ts';
import {
  adminClient,
  auditEvents,
  auditSkip,
  auditTail,
  configFile,
  createNamespace,
  eventually,
  kubeconfig,
  skip,
} from './cluster.ts';

// Short timings keep the tests quick (the defaults are 15 s / 10 s / 2 s).
const LEASE_MS = 4000;
const RETRY_MS = 1000;
const TIMINGS = ['--leader-elect-lease-duration', '4s', '--leader-elect-renew-deadline', '3s'];
const RETRY = ['--leader-elect-retry-period', '1s'];
const BUCKETS = 256;
/** The label that puts a ConfigMap in one group's reach (its value is the group's run). */
const RUN_LABEL = 'shards-e2e';
const NAMESPACES = 20;
const PER_NAMESPACE = 5;
/** Generous: a 2-core CI machine runs three labellers, the API server and other test files at once. */
const CONVERGE_MS = 90_000;

/**
 * The bucket a namespace hashes into, worked out here rather than with src/shard/layout.ts: 64-bit
 * FNV-1a of its name, as the API server's shardRange() hashes it, placed by the layout a member
 * publishes (`labeller.io/shard-layout`): `uniform` for equal buckets by the hash's top byte, else
 * where buckets 1 … 255 begin, 16 hex digits each.
 */
function bucketOf(namespace: string, layout: string): number {
  let hash = 0xcbf29ce484222325n;
  for (const byte of new TextEncoder().encode(namespace)) {
    hash = ((hash ^ BigInt(byte)) * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  if (layout === 'uniform') return Number(hash >> 56n);
  assert.match(layout, /^[0-9a-f]{4080}$/, 'a layout: 255 starts');
  let bucket = 0;
  while (bucket < BUCKETS - 1 && BigInt(`0x${layout.slice(bucket * 16, bucket * 16 + 16)}`) <= hash) bucket++;
  return bucket;
}

/** A member's `labeller.io/shard-writes` annotation read back: a bitmap of the 256 buckets in hex, bucket b at bit b%8 of byte b/8. */
function decodeWrites(hex: string | undefined): Set<number> {
  assert.match(hex ?? '', /^[0-9a-f]{64}$/, `shard-writes annotation ${hex}`);
  const buckets = new Set<number>();
  for (let bucket = 0; bucket < BUCKETS; bucket++) {
    if (Number.parseInt(hex!.slice(2 * (bucket >> 3), 2 * (bucket >> 3) + 2), 16) & (1 << (bucket & 7))) {
      buckets.add(bucket);
    }
  }
  return buckets;
}

/** Where a group runs: the test run's shared cluster, or a control plane of the test's own. */
interface Site {
  readonly client: KubeClient;
  readonly kubeconfig: string;
  namespace(prefix: string): Promise<string>;
  /** Audit events matching `filter` written since the previous call (the first: since now). */
  auditTail(filter: (event: AuditEvent) => boolean): () => AuditEvent[];
  auditEvents(filter: (event: AuditEvent) => boolean): AuditEvent[];
}

async function sharedSite(): Promise<Site> {
  return {
    client: await adminClient(),
    kubeconfig: kubeconfig(),
    namespace: createNamespace,
    auditTail,
    auditEvents,
  };
}

/** A member Lease as the API server has it. */
interface MemberLease {
  readonly name: string;
  readonly identity: string;
  readonly ready: boolean;
  readonly writes: Set<number>;
  readonly ranges: string;
  /** Where its buckets begin (see bucketOf). */
  readonly layout: string;
  /** What it says it caches (`labeller.io/shard-objects`). */
  readonly objects: number | undefined;
}

interface Lease {
  readonly metadata: { readonly name: string; readonly annotations?: Record<string, string> };
  readonly spec: { readonly holderIdentity?: string };
}

interface ConfigMapList {
  readonly items: {
    readonly metadata: { readonly namespace: string; readonly name: string; readonly labels?: Record<string, string> };
  }[];
}

class Member {
  readonly labeller: Labeller;
  readonly port: number;
  /** Its Lease's name, from its `joining shard group` line. */
  lease = '';

  constructor(labeller: Labeller, port: number) {
    this.labeller = labeller;
    this.port = port;
  }

  async metrics(): Promise<string> {
    return (await fetch(`http://127.0.0.1:${this.port}/metrics`)).text();
  }

  async ready(): Promise<boolean> {
    const response = await fetch(`http://127.0.0.1:${this.port}/readyz`);
    await response.text();
    return response.status === 200;
  }

  /** What /readyz says. */
  async readyz(): Promise<string> {
    return (await fetch(`http://127.0.0.1:${this.port}/readyz`)).text();
  }
}

/**
 * A shard group of its own: a namespace for its Leases, a field manager, NAMESPACES namespaces
 * with PER_NAMESPACE ConfigMaps each carrying the group's run label, and the PATCHes labeller
 * sends to them as the audit log has them.
 */
class Group {
  readonly site: Site;
  readonly run = randomBytes(4).toString('hex');
  readonly name = `e2e-${this.run}`;
  readonly fieldManager = `labeller-shards-${this.run}`;
  readonly leaseNamespace: string;
  readonly namespaces = new Set<string>();
  /** `namespace/name` of every ConfigMap made, in order. */
  readonly objects: string[] = [];
  readonly members: Member[] = [];
  readonly #patches: AuditEvent[] = [];
  readonly #tail: () => AuditEvent[];

  private constructor(site: Site, leaseNamespace: string) {
    this.site = site;
    this.leaseNamespace = leaseNamespace;
    this.#tail = site.auditTail((e) =>
      byLabeller(e) && e.verb === 'patch' && e.objectRef?.resource === 'configmaps' &&
      this.namespaces.has(e.objectRef.namespace ?? '')
    );
  }

  static async create(site: Site, prefix: string): Promise<Group> {
    const group = new Group(site, await site.namespace(`${prefix}-leases`));
    const namespaces = await Promise.all(Array.from({ length: NAMESPACES }, () => site.namespace(prefix)));
    for (const ns of namespaces) group.namespaces.add(ns);
    await Promise.all(
      namespaces.map(async (ns) => {
        for (let i = 0; i < PER_NAMESPACE; i++) await group.configMap(ns, `cm-${i}`);
      }),
    );
    return group;
  }

  async configMap(namespace: string, name: string): Promise<void> {
    await this.site.client.json('POST', `/api/v1/namespaces/${namespace}/configmaps`, {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name, labels: { [RUN_LABEL]: this.run } },
      }),
    });
    this.objects.push(`${namespace}/${name}`);
  }

  /** The flags of a member: the kind, label and selector (unless `config` says them), the group, the timings, the port. */
  args(port: number, config?: string, extra: readonly string[] = []): string[] {
    return [
      ...extra,
      ...(config ? ['--config', config] : ['--kinds', 'configmaps', '--label', 'team=platform']),
      ...(config ? [] : ['--selector', `${RUN_LABEL}=${this.run}`]),
      '--field-manager',
      this.fieldManager,
      '--shards',
      'auto',
      '--shard-group',
      this.name,
      '--leader-elect-resource-namespace',
      this.leaseNamespace,
      ...TIMINGS,
      ...RETRY,
      '--http-port',
      String(port),
    ];
  }

  /** A config file for this group's ConfigMaps with `team` set to `team`. */
  config(team: string): string {
    return `labels: { team: ${team} }\nkinds:\n  - resource: configmaps\n    selector: "${RUN_LABEL}=${this.run}"\n`;
  }

  /** Starts a member; resolves once it has said which Lease it holds. */
  async start(config?: string, extra: readonly string[] = []): Promise<Member> {
    const [port = 0] = await freePorts(1);
    const member = new Member(
      new Labeller(this.args(port, config, extra), { kubeconfig: this.site.kubeconfig }),
      port,
    );
    this.members.push(member);
    const joining = await member.labeller.waitForLog((l) => l.msg === 'joining shard group', 60_000);
    member.lease = String(joining['lease']).split('/')[1] ?? '';
    assert.match(member.lease, new RegExp(`^${this.name}-member-[0-9a-f]{10}$`));
    return member;
  }

  /** The members still running. */
  get running(): Member[] {
    return this.members.filter((m) => m.labeller.running);
  }

  async leases(): Promise<MemberLease[]> {
    const list = await this.site.client.json<{ items: Lease[] }>(
      'GET',
      `/apis/coordination.k8s.io/v1/namespaces/${this.leaseNamespace}/leases`,
      { query: { labelSelector: `labeller.io/shard-group=${this.name}` } },
    );
    return list.items.map((lease) => {
      const annotations = lease.metadata.annotations ?? {};
      return {
        name: lease.metadata.name,
        identity: lease.spec.holderIdentity ?? '',
        ready: annotations['labeller.io/shard-ready'] === 'true',
        writes: decodeWrites(annotations['labeller.io/shard-writes']),
        ranges: annotations['labeller.io/shard-ranges'] ?? '',
        layout: annotations['labeller.io/shard-layout'] ?? '',
        objects: annotations['labeller.io/shard-objects'] === undefined
          ? undefined
          : Number(annotations['labeller.io/shard-objects']),
      };
    });
  }

  /** Whether the Lease `name` exists. */
  async hasLease(name: string): Promise<boolean> {
    return (await this.leases()).some((lease) => lease.name === name);
  }

  /** `namespace/name` → labels of every ConfigMap of the group. */
  async labels(): Promise<Map<string, Record<string, string>>> {
    const list = await this.site.client.json<ConfigMapList>('GET', '/api/v1/configmaps', {
      query: { labelSelector: `${RUN_LABEL}=${this.run}` },
    });
    return new Map(list.items.map((i) => [`${i.metadata.namespace}/${i.metadata.name}`, i.metadata.labels ?? {}]));
  }

  /** Waits until every ConfigMap made so far carries team=`team`; resolves with when that was first seen. */
  async labelled(team = 'platform', timeoutMs = CONVERGE_MS): Promise<number> {
    await eventually(
      async () => {
        const labels = await this.labels();
        return this.objects.every((key) => labels.get(key)?.['team'] === team);
      },
      `all ${this.objects.length} ConfigMaps labelled team=${team}`,
      timeoutMs,
      200,
    );
    return Date.now();
  }

  /** labeller's PATCHes of the group's ConfigMaps so far, from before the first member started. */
  patches(): readonly AuditEvent[] {
    this.#patches.push(...this.#tail());
    return this.#patches;
  }

  /**
   * Waits until the running members agree: as many Leases as members, each ready, their writes
   * disjoint and covering all 256 buckets, each member writing all it caches (no handover under
   * way), its /metrics saying so and /readyz ok.
   */
  async converged(what: string): Promise<MemberLease[]> {
    const members = this.running;
    return eventually(
      async () => {
        const leases = await this.leases();
        if (leases.length !== members.length || !leases.every((l) => l.ready)) return false;
        const owners = new Map<number, string>();
        for (const lease of leases) {
          for (const bucket of lease.writes) {
            if (owners.has(bucket)) return false;
            owners.set(bucket, lease.name);
          }
        }
        if (owners.size !== BUCKETS) return false;
        for (const member of members) {
          const lease = leases.find((l) => l.name === member.lease);
          if (!lease) return false;
          const metrics = await member.metrics();
          if (sample(metrics, 'labeller_shard_members') !== members.length) return false;
          const writes = sample(metrics, 'labeller_shard_owned_ratio', { state: 'writes' });
          // Writing all it caches: a member that joins lists its share before it is handed those buckets.
          const keeps = sample(metrics, 'labeller_shard_owned_ratio', { state: 'keeps' });
          if (writes !== lease.writes.size / BUCKETS || keeps !== writes) return false;
          if (!(await member.ready())) return false;
        }
        return leases;
      },
      `${what}: ${members.length} members to agree on disjoint writes covering every bucket`,
      CONVERGE_MS,
      250,
    );
  }

  /** The group's namespaces that `member` writes: at least `least` of them, new ones made as needed. */
  async namespacesIn(member: MemberLease, least: number): Promise<string[]> {
    const found = [...this.namespaces].filter((ns) => member.writes.has(bucketOf(ns, member.layout)));
    for (let tries = 0; found.length < least; tries++) {
      assert.ok(tries < 100, `no namespace hashed into ${member.writes.size} buckets in 100 tries`);
      const ns = await this.site.namespace('shards-more');
      this.namespaces.add(ns);
      if (member.writes.has(bucketOf(ns, member.layout))) found.push(ns);
    }
    return found;
  }

  /** Stops every running member with SIGTERM: each exits 0, without a crash, and says it left the group. */
  async stop(): Promise<void> {
    const exits = await Promise.all(this.running.map((m) => m.labeller.stop('SIGTERM', 30_000)));
    for (const exit of exits) assertCleanExit(exit);
  }

  /** Ends whatever still runs (for `finally` blocks). */
  kill(): void {
    for (const member of this.members) member.labeller.kill();
  }
}

/** PATCHes counted by object (`namespace/name`). */
function byObject(patches: readonly AuditEvent[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const e of patches) {
    const key = `${e.objectRef?.namespace ?? ''}/${e.objectRef?.name ?? ''}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return counts;
}

/** The objects among `keys` that `member` writes. */
const inBuckets = (keys: readonly string[], member: MemberLease): string[] =>
  keys.filter((key) => member.writes.has(bucketOf(key.slice(0, key.indexOf('/')), member.layout)));

/** Whether the API server honours shardSelector: this project's control plane turns the gate on from 1.36. */
async function serverFilters(client: KubeClient): Promise<boolean | undefined> {
  if (!process.env['E2E_ETCD']) return undefined; // an existing cluster: its gates are unknown
  const version = await client.json<{ minor: string }>('GET', '/version');
  return Number.parseInt(version.minor, 10) >= 36;
}

/**
 * The lists and watches of the group's ConfigMaps that labeller sent (not the one-object probe of
 * whether the server honours shardSelector, which has no label selector) since `since` (ms since
 * the epoch), their URIs decoded.
 */
function listsAndWatches(group: Group, since = 0): string[] {
  return group.site.auditEvents((e) =>
    byLabeller(e) && e.objectRef?.resource === 'configmaps' && (e.verb === 'list' || e.verb === 'watch') &&
    Date.parse(e.requestReceivedTimestamp ?? '') >= since
  ).map((e) => decodeURIComponent(e.requestURI.replaceAll('+', ' '))).filter((uri) =>
    uri.includes(`labelSelector=${RUN_LABEL}=${group.run}`)
  );
}

/**
 * Whether `uri` lists what a widened selector adds: a streaming list, or a first page not older
 * than a version (servers without streaming lists: 1.30, 1.31, 1.33).
 */
const isWideningList = (uri: string): boolean =>
  uri.includes('sendInitialEvents=true') ||
  (uri.includes('resourceVersionMatch=NotOlderThan') && uri.includes('limit='));

/** `member`'s ConfigMap cache listed what its widened ranges add since `since` (ms since the epoch), and relisted nothing. */
function assertWidenedWithoutRelist(member: Member, since: number): void {
  const lines = member.labeller.logs.filter((l, i) =>
    member.labeller.arrivals[i]! >= since && l['kind'] === 'ConfigMap'
  );
  assert.ok(lines.some((l) => l.msg === 'listed what the widened selector adds'), 'what the taken buckets add listed');
  assert.deepEqual(lines.filter((l) => l.msg === 'relist complete'), [], 'no relist');
}

/**
 * Each member caches the objects of the buckets it writes, no more: its labeller_objects_cached
 * is the count of the group's objects in its Lease's buckets, and the counts add up to them all.
 */
async function cachesHoldTheirShare(group: Group): Promise<void> {
  await eventually(
    async () => {
      const leases = await group.leases();
      const shares = [];
      for (const member of group.running) {
        const lease = leases.find((l) => l.name === member.lease);
        if (!lease) return false;
        shares.push({
          lease: lease.name,
          share: inBuckets(group.objects, lease).length,
          cached: sample(await member.metrics(), 'labeller_objects_cached', { controller: 'configmaps' }),
          published: lease.objects,
        });
      }
      const sum = shares.reduce((n, s) => n + (s.cached ?? 0), 0);
      // Thrown, so that a timeout says what each member had.
      if (shares.some((s) => s.cached !== s.share) || sum !== group.objects.length) {
        throw new Error(`of ${group.objects.length} objects: ${JSON.stringify(shares)}`);
      }
      return true;
    },
    "each member's cache to hold its share of the objects, and the shares to add up to them all",
    CONVERGE_MS,
    250,
  );
}

/** Two, then three members converged on the shared cluster, with every object labelled. */
async function threeMembers(prefix: string): Promise<{ group: Group; leases: MemberLease[] }> {
  const group = await Group.create(await sharedSite(), prefix);
  try {
    for (let i = 0; i < 3; i++) await group.start();
    await group.labelled();
    const leases = await group.converged('three members');
    return { group, leases };
  } catch (error) {
    group.kill();
    throw error;
  }
}

/**
 * Three members converged, every object PATCHed once: the first member's buckets, two of its
 * namespaces, the objects so far and the PATCH count, for a test that stops it.
 */
async function convergedWithOneToGo(name: string) {
  const { group, leases } = await threeMembers(name);
  try {
    const first = leases.find((l) => l.name === group.members[0]!.lease)!;
    const theirs = await group.namespacesIn(first, 2);
    await group.labelled();
    await eventually(
      async () => byObject(group.patches()).size === group.objects.length,
      'a PATCH of every object in the audit log',
      30_000,
    );
    return { group, buckets: first.writes, theirs, old: [...group.objects], before: group.patches().length };
  } catch (error) {
    group.kill();
    throw error;
  }
}

describe('replicas sharing the work (--shards auto)', { skip }, () => {
  test(
    'three members: every object labelled; each publishes a third or so, disjoint, covering all 256 buckets; each caches its share only, filtered by the server',
    { skip: auditSkip, timeout: 240_000 },
    async (t) => {
      const { group, leases } = await threeMembers('shards-three');
      try {
        const filters = await serverFilters(group.site.client);
        let ratios = 0;
        for (const member of group.members) {
          const metrics = await member.metrics();
          const lease = leases.find((l) => l.name === member.lease)!;
          assert.equal(sample(metrics, 'labeller_shard_members'), 3);
          const writes = sample(metrics, 'labeller_shard_owned_ratio', { state: 'writes' })!;
          assert.equal(
            sample(metrics, 'labeller_shard_owned_ratio', { state: 'keeps' }),
            writes,
            'it keeps what it writes',
          );
          assert.ok(writes > 0.1 && writes < 0.6, `a member writes ${writes} of the space`);
          ratios += writes;
          assert.equal(sample(metrics, 'labeller_shard_ranges_info', { ranges: lease.ranges }), 1, lease.ranges);
          assert.match(lease.ranges, /^\d+(-\d+)?(,\d+(-\d+)?)*$/);
          assert.equal(lease.layout, leases[0]!.layout, 'one layout over the group');
          const filtering = ['server', 'client'].filter((f) =>
            sample(metrics, 'labeller_shard_filtering', { controller: 'configmaps', filtering: f }) === 1
          );
          assert.equal(filtering.length, 1, `one filtering for configmaps: ${filtering.join(', ')}`);
          if (filters !== undefined) assert.deepEqual(filtering, [filters ? 'server' : 'client']);
          const joining = member.labeller.logs.find((l) => l.msg === 'joining shard group');
          assert.equal(joining?.['group'], group.name);
          assert.equal(lease.identity, joining?.['identity']);
        }
        assert.ok(Math.abs(ratios - 1) < 1e-9, `the writes ratios add up to ${ratios}`);
        await cachesHoldTheirShare(group);
        if (filters) {
          // Every list and watch of the ConfigMaps asked the server for the member's ranges only.
          const uris = listsAndWatches(group);
          assert.ok(uris.length >= 3, `at least one per member:\n${uris.join('\n')}`);
          for (const uri of uris) assert.match(uri, /shardSelector=shardRange\(object\.metadata\.namespace, '0x/, uri);
        }
        const patched = byObject(group.patches());
        figure(
          t,
          `shards: 3 members, ${group.objects.length} ConfigMaps in ${NAMESPACES} namespaces: ${
            leases.map((l) => l.writes.size).join(' + ')
          } buckets; ${group.patches().length} PATCHes, ${
            [...patched.values()].filter((n) => n > 1).length
          } objects written more than once`,
        );
        await group.stop();
        for (const member of group.members) {
          assert.ok(member.labeller.logs.some((l) => l.msg === 'left shard group'), 'each member left the group');
        }
        assert.deepEqual(await group.leases(), [], 'every member deleted its Lease');
      } finally {
        group.kill();
      }
    },
  );

  test(
    'a member joins while ConfigMaps are being created: every object labelled, no PATCH of the objects that were right already',
    { skip: auditSkip, timeout: 240_000 },
    async (t) => {
      const group = await Group.create(await sharedSite(), 'shards-join');
      try {
        await group.start();
        await group.start();
        await group.labelled();
        await group.converged('two members');
        const old = [...group.objects];
        await eventually(
          async () => byObject(group.patches()).size === old.length,
          'a PATCH of every object in the audit log',
          30_000,
        );
        const before = group.patches().length;

        // ConfigMaps made one after another, round the namespaces, all through the handover.
        const namespaces = [...group.namespaces];
        const createdAt = new Map<string, number>();
        let churning = true;
        let churnError: unknown;
        const churn = (async () => {
          for (let i = 0; churning; i++) {
            const ns = namespaces[i % namespaces.length]!;
            createdAt.set(`${ns}/new-${i}`, Date.now());
            await group.configMap(ns, `new-${i}`);
            await sleep(100);
          }
        })().catch((error: unknown) => (churnError = error));
        let third: Member;
        let leases: MemberLease[];
        try {
          await sleep(1000);
          third = await group.start();
          await third.labeller.waitForLog((l) => l.msg === 'shard ranges changed' && Boolean(l['taken']), CONVERGE_MS);
          leases = await group.converged('the third member joined');
          await sleep(2 * RETRY_MS);
        } finally {
          churning = false;
          await churn;
        }
        assert.equal(churnError, undefined, `the ConfigMaps were created: ${String(churnError)}`);
        await group.labelled();
        await cachesHoldTheirShare(group);
        // Anything the handover set in motion has been sent by now.
        await sleep(2 * RETRY_MS);

        const since = group.patches().slice(before);
        const counts = byObject(since);
        const made = group.objects.filter((key) => !old.includes(key));
        const moved = leases.find((l) => l.name === third.lease)!;
        const oldPatched = old.filter((key) => counts.has(key));
        assert.deepEqual(oldPatched, [], 'no object that was right already was written in the handover');
        assert.deepEqual([...counts.keys()].filter((key) => !made.includes(key)), [], 'PATCHes only of new objects');
        const firstPatch = new Map<string, number>();
        for (const e of since) {
          const key = `${e.objectRef?.namespace ?? ''}/${e.objectRef?.name ?? ''}`;
          const at = Date.parse(e.requestReceivedTimestamp ?? '');
          if (!firstPatch.has(key) || at < firstPatch.get(key)!) firstPatch.set(key, at);
        }
        const waits = made.map((key) => (firstPatch.get(key) ?? NaN) - createdAt.get(key)!);
        figure(
          t,
          `shards join under churn: ${made.length} ConfigMaps made during it (${
            inBuckets(made, moved).length
          } in the ${moved.writes.size} buckets the third member took); ${since.length} PATCHes, 0 of the ${old.length} objects labelled before; ${
            [...counts.values()].filter((n) => n > 1).length
          } new objects written twice; creation → first PATCH max ${Math.max(...waits)} ms`,
        );
        await group.stop();
      } finally {
        group.kill();
      }
    },
  );

  test(
    'a member stopped with SIGTERM deletes its Lease; the others take its buckets; new objects there are labelled; no PATCH of the others',
    { skip: auditSkip, timeout: 240_000 },
    async (t) => {
      const { group, buckets, theirs, old, before } = await convergedWithOneToGo('shards-leave');
      try {
        const [leaving, ...staying] = group.members as [Member, Member, Member];
        const marks = staying.map((m) => m.labeller.logs.length);

        const exit = await leaving.labeller.stop('SIGTERM', 30_000);
        const stopped = Date.now();
        assertCleanExit(exit);
        assert.ok(leaving.labeller.logs.some((l) => l.msg === 'left shard group'));
        assert.equal(await group.hasLease(leaving.lease), false, 'its Lease is gone once it has exited');
        for (const ns of theirs) await group.configMap(ns, 'after-leave');
        const labelled = await group.labelled('platform', 30_000);

        const after = await group.converged('one member left');
        assert.equal(after.length, 2);
        const taken = staying.map((m, i) =>
          m.labeller.since(marks[i]!, (l) => l.msg === 'shard ranges changed' && Boolean(l['taken']))
        );
        assert.ok(taken.every((lines) => lines.length > 0), 'both others took some of its buckets');
        for (const bucket of buckets) assert.ok(after.some((l) => l.writes.has(bucket)), `bucket ${bucket} taken`);
        await sleep(2 * RETRY_MS);
        const counts = byObject(group.patches().slice(before));
        assert.deepEqual(old.filter((key) => counts.has(key)), [], 'no object that was right already was written');
        assert.deepEqual([...counts.keys()].sort(), theirs.map((ns) => `${ns}/after-leave`).sort());
        figure(
          t,
          `shards clean leave: its ${buckets.size} buckets taken by the other two; ${theirs.length} ConfigMaps made in its namespaces after it exited labelled ${
            labelled - stopped
          } ms after the exit (lease duration ${LEASE_MS} ms, retry period ${RETRY_MS} ms)`,
        );
        await group.stop();
      } finally {
        group.kill();
      }
    },
  );

  test(
    'a member killed with SIGKILL: objects made in its namespaces afterwards are labelled within the lease duration and a few seconds; its stale Lease is deleted',
    { skip: auditSkip, timeout: 240_000 },
    async (t) => {
      const { group, buckets, theirs, old, before } = await convergedWithOneToGo('shards-crash');
      try {
        const [victim] = group.members as [Member, Member, Member];

        victim.labeller.kill();
        const killed = Date.now();
        assert.equal((await victim.labeller.exited).signal, 'SIGKILL');
        for (const ns of theirs) await group.configMap(ns, 'after-crash');
        const labelled = await group.labelled('platform', LEASE_MS + 10_000 + 30_000);
        const took = labelled - killed;
        assert.ok(took < LEASE_MS + 10_000, `labelled ${took} ms after the crash (lease duration ${LEASE_MS} ms)`);

        await eventually(
          async () => !(await group.hasLease(victim.lease)),
          "the crashed member's Lease to be deleted by the others",
          4 * LEASE_MS + 30_000,
          250,
        );
        const deleted = Date.now() - killed;
        const after = await group.converged('after the crash');
        for (const bucket of buckets) assert.ok(after.some((l) => l.writes.has(bucket)), `bucket ${bucket} taken`);
        await sleep(2 * RETRY_MS);
        const counts = byObject(group.patches().slice(before));
        assert.deepEqual(old.filter((key) => counts.has(key)), [], 'no object that was right already was written');
        // The survivors listed only the buckets they took (a streaming list of those ranges alone),
        // relisting nothing.
        const since = [...new Set(listsAndWatches(group, killed))];
        assert.ok(since.some(isWideningList), `a list of what the taken buckets add:\n${since.join('\n')}`);
        for (const member of group.running) assertWidenedWithoutRelist(member, killed);
        // ... listed while the killed member was late, before its Lease expired. A survivor whose
        // rounds a loaded machine delays may first look once it has expired: one is enough.
        const seen = group.running.map((member) => {
          const late = member.labeller.logs.findIndex((l) => l.msg.startsWith('shard member late'));
          const gone = member.labeller.logs.findIndex((l) => l.msg === 'shard member gone: its Lease expired');
          return { late, gone };
        });
        assert.ok(
          seen.some(({ late, gone }) => late >= 0 && (gone < 0 || late < gone)),
          `a survivor saw the member late before it was gone (log line numbers: ${JSON.stringify(seen)})`,
        );
        figure(
          t,
          `shards crash: ${theirs.length} ConfigMaps made in its namespaces right after kill -9 labelled after ${took} ms (lease duration ${LEASE_MS} ms); its Lease deleted after ${deleted} ms`,
        );
        await group.stop();
      } finally {
        group.kill();
      }
    },
  );

  test(
    'an API server without ShardedListAndWatch: each member filters the whole stream itself and caches its share only; one that takes over lists the stream once',
    { skip: ownSkip, timeout: 240_000 },
    async (t) => {
      const cp = await startControlPlane(undefined, { full: false, shardedListAndWatch: false });
      const cluster = await Cluster.connect(cp.kubeconfig);
      const site: Site = {
        client: cluster.client,
        kubeconfig: cp.kubeconfig,
        namespace: (prefix) => cluster.namespace(prefix),
        auditTail: (filter) => tailAudit(cp.auditLog, filter),
        auditEvents: (filter) => readAudit(cp.auditLog, filter),
      };
      let group: Group | undefined;
      try {
        group = await Group.create(site, 'shards-client');
        await group.start();
        await group.start();
        await group.labelled();
        const leases = await group.converged('two members, no server filtering');
        for (const member of group.members) {
          const metrics = await member.metrics();
          assert.equal(
            sample(metrics, 'labeller_shard_filtering', { controller: 'configmaps', filtering: 'client' }),
            1,
          );
          assert.equal(
            sample(metrics, 'labeller_shard_filtering', { controller: 'configmaps', filtering: 'server' }),
            undefined,
          );
        }
        await cachesHoldTheirShare(group);
        // Once the server is found not to honour it, no list or watch asks for a shardSelector.
        const uris = listsAndWatches(group);
        assert.ok(uris.length >= 2, `at least one per member:\n${uris.join('\n')}`);
        for (const uri of uris) assert.doesNotMatch(uri, /shardSelector/, uri);

        // One leaves: the other takes every bucket, listing the whole stream once at the version
        // its watch reached (no selector can say what it adds) rather than relisting.
        const [leaving, staying] = group.members as [Member, Member];
        const left = Date.now();
        assertCleanExit(await leaving.labeller.stop('SIGTERM', 30_000));
        await group.converged('one member left, no server filtering');
        assert.equal(
          sample(await staying.metrics(), 'labeller_objects_cached', { controller: 'configmaps' }),
          group.objects.length,
        );
        assertWidenedWithoutRelist(staying, left);
        const since = [...new Set(listsAndWatches(group, left))];
        assert.ok(
          since.some((uri) => isWideningList(uri) && !uri.includes('shardSelector')),
          `one list of the whole stream:\n${since.join('\n')}`,
        );
        figure(
          t,
          `shards without server filtering: 2 members, ${
            leases.map((l) => l.writes.size).join(' + ')
          } buckets, each cache its share of ${group.objects.length} ConfigMaps; one left, the other took all`,
        );
        await group.stop();
      } finally {
        group?.kill();
        await cluster.close();
        await cp.stop();
      }
    },
  );

  test(
    'a config reload reaches every member: every object ends with the new value, one PATCH each, then quiet',
    { skip: auditSkip, timeout: 240_000 },
    async (t) => {
      const group = await Group.create(await sharedSite(), 'shards-reload');
      const config = configFile(group.config('blue'));
      try {
        for (let i = 0; i < 3; i++) await group.start(config);
        await group.labelled('blue');
        await group.converged('three members, team=blue');
        await eventually(
          async () => byObject(group.patches()).size === group.objects.length,
          'a PATCH of every object in the audit log',
          30_000,
        );
        const before = group.patches().length;
        const marks = group.members.map((m) => m.labeller.logs.length);
        const changed = Date.now();
        writeFileSync(config, group.config('green'));
        await Promise.all(
          group.members.map((m, i) => m.labeller.waitForLog((l) => l.msg === 'config reloaded', 60_000, marks[i])),
        );
        const labelled = await group.labelled('green');
        await group.converged('three members, team=green');
        await eventually(
          async () => byObject(group.patches().slice(before)).size === group.objects.length,
          'a PATCH of every object since the change in the audit log',
          30_000,
        );
        const converged = group.patches().length;
        await sleep(2 * RETRY_MS + 1000);
        assert.deepEqual(group.patches().slice(converged).map((e) => e.requestURI), [], 'no PATCH once converged');
        const counts = byObject(group.patches().slice(before));
        assert.deepEqual(
          [...counts].filter(([, n]) => n !== 1),
          [],
          'each object written once: by one member, with the new value',
        );
        for (const member of group.members) {
          assert.ok(!member.labeller.logs.some((l) => l.msg.startsWith('config change rejected')));
        }
        figure(t, `shards reload: 3 members, ${group.objects.length} objects relabelled in ${labelled - changed} ms`);
        await group.stop();
      } finally {
        group.kill();
      }
    },
  );

  test(
    'a member of an older config: past --shard-config-skew it writes nothing, the members on the newest config write every object, and every member says so; once it loads the newest, it takes a share again',
    { timeout: 240_000 },
    async (t) => {
      const group = await Group.create(await sharedSite(), 'shards-split');
      const skew = ['--shard-config-skew', '5s'];
      const newest = `generation: 2\n${group.config('blue')}`;
      const older = configFile(`generation: 1\n${group.config('green')}`);
      try {
        const first = configFile(newest);
        for (let i = 0; i < 2; i++) await group.start(first, skew);
        await group.labelled('blue');
        await group.converged('two members, team=blue');
        // A pod stuck on an old ConfigMap joins the group.
        const joined = Date.now();
        const stale = await group.start(older, skew);
        await eventually(
          async () => stale.labeller.logs.some((l) => l.msg === 'shard group split between configs'),
          'the member on the older config to find itself behind',
          60_000,
        );
        const labelled = await group.labelled('blue');
        await sleep(2 * RETRY_MS + 1000);
        assert.equal([...(await group.labels()).values()].filter((labels) => labels['team'] !== 'blue').length, 0);
        for (const member of group.members) {
          const said = member.labeller.logs.find((l) => l.msg === 'shard group split between configs');
          assert.ok(said, 'every member logs the split');
          assert.match(String(said['note']), /have run another config than the group's newest \(2\/sha256:/);
          assert.equal(sample(await member.metrics(), 'labeller_shard_stale_config_members'), 1);
          assert.match(await member.readyz(), /shard group: members .*\(config 1\/sha256:/);
          assert.ok(await member.ready(), 'a note, not a reason to be unready');
        }
        assert.equal((await group.leases()).find((l) => l.name === stale.lease)?.writes.size, 0);
        // It loads the newest config: a member again.
        const mark = stale.labeller.logs.length;
        writeFileSync(older, newest);
        await stale.labeller.waitForLog((l) => l.msg === 'config reloaded', 60_000, mark);
        await eventually(
          async () =>
            (await Promise.all(
              group.members.map(async (m) => sample(await m.metrics(), 'labeller_shard_stale_config_members')),
            ))
              .every((n) => n === 0),
          'every member to see the group on one config',
          30_000,
        );
        await eventually(
          async () => ((await group.leases()).find((l) => l.name === stale.lease)?.writes.size ?? 0) > 0,
          'the member to take a share again',
          60_000,
        );
        await group.converged('three members on the newest config');
        figure(
          t,
          `shards split: every object on the newest config ${
            labelled - joined
          } ms after a member of an older one joined (skew allowed 5 s)`,
        );
        await group.stop();
      } finally {
        group.kill();
      }
    },
  );

  test('usage errors: --shards auto with --leader-elect or --once, a shard group name that is no DNS label', async () => {
    const base = ['--kinds', 'configmaps', '--label', 'team=platform'];
    const cases: [what: string, args: string[], message: RegExp][] = [
      ['with --leader-elect', ['--shards', 'auto', '--leader-elect'], /--shards auto.*--leader-elect/],
      ['with --once', ['--shards', 'auto', '--once'], /--shards auto.*(--once|controller only)/],
      ['a bad group name', ['--shards', 'auto', '--shard-group', 'Bad_Name'], /shard-group.*"Bad_Name"/],
    ];
    for (const [what, args, message] of cases) {
      const exit = await runLabeller([...base, ...args]);
      assert.equal(exit.code, 2, `${what}: ${exit.stderr}`);
      assert.match(exit.fatal ?? '', message, what);
    }
  });
});
