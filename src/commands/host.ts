// What every command runs on: the API client (its request metrics), labeller's Events, the probe
// and metrics servers, the discovery cache, and, once a command starts its config, the manager
// and the kind set that keeps its kinds running. The commands (label.ts, once.ts, status.ts,
// prune.ts) differ only in what they do with the kinds once started: the data path from config to
// apply is the same for each.
import { configFingerprint } from '../config/fingerprint.ts';
import { type Config, kindSettings } from '../config/model.ts';
import { type EventsIdentity, LabellerEvents } from '../events/labellerevents.ts';
import { KindError, type Resolved, resolveKinds } from '../kinds/resolve.ts';
import { KindSet, type KindSetOptions } from '../kinds/kindset.ts';
import type { WiringOptions } from '../kinds/controller.ts';
import type { Writable } from '../labelling/ports.ts';
import type { SourceMemory } from '../sources/memory.ts';
import { deniedAccess } from '../kube/access.ts';
import { MetadataApi, metadataApis } from '../kube/api.ts';
import type { KubeClient } from '../kube/client.ts';
import { isForbidden, isNotFound } from '../apimachinery/errors.ts';
import type { ApiResource } from '../apimachinery/resource.ts';
import { DiscoveryCache } from '../kube/discoverycache.ts';
import { LeaseApi } from '../kube/lease.ts';
import type { LabelledObject } from '../labelling/object.ts';
import { noOutcomes, type OutcomeCounts } from '../labelling/reconcile.ts';
import { Metrics } from '../metrics/metrics.ts';
import { type BindAddress, type Endpoints, formatAddress, type Readiness, serveHttp } from '../metrics/server.ts';
import { type LeaderElectionOptions, LeaderElector } from '../runtime/leader.ts';
import { Manager, type StopReason } from '../runtime/manager.ts';
import { type MemberConfig, Membership, type MembershipOptions } from '../shard/membership.ts';
import { BUCKETS, describeRanges } from '../shard/ranges.ts';
import { Shard } from '../shard/shard.ts';
import type { Shutdown } from '../runtime/shutdown.ts';
import type { Logger } from '../util/log.ts';

/** Leader election through the Lease `namespace/name`. */
export type LeaderElectionConfig = Omit<LeaderElectionOptions, 'log' | 'onLeadingChange'> & {
  readonly namespace: string;
  readonly name: string;
};

/** A shard group's membership (--shards auto): what Membership takes besides what the host knows. */
export type ShardingConfig = Omit<
  MembershipOptions,
  'synced' | 'objects' | 'namespaces' | 'config' | 'split' | 'log' | 'clock'
>;

/** What the host takes of the command-line options, plus what the entry point works out. */
export interface HostOptions extends WiringOptions {
  /** List once instead of watching: every command but the controller. */
  readonly once: boolean;
  readonly gracePeriodMs: number;
  readonly metricsBindAddress: BindAddress | undefined;
  readonly healthProbeBindAddress: BindAddress | undefined;
  /** Set when several replicas elect a leader through a Lease. */
  readonly leaderElection?: LeaderElectionConfig | undefined;
  /** Set when Kubernetes Events are written. */
  readonly events?: EventsIdentity | undefined;
  /** Set when replicas share the work (--shards auto): each writes its share of the namespaces. */
  readonly sharding?: ShardingConfig | undefined;
}

/**
 * How a command ended, which the CLI maps to an exit status: `done` with all of its work, or
 * `incomplete` when some of it could not be done (or a signal cut it short), `missing rights`
 * when the preflight found rights the controller would need missing; a controller ends
 * as its manager stopped (runtime/manager.ts).
 */
export type Ending = 'done' | 'incomplete' | 'missing rights' | StopReason;

/** A command's config, running. */
export interface Started {
  readonly manager: Manager<LabelledObject>;
  readonly kinds: KindSet;
  /** This member's share, when replicas share the work. */
  readonly shard?: Shard | undefined;
  /** Why this process may not write now (leadership or the guard's Lease lapsed), asked as each write is sent. */
  readonly claimed?: (() => string | undefined) | undefined;
}

