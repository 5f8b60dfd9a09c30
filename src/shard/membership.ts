// Membership of a shard group, on Leases: each member holds one (`<group>-member-<hash>`, labelled
// with the group) and renews it every retry period, publishing on it whether its caches are
// synced and which buckets it writes. Each round it reads the others' and works out:
//  - what it keeps (caches): the buckets it wins among the live members that are not late (below;
//    ranges.ts), plus those
//    it writes now that it still wins among the ready ones, so a member that joins takes nothing
//    from anyone until it has listed what it will write;
//  - what it writes: the buckets it keeps that it wins among the ready members and that no other
//    live member publishes. A bucket changes hands only when its writer gives it up (published),
//    or when the writer's Lease expires; so at any moment one member writes it.
// The Lease is held by a LeaseHolder (lease/holder.ts), renewed in its own loop whatever a round
// waits for. A member writes only while its claim is valid, checked as each write is sent, so
// that others, who judge it expired a lease duration after they saw it last renewed, never take
// its buckets while it may still write them; at a lapse its writes on the wire are aborted and it
// gives every bucket up, to take them again as a member that just joined. A bucket given up is
// published as written until the writes under way in it are done, so nobody takes it before.
// Bucket numbers mean what the group's layout (layout.ts) says: the oldest live member works it
// out from the namespaces and publishes it, and the others use it. A member whose layout differs
// gives every bucket up before it changes layout, and nobody takes a bucket while a live member
// writes under another layout, so no namespace has two writers across a change either.
// Liveness is judged as client-go's leader election does (lease/observer.ts), and a Lease is deleted
// once expired, so that a member that joins after a crash does not see the dead one live for
// another lease duration (a member whose Lease lapsed and was deleted has given every bucket up
// already; it joins again).
// While buckets change hands (a member listing to join, or a bucket it wins still another's), it
// looks every quarter round, so that a bucket given up is taken soon after. A member whose Lease
// has not been seen renewed for a while (a third of the lease duration, two rounds and a half at
// least) is late: the others keep (list) the buckets they would take if it were gone, but write
// none of them until its Lease expires, so that a crashed member's ranges are taken at its expiry
// rather than after a list of them; a late member that renews again has them back, and the others
// drop them.
import { createHash } from 'node:crypto';
import type { Lease, LeaseApi } from '../kube/lease.ts';
import { type MonotonicClock, monotonicClock } from '../lease/clock.ts';
import { LeaseHolder, type LeaseStore } from '../lease/holder.ts';
import { deleteExpired, LeaseObserver } from '../lease/observer.ts';
import type { Logger } from '../util/log.ts';
import { Layout } from './layout.ts';
import { BUCKETS, bucketsOf, decodeBuckets, describeRanges, encodeBuckets, winner } from './ranges.ts';

/** The label that finds a group's member Leases. */
export const GROUP_LABEL = 'labeller.io/shard-group';
const READY = 'labeller.io/shard-ready';
const WRITES = 'labeller.io/shard-writes';
const OBJECTS = 'labeller.io/shard-objects';
const RANGES = 'labeller.io/shard-ranges';
const LAYOUT = 'labeller.io/shard-layout';
const CONFIG = 'labeller.io/shard-config';

/** How long members may run different configs (a change reaching every pod) before those not on the newest give their buckets up. */
export const CONFIG_SKEW_MS = 120_000;

/** The config a member runs: which of two is the newer is told by the generation, then (a tie: a mistake) by the fingerprint. */
export interface MemberConfig {
  readonly fingerprint: string;
  readonly generation: number;
}

