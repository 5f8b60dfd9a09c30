// The composition root: config → discovery → manager → informers and their stores → queues →
// reconcile → apply. The config in force (from flags, or a followed file) becomes a set of kinds
// through one path (kindset.ts); the manager runs their controllers under the entry point's
// shutdown coordinator, with leader election and the field-manager guard; `--once`, `status` and
// `prune` are the same kinds listed once.
import { deniedAccess } from '../kube/access.ts';
import { metadataApis } from '../kube/api.ts';
import type { KubeClient } from '../kube/client.ts';
import { DiscoveryCache } from '../kube/discoverycache.ts';
import { LeaseApi, LeaseLock } from '../kube/lease.ts';
import type { Config } from '../labeller/config.ts';
import { kindSettings } from '../labeller/everykindconfig.ts';
import type { LabelledObject } from '../labeller/object.ts';
import { Metrics } from '../metrics/metrics.ts';
import { type BindAddress, type Endpoints, formatAddress, type Readiness, serveHttp } from '../metrics/server.ts';
import { type LeaderElectionOptions, LeaderElector } from '../runtime/leader.ts';
import { Manager } from '../runtime/manager.ts';
import type { Shutdown } from '../runtime/shutdown.ts';
import type { Logger } from '../util/log.ts';
import { type ConfigSource, followConfig } from './configsource.ts';
import { noCounts, type WiringOptions } from './controllers.ts';
import { type EventsIdentity, LabellerEvents } from './events.ts';
import { FieldManagerTaken, guardFor, type GuardOptions } from './guard.ts';
import { KindError, resolveKinds } from './kinds.ts';
import { KindSet } from './kindset.ts';
import { runOnce } from './once.ts';
import { pruneConfig } from './prune.ts';
import { runStatus } from './status.ts';

/** Leader election through the Lease `namespace/name`. */
export type LeaderElectionConfig = Omit<LeaderElectionOptions, 'log' | 'onLeadingChange'> & {
  readonly namespace: string;
  readonly name: string;
};

/** What the app takes of the command-line options, plus what the entry point works out. */
export interface AppOptions extends WiringOptions {
  readonly command: 'label' | 'status' | 'prune';
  /** Converge once and exit (`--once`; always for status and prune). */
  readonly once: boolean;
  readonly allKinds: boolean;
  readonly output: 'table' | 'json';
  readonly namespaces: readonly string[] | undefined;
  readonly gracePeriodMs: number;
  readonly metricsBindAddress: BindAddress | undefined;
  readonly healthProbeBindAddress: BindAddress | undefined;
  /** Set when several replicas elect a leader through a Lease. */
  readonly leaderElection?: LeaderElectionConfig | undefined;
  /** Set when Kubernetes Events are written. */
  readonly events?: EventsIdentity | undefined;
  /** The field-manager guard (off with --dry-run, which writes nothing). */
  readonly guard: Omit<GuardOptions, 'log'> & { readonly identity: string };
  /** The config file, when there is one: its changes are applied live in controller mode. */
  readonly configSource?: ConfigSource | undefined;
}