export interface StartOptions {
  /** The verbs the command needs on each kind, asked about before a kind of the every-kind entry starts. */
  readonly verbs: readonly string[];
  /** Claims each config before it takes effect (the field-manager guard; none for reads and dry runs). */
  readonly claim?: KindSetOptions['claim'];
  /** Logged with `starting`: the config file followed. */
  readonly reload?: string | undefined;
  /** Writes wait for it (the field-manager guard's Lease held). */
  readonly writable?: Writable | undefined;
  /** Why this process may not write now (the guard's Lease lapsed), asked as each write is sent, after `writable`. */
  readonly claimed?: (() => string | undefined) | undefined;
  /** Each source's last good key set across restarts (sources/memory.ts). */
  readonly sourceMemory?: SourceMemory | undefined;
}

export class Host {
  readonly client: KubeClient;
  readonly options: HostOptions;
  readonly shutdown: Shutdown;
  readonly log: Logger;
  readonly metrics = new Metrics();
  readonly events: LabellerEvents | undefined;
  readonly discovery: DiscoveryCache;
  /** Reconcile outcomes of every controller, for the `--once` summary and the final log line. */
  readonly counts: OutcomeCounts = noOutcomes();
  readonly #stopEvents = new AbortController();
  readonly #recording: Promise<void> | undefined;
  readonly #unsubscribe: () => void;
  #servers: { close(): void }[] = [];
  /** The kind set of the command's config, let go at close. */
  #kinds: KindSet | undefined;
  /** Set once the first config has been claimed and wired: readiness waits for it. */
  #started: Started | undefined;
  /** More of what /readyz notes, beside the kinds' (the admission policies refused). */
  readonly #notes: (() => string[])[] = [];
  /** The shard membership running, ended (the member leaving) at close. */
  #membership: { readonly stop: AbortController; readonly running: Promise<void> } | undefined;