export interface MembershipOptions {
  readonly group: string;
  /** Where the member Leases live. */
  readonly namespace: string;
  readonly identity: string;
  readonly leaseDurationMs: number;
  readonly retryPeriodMs: number;
  /** Whether this member's caches hold every object of what it keeps (asked often while they do not). */
  readonly synced: () => boolean;
  /** The objects it caches, published for `labeller status`. */
  readonly objects?: (() => number) | undefined;
  /** The cluster's namespaces, for the layout; undefined (or none given) when they cannot be listed. */
  readonly namespaces?: ((signal: AbortSignal) => Promise<readonly string[] | undefined>) | undefined;
  /** How often the oldest member checks whether the namespaces have outgrown the layout. */
  readonly layoutPeriodMs?: number | undefined;
  /** The config in force, published so that members can tell they disagree. */
  readonly config?: (() => MemberConfig) | undefined;
  /** How long members may disagree on the config before those not on the newest give their buckets up (CONFIG_SKEW_MS). */
  readonly configSkewMs?: number | undefined;
  /** Told, with a note naming them, when members have disagreed for longer than that. */
  readonly split?: ((note: string) => void) | undefined;
  readonly log: Logger;
  readonly clock?: MonotonicClock | undefined;
}

/** A member as this process sees it. */
export interface MemberView {
  readonly identity: string;
  readonly self: boolean;
  readonly ready: boolean;
  /** The buckets it writes, as it last published them. */
  readonly writes: ReadonlySet<number>;
  readonly objects: number | undefined;
  /** The layout its bucket numbers are of; undefined when what it published cannot be read. */
  readonly layout: Layout | undefined;
  /** When it first took its Lease (ms since the epoch): the oldest member lays the buckets out. */
  readonly acquired: number;
  /** The config it runs; undefined when it does not say (a version before it did). */
  readonly config?: MemberConfig | undefined;
}

/** What this member keeps and writes now, and who it sees. */
export interface MembershipState {
  readonly keeps: ReadonlySet<number>;
  readonly writes: ReadonlySet<number>;
  /** The live members, itself first. */
  readonly members: readonly MemberView[];
}

/** How the state changed: buckets newly kept (caches list them) or newly written (objects to look at). */
export interface MembershipChange {
  readonly keepsGrew: boolean;
  readonly keepsShrank: boolean;
  /** The buckets kept now and not before. */
  readonly kept: ReadonlySet<number>;
  readonly taken: ReadonlySet<number>;
}

export class Membership {
  readonly #api: LeaseStore;
  readonly #options: MembershipOptions;
  readonly #clock: MonotonicClock;
  readonly #name: string;
  readonly #listeners: ((change: MembershipChange) => void)[] = [];
  /** This member's Lease. */
  readonly #lease: LeaseHolder;
  /** Which other members' Leases are held. */
  readonly #observer: LeaseObserver;
  /** Writes under way per bucket: a bucket given up is published only once its writes are done. */
  readonly #inFlight = new Map<number, number>();
  #drained: (() => void) | undefined;
  /** When a write was last aborted on its way (monotonic): until a lease duration after, it may still land. */
  #cutShortAt = -Infinity;
  #keeps = new Set<number>();
  #writes = new Set<number>();
  /**
   * Buckets written whose holds were refused because the claim had run out before its lapse was
   * told (the event loop, back from a pause, read an event before the lapse's timer ran): a
   * renewal answered first cancels that lapse, so no round takes them again; they are told taken.
   */
  readonly #refused = new Set<number>();
  #members: MemberView[] = [];
  #ready = false;
  readonly #decided = Promise.withResolvers<void>();
  /** What was last published, so a round that changed it publishes again at once; and what the write under way publishes. */
  #published = { writes: '', ready: false, layout: Layout.uniform.id };
  #publishing = this.#published;
  #layout = Layout.uniform;
  /** When (our clock) the first live member's Lease expires unless renewed: a round then takes its buckets at once. */
  #nextExpiry = Infinity;
  /** Buckets are changing hands: rounds come four times as often. */
  #handingOver = false;
  /** When (our clock) this member, the oldest, last compared the layout with the namespaces. */
  #layoutChecked = -Infinity;
  /** The identities of the live members that are late, as last seen (each logged once). */
  #late: ReadonlySet<string> = new Set();
  /** Members (itself included) not on the group's newest config: which configs, and since when (our clock). */
  #behind = new Map<string, { readonly configs: string; readonly since: number }>();
  /** Those behind for longer than the skew allowed, by identity: their config, and the newest. */
  #stale = new Map<string, { readonly config: MemberConfig; readonly newest: MemberConfig }>();

