// The composition root: config → discovery → one controller per kind (and namespace), each a
// metadata-only watcher feeding a store and a work queue whose workers run the label reconciler;
// then either `--once` or the controller mode, all under the entry point's shutdown coordinator.
import type { KubeClient } from '../kube/client.ts';
import type { ApiResource } from '../kube/resource.ts';
import type { Config, KindConfig } from '../labeller/config.ts';
import type { LabelledObject } from '../labeller/object.ts';
import type { Logger } from '../util/log.ts';
import { type BindAddress, type Endpoints, formatAddress, serveHttp } from '../metrics/server.ts';
import { Metrics } from '../metrics/metrics.ts';
import type { Controller } from '../runtime/controller.ts';
import type { Shutdown } from '../runtime/shutdown.ts';
import { type KindControllers, kindControllers, noCounts, type WiringOptions } from './controllers.ts';
import { type EventsIdentity, LabellerEvents } from './events.ts';
import { guardFor, type GuardOptions } from './guard.ts';
import { resolveConfiguredKinds } from './kinds.ts';
import { type LeaderElectionConfig, runUntilStopped } from './lifecycle.ts';
import { whileLeading } from './leading.ts';
import { runOnce } from './once.ts';
import { Relations } from './relations.ts';
import { pruneTargets } from './prune.ts';
import { type ConfigSource, runReloading } from './reload.ts';
import { runStatus } from './status.ts';

/** What the app takes of the command-line options, plus what the entry point works out. */
export type AppOptions =
  & WiringOptions
  & {
    readonly command: 'label' | 'status' | 'prune';
    readonly allKinds: boolean;
    readonly output: 'table' | 'json';
    readonly namespaces: readonly string[] | undefined;
    readonly gracePeriodMs: number;
    readonly metricsBindAddress: BindAddress | undefined;
    readonly healthProbeBindAddress: BindAddress | undefined;
    /** Set when several replicas elect a leader through a Lease. */
    readonly leaderElection?: Omit<LeaderElectionConfig, 'onLeadingChange'> | undefined;
    /** Set when Kubernetes Events are written. */
    readonly events?: EventsIdentity | undefined;
    /** The field-manager guard (off with --dry-run, which writes nothing). */
    readonly guard: Omit<GuardOptions, 'log'> & { readonly identity: string };
    /** The config file, when there is one: its changes are applied live in controller mode. */
    readonly configSource?: ConfigSource | undefined;
  };