  private constructor(client: KubeClient, options: HostOptions, shutdown: Shutdown, log: Logger) {
    this.client = client;
    this.options = options;
    this.shutdown = shutdown;
    this.log = log;
    this.#unsubscribe = shutdown.onSignal((signal, first) =>
      first
        ? log.info('shutting down: stopping watches, letting running patches finish', {
          signal,
          gracePeriodMs: options.gracePeriodMs,
        })
        : log.warn('second signal: exiting now', { signal })
    );
    client.observe(this.metrics.restClient(new URL(client.server).host));
    // Events go out in the background and never hold up a reconcile; pending ones get a moment at exit.
    this.events = options.events && new LabellerEvents(client, options.events, log);
    this.#recording = this.events?.run(this.#stopEvents.signal);
    this.discovery = DiscoveryCache.of(client, log);
  }

  /**
   * Serves probes and metrics (not for one-off commands) and loads discovery. Answers undefined,
   * with everything let go, when a signal came first.
   */
  static async open(
    client: KubeClient,
    /** The kinds as named, for the first log line. */
    kinds: readonly string[],
    options: HostOptions,
    shutdown: Shutdown,
    log: Logger,
  ): Promise<Host | undefined> {
    // The shutdown coordinator has covered signals since the entry point; this first line tells
    // whoever waits for labeller to start that it is under way.
    log.info('connecting to the API server', {
      server: client.server,
      kinds,
    });
    const host = new Host(client, options, shutdown, log);
    try {
      // Up before discovery, so probes see "not ready" rather than a refused connection.
      if (!options.once) await host.#serve();
      if (await host.discovery.load(shutdown.intake)) return host;
      log.info('stopped before discovery completed');
    } catch (error) {
      await host.close();
      throw error;
    }
    await host.close();
    return undefined;
  }

  /**
   * Makes `config` the config in force: its kinds resolved, claimed and wired under a new
   * manager. Throws KindError when none of its kinds is served; answers undefined when a signal
   * came before the first write.
   */
  async start(
    config: Config,
    { verbs, claim, reload, writable, claimed, sourceMemory }: StartOptions,
  ): Promise<Started | undefined> {
    const { client, options, discovery, metrics, events, log, shutdown, counts } = this;
    mustServeSome(resolveKinds(config.kinds, discovery, config.references), config, discovery);
    const election = options.leaderElection;
    const elector = election && new LeaderElector(
      new LeaseApi(client),
      { ...election, log, onLeadingChange: metrics.leader(election.name) },
    );
    const manager = new Manager<LabelledObject>({
      once: options.once,
      elector,
      gracePeriodMs: options.gracePeriodMs,
      log,
    }, shutdown);
    const shard = options.sharding && !options.once
      ? this.#joinShardGroup(options.sharding, manager, () => this.#kinds, () => this.#kinds?.config ?? config)
      : undefined;
    // Its share is known before any cache lists: a cache that listed everything would give most of it up at once.
    if (shard && !(await shard.membership.decided(shutdown.intake))) {
      log.info('stopped before the first write');
      return undefined;
    }
    // Leadership, then the guard: both are checked as each write is sent, as the shard bucket is.
    const processClaimed = elector || claimed
      ? () => (elector && !elector.valid() ? 'leadership lapsed' : undefined) ?? claimed?.()
      : undefined;
    const kinds = new KindSet({
      manager,
      discovery,
      wiring: {
        apis: metadataApis(client),
        options,
        log,
        counts,
        metrics,
        events,
        writable,
        claimed: processClaimed,
        notServed: () => discovery.notServed(),
        shard,
      },
      claim,
      sourceMemory,
      access: (resource, namespaces, signal) => deniedAccess(client, resource, namespaces, verbs, signal),
      log,
    });
    this.#kinds = kinds;
    metrics.relatedUnreadable(() => kinds.relations?.unreadable.list() ?? []);
    metrics.kindsSkipped(() => kinds.skipped);
    metrics.sources(() => kinds.sources.states());
    try {
      await kinds.apply(config, shutdown.intake);
    } catch (error) {
      // A signal during the guard's check: nothing was written, nothing to report.
      if (!shutdown.intake.aborted) throw error;
      log.info('stopped before the first write');
      return undefined;
    }
    // Ready no sooner than the controllers are wired (after the guard's check), so a probe cannot
    // see an empty list of controllers as ready.
    this.#started = { manager, kinds, shard, claimed: processClaimed };
    log.info('starting', {
      kinds: kinds.kinds.map((kind) => kind.resolved.kind.resource),
      dryRun: options.dryRun || undefined,
      once: options.once || undefined,
      reload,
    });
    return this.#started;
  }

  /** Adds to what /readyz notes: why labels are held or set later, not keeping labeller from being ready. */
  addNotes(notes: () => string[]): void {
    this.#notes.push(notes);
  }

  /**
   * Joins the shard group: the membership runs until close(), and objects in buckets it takes over
   * are looked at again (they were another member's until now).
   */
  #joinShardGroup(
    sharding: ShardingConfig,
    manager: Manager<LabelledObject>,
    kinds: () => KindSet | undefined,
    config: () => Config,
  ): Shard {
    const membership = new Membership(new LeaseApi(this.client), {
      ...sharding,
      // A kind it may not read (or that is gone) does not hold the others back; a dropped connection does.
      synced: () =>
        manager.informers.informers.every((informer) =>
          informer.current((failure) => isForbidden(failure) || isNotFound(failure))
        ),
      objects: () => kinds()?.kinds.reduce((sum, kind) => sum + kind.controller.size, 0) ?? 0,
      // The config in force, which the first round sees before its kinds run.
      config: () => memberConfig(config()),
      split: this.events && ((note) => this.events?.shardConfigSplit(note)),
      namespaces: (signal) => {
        const named = namedNamespaces(config());
        return named ? Promise.resolve(named) : namespaceNames(this.client, signal);
      },
      log: this.log,
    });
    membership.subscribe(({ taken }) => {
      if (taken.size > 0) { for (const kind of kinds()?.kinds ?? []) kind.taken(taken); }
    });
    this.metrics.shard(() => {
      const { members, keeps, writes } = membership.state;
      return {
        members: members.length,
        keeps: keeps.size,
        writes: writes.size,
        buckets: BUCKETS,
        ranges: describeRanges(writes),
        staleConfigs: membership.staleConfigs,
        filtering: manager.informers.informers.flatMap((informer) =>
          informer.filtering ? [{ controller: informer.name, filtering: informer.filtering }] : []
        ),
      };
    });
    const stop = new AbortController();
    this.#membership = { stop, running: membership.run(stop.signal) };
    return new Shard(membership);
  }

  /** Lets everything go: the shard membership (its buckets to the others), the kinds (once the manager has stopped them), pending Events, the servers. */
  async close(): Promise<void> {
    this.#membership?.stop.abort();
    await this.#membership?.running;
    await this.#kinds?.release();
    this.#stopEvents.abort();
    await this.#recording;
    await this.events?.drain();
    for (const server of this.#servers) server.close();
    this.#unsubscribe();
  }

  async #serve(): Promise<void> {
    const readiness: Readiness = {
      problems: () => {
        const started = this.#started;
        return started
          ? [
            ...started.manager.problems(),
            ...started.kinds.sources.problems(),
            ...(started.shard?.membership.problems() ?? []),
          ]
          : ['waiting for API discovery'];
      },
      notes: () => [
        ...(this.#started?.kinds.notes() ?? []),
        ...(this.#started?.shard?.membership.notes() ?? []),
        ...this.#notes.flatMap((notes) => notes()),
      ],
    };
    this.metrics.readiness(() => readiness.problems().length === 0);
    this.#servers = await Promise.all(
      serversFor(this.options, { readiness, registry: this.metrics.registry }).map(async ([address, endpoints]) => {
        const server = await serveHttp(address, endpoints);
        this.log.info('serving', {
          address: formatAddress(address),
          paths: [...(endpoints.readiness ? ['/healthz', '/readyz'] : []), ...(endpoints.registry ? ['/metrics'] : [])],
        });
        return server;
      }),
    );
  }
}