  constructor(api: LeaseStore, options: MembershipOptions) {
    this.#api = api;
    this.#options = options;
    this.#clock = options.clock ?? monotonicClock;
    this.#observer = new LeaseObserver(this.#clock);
    this.#name = memberLeaseName(options.group, options.identity);
    this.#lease = new LeaseHolder(api, {
      namespace: options.namespace,
      name: this.#name,
      identity: options.identity,
      leaseDurationMs: options.leaseDurationMs,
      // Others judge it live for its duration from when they see the renewal; a margin covers the request's own time.
      validForMs: options.leaseDurationMs * 0.9,
      renewEveryMs: options.retryPeriodMs,
      content: (current) => this.#content(current),
      clock: this.#clock,
      log: options.log,
    });
  }

  get state(): MembershipState {
    return { keeps: this.#keeps, writes: this.#writes, members: this.#members };
  }

  /** What its bucket numbers mean. */
  get layout(): Layout {
    return this.#layout;
  }

  /** The buckets it caches now (read per watch event: no state object built). */
  get keeps(): ReadonlySet<number> {
    return this.#keeps;
  }

  /** True once the first round has worked out what to keep; false if `signal` aborts first. */
  async decided(signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return false;
    const { promise, resolve } = Promise.withResolvers<boolean>();
    const abort = () => resolve(false);
    signal.addEventListener('abort', abort, { once: true });
    void this.#decided.promise.then(() => resolve(true));
    try {
      return await promise;
    } finally {
      signal.removeEventListener('abort', abort);
    }
  }

  /** What /readyz notes: members of the group on a config older than the newest for longer than the skew allowed. */
  notes(): string[] {
    return this.#stale.size > 0 ? [`shard group: ${this.#describeStale()}`] : [];
  }

  /** Members, itself included, on a config older than the group's newest for longer than the skew allowed. */
  get staleConfigs(): number {
    return this.#stale.size;
  }

  /** Why this member is not ready: its Lease not held, or caches still listing what it keeps. */
  problems(): string[] {
    if (!this.#lease.valid()) return ['shard membership: its Lease is not held (renewing)'];
    return this.#ready ? [] : ['shard membership: listing the objects of its shard ranges'];
  }

  /** Told after every round that changed what this member keeps or writes. */
  subscribe(listener: (change: MembershipChange) => void): () => void {
    this.#listeners.push(listener);
    return () => {
      const index = this.#listeners.indexOf(listener);
      if (index >= 0) this.#listeners.splice(index, 1);
    };
  }

  /**
   * Claims a write of an object in `bucket`: a release function while this member writes the
   * bucket and its Lease is valid, else undefined (the object is another member's, or nobody may
   * write now). The bucket is not given up to another member before the release. Released with
   * `cutShort` when the write was aborted on its way: its bytes may have left, and may land later.
   */
  hold(bucket: number): ((cutShort?: boolean) => void) | undefined {
    if (!this.#writes.has(bucket)) return undefined;
    if (!this.#lease.valid()) {
      this.#refused.add(bucket);
      return undefined;
    }
    this.#inFlight.set(bucket, (this.#inFlight.get(bucket) ?? 0) + 1);
    let released = false;
    return (cutShort = false) => {
      if (released) return;
      released = true;
      if (cutShort) this.#cutShortAt = this.#clock.now();
      const left = (this.#inFlight.get(bucket) ?? 1) - 1;
      if (left > 0) this.#inFlight.set(bucket, left);
      else this.#inFlight.delete(bucket);
      if (left > 0 || this.#writes.has(bucket)) return;
      // The last write of a bucket given up: published at once, so its taker need not wait a round.
      this.#lease.renewSoon();
      if (!this.#draining()) this.#drained?.();
    };
  }

  /** Whether the writes of `bucket` may be sent now: it is written and the Lease's claim holds (checked as each is sent). */
  writing(bucket: number): boolean {
    return this.#writes.has(bucket) && this.#lease.valid();
  }

  /** Aborted when the claim of this member's Lease ends (a lapse, or leaving): writes on the wire stop. */
  get claim(): AbortSignal {
    return this.#lease.claim;
  }

  /** Holds the Lease and acts every retry period until `signal` aborts; then leaves the group (the Lease deleted). */
  async run(signal: AbortSignal): Promise<void> {
    const { log, group, namespace, identity, retryPeriodMs } = this.#options;
    log.info('joining shard group', { group, lease: `${namespace}/${this.#name}`, identity });
    const renewing = this.#lease.run(signal, {
      renewed: () => {
        this.#published = this.#publishing;
        this.#retake();
      },
      lapsed: () => {
        if (this.#writes.size === 0 && this.#keeps.size === 0) return;
        log.warn('shard membership Lease lapsed; giving up every bucket until it is renewed', { lease: this.#name });
        this.#change(this.#keeps, new Set());
      },
    }, true);
    let first = true;
    while (!signal.aborted) {
      await this.#round(signal, first);
      first = false;
      await this.#sleep(this.#handingOver ? retryPeriodMs / 4 : retryPeriodMs, signal);
    }
    await renewing;
    await this.#leave();
  }

  /** One round: renew (publishing), read the others, work out what to keep and write. */
  async #round(signal: AbortSignal, first: boolean): Promise<void> {
    const { log } = this.#options;
    try {
      // Renewed in its own loop; at the first round, or after a lapse, renewed here first.
      if (!this.#lease.valid() && (await this.#lease.round(signal)) !== 'renewed') return;
      // A member that starts beside others (a rollout, an install) waits a round to see them
      // before it chooses, rather than keeping everything and giving most of it up at once.
      if (first && (await this.#others(signal)).length === 0) await this.#sleep(this.#options.retryPeriodMs, signal);
      const others = (await this.#others(signal)).map(view);
      const layout = await this.#layoutOf(others, signal);
      if (layout !== this.#layout) await this.#relayout(layout, signal);
      this.#decide(others);
      // Publish what changed at once, so a bucket given up is taken without waiting a round.
      const { writes, ready, layout: id } = this.#publication();
      if (this.#published.writes !== writes || this.#published.ready !== ready || this.#published.layout !== id) {
        await this.#lease.round(signal);
      }
    } catch (error) {
      if (!signal.aborted) log.warn('shard membership round failed; retrying', { error });
    }
  }

  /** What this member publishes: the buckets it writes, and those it gave up whose writes are still under way. */
  #publication(): { writes: string; ready: boolean; layout: string } {
    const writes = new Set(this.#writes);
    for (const bucket of this.#inFlight.keys()) writes.add(bucket);
    return { writes: encodeBuckets(writes), ready: this.#ready, layout: this.#layout.id };
  }

  /** The labels and annotations of this member's Lease, over those it has. */
  #content(current: Lease['metadata'] | undefined): Pick<Lease['metadata'], 'labels' | 'annotations'> {
    const { group, objects } = this.#options;
    this.#publishing = this.#publication();
    return {
      labels: { ...current?.labels, [GROUP_LABEL]: group },
      annotations: {
        ...current?.annotations,
        [READY]: String(this.#publishing.ready),
        [WRITES]: this.#publishing.writes,
        [RANGES]: describeRanges(decodeBuckets(this.#publishing.writes)),
        [LAYOUT]: this.#layout.encode(),
        ...(objects ? { [OBJECTS]: String(objects()) } : {}),
        ...(this.#options.config ? { [CONFIG]: encodeConfig(this.#options.config()) } : {}),
      },
    };
  }

  /** The other members' Leases that are live; expired ones are deleted. */
  async #others(signal: AbortSignal): Promise<Lease[]> {
    const { namespace, group, leaseDurationMs, retryPeriodMs, log } = this.#options;
    const sent = this.#clock.now();
    const leases = await this.#api.list(namespace, `${GROUP_LABEL}=${group}`, signal);
    const observed = this.#observer.observe(
      leases.filter((lease) => lease.metadata.name !== this.#name),
      sent,
      Math.max(2.5 * retryPeriodMs, leaseDurationMs / 3),
    );
    for (const lease of await deleteExpired(observed, (lease) => this.#api.delete(lease, signal))) {
      log.info('shard member gone: its Lease expired', {
        identity: lease.spec.holderIdentity,
        lease: lease.metadata.name,
      });
    }
    const { held, nextExpiry, late } = observed;
    this.#nextExpiry = nextExpiry;
    const lateIdentities = new Set(held.filter((lease) => late.has(lease.metadata.name)).map((l) => view(l).identity));
    for (const identity of lateIdentities) {
      if (this.#late.has(identity)) continue;
      log.info('shard member late: its Lease not renewed; listing its buckets in case it is gone', { identity });
    }
    this.#late = lateIdentities;
    return held;
  }

  /**
   * The layout to use: the oldest live member's. When that is this member, it is the one in use
   * unless the namespaces have outgrown it (their fullest bucket more than twice as full as a fresh
   * layout's, plus a few: a new layout moves every bucket, so only a clear gain is worth it).
   */
  async #layoutOf(others: readonly MemberView[], signal: AbortSignal): Promise<Layout> {
    const acquired = Date.parse(this.#lease.lease?.spec.acquireTime ?? '') || Date.now();
    const oldest = others.reduce<MemberView | undefined>(
      (best, member) =>
        member.acquired < (best?.acquired ?? acquired) ||
          (member.acquired === (best?.acquired ?? acquired) &&
            member.identity < (best?.identity ?? this.#options.identity))
          ? member
          : best,
      undefined,
    );
    // The same layout read back is kept as it is, with the buckets it has worked out.
    if (oldest) return oldest.layout && oldest.layout.id !== this.#layout.id ? oldest.layout : this.#layout;
    const { namespaces, layoutPeriodMs = 300_000, log } = this.#options;
    const now = this.#clock.now();
    if (!namespaces || now - this.#layoutChecked < layoutPeriodMs) return this.#layout;
    this.#layoutChecked = now;
    const names = await namespaces(signal).catch((error: unknown) => {
      log.warn('listing namespaces for the shard layout failed; keeping the layout', { error });
      return undefined;
    });
    if (!names) return this.#layout;
    const fresh = Layout.of(names);
    const fullest = this.#layout.fullest(names);
    if (fullest <= 2 * fresh.fullest(names) + 4) return this.#layout;
    log.info('laying the shard buckets out anew over the namespaces', {
      layout: fresh.id,
      namespaces: names.length,
      fullestBucket: fullest,
      fullestBucketNow: fresh.fullest(names),
    });
    return fresh;
  }

  /**
   * Changes layout: bucket numbers change meaning, so every bucket is given up (published, after
   * the writes under way) before the new numbers are used; the caches then list what it keeps anew.
   */
  async #relayout(layout: Layout, signal: AbortSignal): Promise<void> {
    this.#options.log.info('shard layout changed', { from: this.#layout.id, to: layout.id });
    if (this.#writes.size > 0) {
      this.#change(this.#keeps, new Set());
      await this.#drain(signal);
      if ((await this.#lease.round(signal)) !== 'renewed') throw new Error('could not publish its buckets given up');
    }
    this.#change(new Set(), new Set());
    this.#layout = layout;
  }

  /** Works out what to keep and write from the live members. */
  #decide(all: readonly MemberView[]): void {
    const { identity } = this.#options;
    this.#judgeConfigs(all);
    // Members on an old config past the skew allowed write nothing: the others take their buckets
    // once they publish them given up (below, `claimed`), as they do once they see it themselves.
    const views = all.filter((member) => !this.#stale.has(member.identity));
    const self = !this.#stale.has(identity);
    // A late member's buckets are kept as if it were gone (listed ahead), not written until it is.
    const current = [identity, ...views.filter((m) => !this.#late.has(m.identity)).map((m) => m.identity)];
    const ready = [identity, ...views.filter((member) => member.ready).map((member) => member.identity)];
    const wonAmongReady = self ? bucketsOf(identity, ready) : new Set<number>();
    const keeps = self ? bucketsOf(identity, current) : new Set<number>();
    for (const bucket of this.#writes) if (wonAmongReady.has(bucket)) keeps.add(bucket);
    // Caches that hold all they keep (a grown set lists again first).
    const synced = [...keeps].every((bucket) => this.#keeps.has(bucket)) && this.#options.synced();
    const claimed = new Map<number, string>();
    for (const member of all) for (const bucket of member.writes) claimed.set(bucket, member.identity);
    // A live member still writing under another layout: its buckets cannot be told apart from ours.
    const settled = views.every((member) => member.writes.size === 0 || member.layout?.id === this.#layout.id);
    const writes = new Set<number>();
    this.#handingOver = views.some((member) => !member.ready) || !settled;
    for (const bucket of keeps) {
      if (!settled && !this.#writes.has(bucket)) continue;
      const other = claimed.get(bucket);
      if (synced && other !== undefined && wonAmongReady.has(bucket)) this.#handingOver = true;
      // Two writers of a bucket (each took it before seeing the other): the bucket's winner keeps it.
      if (other !== undefined && !(this.#writes.has(bucket) && winner([identity, other], bucket) === identity)) {
        continue;
      }
      if (synced ? wonAmongReady.has(bucket) : this.#writes.has(bucket)) writes.add(bucket);
    }
    this.#ready = synced;
    this.#members = [
      {
        identity,
        self: true,
        ready: synced,
        writes,
        objects: this.#options.objects?.(),
        layout: this.#layout,
        acquired: Date.parse(this.#lease.lease?.spec.acquireTime ?? '') || Date.now(),
        config: this.#options.config?.(),
      },
      ...all,
    ];
    this.#change(keeps, writes);
    this.#decided.resolve();
  }

  /**
   * Which members (itself included) run a config other than the group's newest, and for how long:
   * those behind for longer than the skew allowed are stale, reported once as they become so.
   */
  #judgeConfigs(views: readonly MemberView[]): void {
    const { identity, config, configSkewMs = CONFIG_SKEW_MS, log, split } = this.#options;
    if (!config) return;
    const members = [
      { identity, config: config() },
      ...views.flatMap((m) => m.config ? [{ identity: m.identity, config: m.config }] : []),
    ];
    const newest = members.reduce((a, b) => (newer(b.config, a.config) ? b : a)).config;
    const now = this.#clock.now();
    const stale = new Map<string, { readonly config: MemberConfig; readonly newest: MemberConfig }>();
    const behind = new Map<string, { readonly configs: string; readonly since: number }>();
    for (const member of members) {
      if (member.config.fingerprint === newest.fingerprint) continue;
      const configs = `${encodeConfig(member.config)}<${encodeConfig(newest)}`;
      const seen = this.#behind.get(member.identity);
      const since = seen?.configs === configs ? seen.since : now;
      behind.set(member.identity, { configs, since });
      if (now - since >= configSkewMs) stale.set(member.identity, { config: member.config, newest });
    }
    this.#behind = behind;
    const added = [...stale.keys()].filter((member) => !this.#stale.has(member));
    this.#stale = stale;
    if (added.length === 0) return;
    const note = this.#describeStale();
    log.error('shard group split between configs', { members: [...stale.keys()], newest: encodeConfig(newest), note });
    split?.(note);
  }

  #describeStale(): string {
    const stale = [...this.#stale];
    const newest = stale[0]?.[1].newest;
    if (!newest) return '';
    const members = stale.map(([identity, { config }]) => `${identity} (config ${encodeConfig(config)})`).join(', ');
    const tie = stale.some(([, { config }]) => config.generation === newest.generation)
      ? '; both have the same generation, so which is newer cannot be told: give each change of the config a greater generation'
      : '';
    return `members ${members} have run another config than the group's newest (${
      encodeConfig(newest)
    }) for longer than ${
      Math.round((this.#options.configSkewMs ?? CONFIG_SKEW_MS) / 1000)
    } s: they give their buckets up to the members on it until they load it${tie}`;
  }

  #change(keeps: Set<number>, writes: Set<number>): void {
    const kept = new Set([...keeps].filter((bucket) => !this.#keeps.has(bucket)));
    const keepsGrew = kept.size > 0;
    const keepsShrank = [...this.#keeps].some((bucket) => !keeps.has(bucket));
    const taken = new Set([...writes].filter((bucket) => !this.#writes.has(bucket)));
    const given = [...this.#writes].filter((bucket) => !writes.has(bucket));
    if (!keepsGrew && !keepsShrank && taken.size === 0 && given.length === 0) return;
    const { log } = this.#options;
    if (taken.size > 0 || given.length > 0) {
      log.info('shard ranges changed', {
        writes: describeRanges(writes),
        taken: describeRanges(taken) || undefined,
        given: describeRanges(new Set(given)) || undefined,
        members: this.#members.length,
      });
    }
    this.#keeps = keeps;
    this.#writes = writes;
    if (keepsGrew) this.#ready = false;
    for (const listener of this.#listeners) listener({ keepsGrew, keepsShrank, kept, taken });
  }

  /**
   * Tells the buckets refused to writes while the claim had run out as taken, those still written
   * now that it is renewed, so that what was left for them is looked at again. After a lapse told
   * first they are written no more, and the next round takes them again.
   */
  #retake(): void {
    if (this.#refused.size === 0) return;
    const taken = new Set([...this.#refused].filter((bucket) => this.#writes.has(bucket)));
    this.#refused.clear();
    if (taken.size === 0) return;
    for (const listener of this.#listeners) listener({ keepsGrew: false, keepsShrank: false, kept: new Set(), taken });
  }

  /** Whether writes of buckets no longer written are under way. */
  #draining(): boolean {
    return [...this.#inFlight.keys()].some((bucket) => !this.#writes.has(bucket));
  }

  /**
   * Waits for writes of buckets no longer written to finish: the Lease is renewed meanwhile, and
   * a lapse aborts them (their reconciles pass `claim`), so the wait is bounded.
   */
  async #drain(signal: AbortSignal): Promise<void> {
    while (this.#draining() && !signal.aborted) {
      await new Promise<void>((resolve) => {
        this.#drained = resolve;
        void this.#clock.sleep(this.#options.retryPeriodMs, signal).then(resolve);
      });
    }
  }

  /** Sleeps `ms`, or until woken early by the caches becoming synced or a member's Lease expiring. */
  async #sleep(ms: number, signal: AbortSignal): Promise<void> {
    const now = this.#clock.now();
    // An expiry already past was seen by a round that could not act on it (its renewal failed):
    // waking for it again would retry without a pause.
    const until = Math.min(now + ms, this.#nextExpiry > now ? this.#nextExpiry : Infinity);
    // While the caches list what this member keeps, look often, so buckets are taken soon after.
    while (!signal.aborted && this.#clock.now() < until) {
      if (!this.#ready && this.#keeps.size > 0 && this.#options.synced()) return;
      await this.#clock.sleep(Math.min(250, until - this.#clock.now()), signal);
    }
  }

  /**
   * Gives every bucket up and deletes the Lease, so the others take over at once; unless a write
   * may still land (one aborted on its way within a lease duration, or one the drain gave up on),
   * when the Lease is left to expire: the others wait its duration, as they would at a crash.
   */
  async #leave(): Promise<void> {
    const { log, group, retryPeriodMs, leaseDurationMs } = this.#options;
    this.#change(new Set(), new Set());
    const timeoutMs = Math.max(1000, retryPeriodMs);
    await this.#drain(AbortSignal.timeout(timeoutMs));
    if (this.#draining() || this.#clock.now() - this.#cutShortAt < leaseDurationMs) {
      await this.#lease.release('keep', timeoutMs);
      log.info('left shard group, leaving the Lease to expire: a write aborted on its way may still land', {
        group,
        lease: this.#name,
      });
      return;
    }
    await this.#lease.release('delete', timeoutMs);
    log.info('left shard group', { group });
  }
}

/** A member's Lease name: the group, then a hash of the identity (a pod name and a random suffix may be long). */
export function memberLeaseName(group: string, identity: string): string {
  return `${group}-member-${createHash('sha256').update(identity).digest('hex').slice(0, 10)}`;
}

/** A member Lease read back. */
export function view(lease: Lease): MemberView {
  const annotations = lease.metadata.annotations ?? {};
  const objects = Number(annotations[OBJECTS]);
  return {
    identity: lease.spec.holderIdentity ?? lease.metadata.name,
    self: false,
    ready: annotations[READY] === 'true',
    writes: decodeBuckets(annotations[WRITES]),
    objects: Number.isFinite(objects) && annotations[OBJECTS] !== undefined ? objects : undefined,
    layout: Layout.decode(annotations[LAYOUT] ?? 'uniform'),
    acquired: Date.parse(lease.spec.acquireTime ?? '') || Date.now(),
    config: decodeConfig(annotations[CONFIG]),
  };
}

/** `generation/fingerprint`, as a member publishes its config. */
function encodeConfig({ generation, fingerprint }: MemberConfig): string {
  return `${generation}/${fingerprint}`;
}

function decodeConfig(value: string | undefined): MemberConfig | undefined {
  const slash = value?.indexOf('/') ?? -1;
  if (value === undefined || slash < 0) return undefined;
  const generation = Number(value.slice(0, slash));
  return Number.isSafeInteger(generation) ? { generation, fingerprint: value.slice(slash + 1) } : undefined;
}

/** Whether `a` is a newer config than `b`: a greater generation, or (a tie) the greater fingerprint, so every member agrees. */
function newer(a: MemberConfig, b: MemberConfig): boolean {
  return a.generation !== b.generation ? a.generation > b.generation : a.fingerprint > b.fingerprint;
}

/** A shard group's member as `labeller status` shows it. */
export interface MemberStatus {
  readonly group: string;
  readonly identity: string;
  readonly ready: boolean;
  /** Its share of the namespace hash space: buckets written ÷ BUCKETS. */
  readonly share: number;
  readonly ranges: string;
  /** Objects it caches, as it last published. */
  readonly objects: number | undefined;
  /** Seconds since it last renewed its Lease, by this host's clock. */
  readonly renewedSecondsAgo: number | undefined;
}

/** The members of every shard group whose Leases live in `namespace`, by group and identity. */
export async function readMembers(api: LeaseApi, namespace: string, signal?: AbortSignal): Promise<MemberStatus[]> {
  const leases = await api.list(namespace, GROUP_LABEL, signal);
  return leases.map((lease) => {
    const member = view(lease);
    const renewed = Date.parse(lease.spec.renewTime ?? '');
    return {
      group: lease.metadata.labels?.[GROUP_LABEL] ?? '',
      identity: member.identity,
      ready: member.ready,
      share: member.writes.size / BUCKETS,
      ranges: describeRanges(member.writes),
      objects: member.objects,
      renewedSecondsAgo: Number.isNaN(renewed) ? undefined : Math.max(0, Math.round((Date.now() - renewed) / 1000)),
    };
  }).sort((a, b) => a.group.localeCompare(b.group) || a.identity.localeCompare(b.identity));
}