/** Runs until a signal (or, with `once`, until every object was seen once). Returns the exit status. */
export async function runApp(
  client: KubeClient,
  config: Config,
  options: AppOptions,
  shutdown: Shutdown,
  log: Logger,
): Promise<number> {
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
  log.info('connecting to the API server', { server: client.server, kinds: config.kinds.map((kind) => kind.resource) });
  const metrics = new Metrics();
  client.observe(metrics.restClient(new URL(client.server).host));
  // Events go out in the background and never hold up a reconcile; pending ones get a moment at exit.
  const events = options.events && new LabellerEvents(client, options.events, log);
  const stopEvents = new AbortController();
  const recording = events?.run(stopEvents.signal);
  // Up before discovery, so probes see "not ready" rather than a refused connection.
  const all: Controller<LabelledObject>[] = [];
  /** The related caches' readiness problems, once the controllers are wired. */
  let relatedProblems: (() => string[]) | undefined;
  const readiness = {
    problems: () =>
      relatedProblems ? [...all.flatMap(readinessProblem), ...relatedProblems()] : ['waiting for API discovery'],
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
  try {
    const kinds = options.command === 'prune'
      ? await pruneTargets(
        client,
        config.kinds,
        { allKinds: options.allKinds, namespaces: options.namespaces ?? [] },
        log,
        shutdown.intake,
      )
      : await resolveConfiguredKinds(client, config.kinds, log, shutdown.intake);
    if (!kinds) {
      log.info('stopped before discovery completed');
      return 0;
    }
    if (options.command === 'status') return await runStatus(client, kinds, options, shutdown.intake, log);
    // Before the first write: refuse to fight a labeller of another config under this field manager.
    const guard = options.dryRun ? undefined : guardFor(client, config, kinds, options, log);
    await guard?.check(shutdown.intake);
    // The kinds wired, not the config's: prune's render no label and read no related object.
    const wiredKinds = [...kinds.resolved, ...kinds.unknown].map(({ kind }) => kind);
    // Made again, the old ones stopped, when a reloaded config needs more than they keep.
    let relating = new AbortController();
    const relationsFor = (forKinds: readonly KindConfig[]): Relations =>
      new Relations(client, forKinds, kinds.resources, {
        fieldManager: options.fieldManager,
        once: options.once,
        watchTimeoutSeconds: options.watchTimeoutSeconds,
        signal: AbortSignal.any([shutdown.intake, relating.signal]),
        events,
      }, log);
    let related = relationsFor(wiredKinds);
    const relate = (next: readonly KindConfig[]): string[] => {
      const lacked = related.lacks(next);
      if (lacked.length === 0) return lacked;
      relating.abort();
      relating = new AbortController();
      related = relationsFor(next);
      return lacked;
    };
    const counts = noCounts();
    const wireKind = (kind: KindConfig, resource: ApiResource): KindControllers => {
      const wired = kindControllers(kind, resource, {
        client,
        options,
        log,
        counts,
        metrics,
        events,
        relations: related,
      });
      all.push(...wired.controllers);
      return wired;
    };
    const unwire = (wired: KindControllers): void => {
      for (const controller of wired.controllers) {
        const index = all.indexOf(controller);
        if (index >= 0) all.splice(index, 1);
        // A restarted kind's new controllers carry the same name.
        if (!all.some((c) => c.name === controller.name)) metrics.forget(controller.name);
      }
    };
    const wire = (kind: KindConfig, resource: ApiResource) => wireKind(kind, resource).controllers;
    // The config file's changes are applied live in controller mode: the reload then runs every kind.
    const reload = options.once ? undefined : options.configSource;
    const controllers = reload ? [] : kinds.resolved.flatMap(({ kind, resource }) => wire(kind, resource));
    log.info('starting', {
      kinds: kinds.resolved.map(({ kind }) => kind.resource),
      dryRun: options.dryRun || undefined,
      once: options.once || undefined,
      reload: reload ? reload.path : undefined,
    });

    // Ready no sooner than the controllers are wired (after the guard's check), so a probe cannot
    // see an empty list of controllers as ready.
    relatedProblems = () => related.problems();
    const leaderElection = options.leaderElection &&
      { ...options.leaderElection, onLeadingChange: metrics.leader(options.leaderElection.name) };
    if (options.once) {
      return await whileLeading(
        client,
        leaderElection,
        shutdown,
        log,
        () =>
          runOnce(
            controllers,
            counts,
            { dryRun: options.dryRun, unknownKinds: kinds.unknown.length },
            shutdown.intake,
            log,
          ),
      );
    }
    // Held until everything has drained, so other labellers see this one while it may write.
    const holding = new AbortController();
    const held = guard?.hold(holding.signal);
    try {
      const status = await runUntilStopped(controllers, reload ? [] : kinds.unknown.map((u) => u.kind), {
        client,
        shutdown,
        gracePeriodMs: options.gracePeriodMs,
        leaderElection,
        controllersFor: wire,
        log,
        alsoRun: reload &&
          ((run) =>
            runReloading(
              reload,
              config,
              kinds,
              { client, log, metrics, events, wire: wireKind, unwire, relate },
              run,
              shutdown.intake,
            )),
      });
      log.info('stopped', counts);
      return status;
    } finally {
      holding.abort();
      await held;
    }
  } finally {
    stopEvents.abort();
    await recording;
    await events?.drain();
    for (const server of servers) server.close();
    unsubscribe();
  }
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

/**
 * Why a controller keeps the process from being ready: no first list yet, or a watch that is
 * down (the API server away, permissions revoked) until it lists or opens again.
 */
function readinessProblem(controller: Controller<LabelledObject>): string[] {
  const failure = controller.watchFailure ? `: ${controller.watchFailure.message}` : '';
  if (!controller.store.synced) return [`${controller.name}: waiting for the first list${failure}`];
  return failure ? [`${controller.name}: watch down${failure}`] : [];
}