const memberConfigs = new WeakMap<Config, MemberConfig>();

/** The config as a shard member publishes it: its fingerprint (worked out once per config) and generation. */
function memberConfig(config: Config): MemberConfig {
  let known = memberConfigs.get(config);
  if (!known) {
    known = { fingerprint: configFingerprint(config), generation: config.generation ?? 0 };
    memberConfigs.set(config, known);
  }
  return known;
}

/**
 * The namespaces to lay the shard buckets out over when every entry of `config` names its
 * namespaces (no list of them needed, nor the right to it); undefined when one covers all.
 */
export function namedNamespaces(config: Pick<Config, 'kinds' | 'everyKind'>): string[] | undefined {
  const named = kindSettings(config).map((kind) => kind.namespaces);
  if (named.length === 0 || named.some((namespaces) => namespaces.length === 0)) return undefined;
  return [...new Set(named.flat())];
}

/**
 * Throws KindError when no configured kind is served (and no group failed discovery, which may
 * serve one). An every-kind entry waits for what comes.
 */
function mustServeSome({ resolved, unknown }: Resolved, config: Config, discovery: DiscoveryCache): void {
  if (resolved.length > 0 || config.everyKind || discovery.discovery.failedGroups.length > 0) return;
  throw new KindError(
    unknown.length === 1
      ? unknown[0]!.error.message
      : `none of the configured kinds is served by the API server: ${unknown.map((u) => u.kind.resource).join(', ')}`,
  );
}

/** One server per distinct address: probes and metrics share one when their addresses are the same. */
function serversFor(
  options: Pick<HostOptions, 'metricsBindAddress' | 'healthProbeBindAddress'>,
  all: Required<Endpoints>,
): [BindAddress, Endpoints][] {
  const { metricsBindAddress: metrics, healthProbeBindAddress: probes } = options;
  if (metrics && probes && formatAddress(metrics) === formatAddress(probes)) return [[probes, all]];
  return [
    ...(probes ? [[probes, { readiness: all.readiness }] as [BindAddress, Endpoints]] : []),
    ...(metrics ? [[metrics, { registry: all.registry }] as [BindAddress, Endpoints]] : []),
  ];
}

const NAMESPACES: ApiResource = {
  group: '',
  version: 'v1',
  resource: 'namespaces',
  singular: 'namespace',
  kind: 'Namespace',
  shortNames: ['ns'],
  namespaced: false,
  verbs: ['list'],
  preferred: true,
};

/** The names of the cluster's namespaces, for the shard layout; undefined when they may not be listed. */
async function namespaceNames(client: KubeClient, signal: AbortSignal): Promise<string[] | undefined> {
  const api = new MetadataApi(client, NAMESPACES);
  const names: string[] = [];
  let page: string | undefined;
  try {
    do {
      const list = await api.list({ limit: 500, continue: page, signal });
      for (const item of list.items) names.push(item.metadata.name);
      page = list.metadata.continue || undefined;
    } while (page);
  } catch (error) {
    if (isForbidden(error)) return undefined;
    throw error;
  }
  return names;
}