/** Runs until a signal (or, with `once`, until every object was seen once). Returns the exit status. */
export async function runApp(
  client: KubeClient,
  config: Config,
  options: AppOptions,
  shutdown: Shutdown,
  log: Logger,
): Promise<number> {
  const { intake } = shutdown;
  const unsubscribe = shutdown.onSignal((signal, first) =>
    first
      ? log.info('shutting down: stopping watches, letting running patches finish', {
        signal,
        gracePeriodMs: options.gracePeriodMs,
      })
      : log.warn('second signal: exiting now', { signal })
  );
  // The shutdown coordinator has covered signals since the entry point; this first line tells
  // whoever waits for labeller to start that it is under way.
  log.info('connecting to the API server', {
    server: client.server,
    kinds: kindSettings(config).map((kind) => kind.resource),
  });
  const metrics = new Metrics();
  client.observe(metrics.restClient(new URL(client.server).host));
  // Events go out in the background and never hold up a reconcile; pending ones get a moment at exit.
  const events = options.events && new LabellerEvents(client, options.events, log);
  const stopEvents = new AbortController();
  const recording = events?.run(stopEvents.signal);
  let wired: { manager: Manager<LabelledObject>; kinds: KindSet } | undefined;
  // Up before discovery, so probes see "not ready" rather than a refused connection.
  const readiness: Readiness = {
    problems:
      () => (wired ? [...wired.manager.problems(), ...wired.kinds.sources.problems()] : ['waiting for API discovery']),
    notes: () => wired?.kinds.notes() ?? [],
  };
  const servers = options.once ? [] : await Promise.all(
    serversFor(options, { readiness, registry: metrics.registry }).map(async ([address, endpoints]) => {
      const server = await serveHttp(address, endpoints);
      log.info('serving', {
        address: formatAddress(address),
        paths: [...(endpoints.readiness ? ['/healthz', '/readyz'] : []), ...(endpoints.registry ? ['/metrics'] : [])],
      });
      return server;
    }),
  );
  const discovery = DiscoveryCache.of(client, log);
  const apis = metadataApis(client);
  const stopDiscovery = new AbortController();
  let kinds: KindSet | undefined;
  try {
    if (!(await discovery.load(intake))) {
      log.info('stopped before discovery completed');
      return 0;
    }
    const first = options.command === 'prune'
      ? pruneConfig(config, { allKinds: options.allKinds, namespaces: options.namespaces ?? [] }, discovery, log)
      : config;
    mustServeSome(first, discovery);
    const election = options.leaderElection;
    const elector = election && new LeaderElector(
      new LeaseLock(new LeaseApi(client), election.namespace, election.name),
      { ...election, log, onLeadingChange: metrics.leader(election.name) },
    );
    const manager = new Manager<LabelledObject>({
      once: options.once,
      elector,
      gracePeriodMs: options.gracePeriodMs,
      log,
    }, shutdown);
    // Before the first write: refuse to fight a labeller of another config under this field manager.
    const guard = options.dryRun || options.command !== 'label' ? undefined : guardFor(client, options, log);
    const counts = noCounts();
    // What the kinds of the every-kind entry need: status lists, --once and prune list and patch.
    const verbs = ['list', ...(options.once ? [] : ['watch']), ...(options.command === 'status' ? [] : ['patch'])];
    kinds = new KindSet({
      manager,
      discovery,
      wiring: { apis, options, log, counts, metrics, events },
      guard,
      access: (resource, namespaces, signal) => deniedAccess(client, resource, namespaces, verbs, signal),
      log,
    });
    const kindSet = kinds;
    metrics.relatedUnreadable(() => kindSet.relations?.unreadable.list() ?? []);
    metrics.kindsSkipped(() => kindSet.skipped);
    metrics.sources(() => kindSet.sources.states());
    try {
      await kinds.apply(first, intake);
    } catch (error) {
      // A signal during the guard's check: nothing was written, nothing to report.
      if (!intake.aborted) throw error;
      log.info('stopped before the first write');
      return 0;
    }
    // Ready no sooner than the controllers are wired (after the guard's check), so a probe cannot
    // see an empty list of controllers as ready.
    wired = { manager, kinds };
    const follow = options.once ? undefined : options.configSource;
    log.info('starting', {
      kinds: kinds.kinds.map((kind) => kind.resolved.kind.resource),
      dryRun: options.dryRun || undefined,
      once: options.once || undefined,
      reload: follow ? follow.path : undefined,
    });

    if (options.command === 'status') return await runStatus(kinds, options, intake, log);
    if (options.once) {
      return await manager.once(() =>
        runOnce(
          kinds!.kinds.map((kind) => kind.controller),
          counts,
          { dryRun: options.dryRun, unknownKinds: kinds!.unknown.length },
          intake,
          log,
        )
      );
    }
    let taken: FieldManagerTaken | undefined;
    if (guard) {
      // Held while this process may write, and until everything has drained, so other labellers see it.
      manager.whileLeading((writes) =>
        guard.hold(writes, (error) => {
          taken = error;
          shutdown.stop('field manager taken');
        })
      );
    }
    const refreshing = discovery.run(stopDiscovery.signal);
    const following = follow &&
      followConfig(follow, { apply: (next, signal) => kindSet.apply(next, signal), metrics, events, log }, intake);
    const status = await manager.run();
    await following;
    stopDiscovery.abort();
    await refreshing;
    log.info('stopped', counts);
    // Another config started at the same moment and holds the field manager since before: exit 2.
    if (taken) throw taken;
    return status;
  } finally {
    stopDiscovery.abort();
    await kinds?.release();
    stopEvents.abort();
    await recording;
    await events?.drain();
    for (const server of servers) server.close();
    unsubscribe();
  }
}

/**
 * Throws KindError when no configured kind is served (and no group failed discovery, which may
 * serve one). An every-kind entry waits for what comes.
 */
function mustServeSome(config: Config, discovery: DiscoveryCache): void {
  const { resolved, unknown } = resolveKinds(config.kinds, discovery);
  if (resolved.length > 0 || config.everyKind || discovery.discovery.failedGroups.length > 0) return;
  throw new KindError(
    unknown.length === 1
      ? unknown[0]!.error.message
      : `none of the configured kinds is served by the API server: ${unknown.map((u) => u.kind.resource).join(', ')}`,
  );
}

/** One server per distinct address: probes and metrics share one when their addresses are the same. */
function serversFor(
  options: Pick<AppOptions, 'metricsBindAddress' | 'healthProbeBindAddress'>,
  all: Required<Endpoints>,
): [BindAddress, Endpoints][] {
  const { metricsBindAddress: metrics, healthProbeBindAddress: probes } = options;
  if (metrics && probes && formatAddress(metrics) === formatAddress(probes)) return [[probes, all]];
  return [
    ...(probes ? [[probes, { readiness: all.readiness }] as [BindAddress, Endpoints]] : []),
    ...(metrics ? [[metrics, { registry: all.registry }] as [BindAddress, Endpoints]] : []),
  ];
}
