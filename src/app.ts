// The composition root: config → discovery → one controller per kind (and namespace), each a
// metadata-only watcher feeding a store and a work queue whose workers run the label reconciler,
// all under one shutdown coordinator.
import { MetadataApi } from './kube/api.ts';
import type { KubeClient } from './kube/client.ts';
import { discover, type Discovery } from './kube/discovery.ts';
import { ConnectionError } from './kube/errors.ts';
import { resolveResource, ResolveError } from './kube/resolve.ts';
import { apiVersion, groupResource, type ApiResource } from './kube/resource.ts';
import type { Config, KindConfig } from './labeller/config.ts';
import { projector, type LabelledObject } from './labeller/object.ts';
import { Reconciler, type Outcome } from './labeller/reconcile.ts';
import { labelClient } from './labelclient.ts';
import type { Logger } from './log.ts';
import type { Options } from './options.ts';
import { boundPort, serveHttp } from './http.ts';
import { Metrics } from './metrics.ts';
import { Backoff } from './runtime/backoff.ts';
import { Controller } from './runtime/controller.ts';
import { LeaderElector, type LeaderElectionOptions } from './runtime/leader.ts';
import { Shutdown } from './runtime/shutdown.ts';
import { sleep } from './runtime/sleep.ts';

/** What the app takes of the command-line options, plus what the entry point works out. */
export type AppOptions = Pick<Options, 'fieldManager' | 'concurrency' | 'requeueAfterMs' | 'gracePeriodMs' | 'dryRun' | 'once' | 'watchTimeoutSeconds' | 'httpPort'> & {
  /** The entry point's provisional signal handler, which the shutdown coordinator replaces. */
  readonly earlySignalHandler?: ((signal: NodeJS.Signals) => void) | undefined;
  /** Set when several replicas elect a leader through a Lease. */
  readonly leaderElection?: Omit<LeaderElectionOptions, 'log' | 'onLeadingChange'> | undefined;
};

/** The config cannot work against this cluster (ambiguous kind, missing verb, nothing to watch): exit status 2. */
export class KindError extends Error {
  override readonly name = 'KindError';
}

export type Counts = Record<Outcome | 'failed', number>;

/** Runs until a signal (or, with `once`, until every object was seen once). Returns the exit status. */
export async function runApp(client: KubeClient, config: Config, options: AppOptions, log: Logger): Promise<number> {
  const shutdown = new Shutdown({
    graceMs: options.gracePeriodMs,
    onSignal: (signal, first) =>
      first
        ? log.info('shutting down: stopping watches, letting running patches finish', { signal, gracePeriodMs: options.gracePeriodMs })
        : log.warn('second signal: exiting now', { signal }),
    replaces: options.earlySignalHandler,
  });
  // The first line, once signals drain cleanly: whoever waits for labeller to start may signal from here on.
  log.info('connecting to the API server', { server: client.server, kinds: config.kinds.map((kind) => kind.resource) });
  const metrics = new Metrics();
  client.observe(metrics.restClient(new URL(client.server).host));
  // Up before discovery, so probes see "not ready" rather than a refused connection.
  const all: Controller<LabelledObject>[] = [];
  let discovered = false;
  const server = options.httpPort > 0 && !options.once
    ? await serveHttp(options.httpPort, { problems: () => (discovered ? all.flatMap(readinessProblem) : ['waiting for API discovery']) }, metrics.registry)
    : undefined;
  if (server) log.info('serving /healthz, /readyz and /metrics', { port: boundPort(server) });
  try {
    const discovery = await discoverWithRetry(client, log, shutdown.intake).catch((error: unknown) => {
      if (shutdown.intake.aborted) return undefined;
      throw error;
    });
    if (!discovery) {
      log.info('stopped before discovery completed');
      return 0;
    }
    discovered = true;
    for (const { groupVersion, error } of discovery.failedGroups) log.warn('API group unavailable; kinds it serves are looked for again later', { groupVersion, error });
    const { resolved, unknown } = resolveKinds(config.kinds, discovery.resources);
    // A kind may belong to a group that failed discovery: it is retried with the unknown kinds.
    if (resolved.length === 0 && discovery.failedGroups.length === 0) {
      throw new KindError(unknown.length === 1 ? unknown[0]!.error.message : `none of the configured kinds is served by the API server: ${unknown.map((u) => u.kind.resource).join(', ')}`);
    }
    for (const { kind, error } of unknown) log.error(error.message, { kind: kind.resource });

    const counts: Counts = { unchanged: 0, patched: 0, conflict: 0, invalid: 0, gone: 0, failed: 0 };
    const controllers = resolved.flatMap(({ kind, resource }) => controllersFor(client, kind, resource, options, log, counts, metrics));
    log.info('starting', { controllers: controllers.map((c) => c.name), dryRun: options.dryRun || undefined, once: options.once || undefined });

    if (options.once) return await converge(controllers, counts, unknown.length, options, shutdown, log);
    all.push(...controllers);
    return await runUntilStopped(controllers, unknown, { client, options, counts, metrics, shutdown, log, all });
  } finally {
    server?.close();
    shutdown.dispose();
  }
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

/** --once: every object reconciled once, a summary on stdout; 1 if anything failed. */
async function converge(controllers: readonly Controller<LabelledObject>[], counts: Counts, unknownKinds: number, options: AppOptions, shutdown: Shutdown, log: Logger): Promise<number> {
  const seen = () => Object.values(counts).reduce((a, b) => a + b, 0);
  const failed = () => counts.failed + counts.invalid;
  // On a terminal, one line that keeps count; logs and pipes get just the summary.
  const progress = process.stderr.isTTY
    ? setInterval(() => {
        const total = controllers.reduce((n, c) => n + c.store.size, 0);
        process.stderr.write(`\r\x1b[2K${seen()}/${total} objects: ${counts.patched} ${options.dryRun ? 'to patch' : 'patched'}, ${failed()} failed`);
      }, 250)
    : undefined;
  let unlisted = 0;
  await Promise.all(
    controllers.map((c) =>
      c.runOnce(shutdown.intake).catch((error: unknown) => {
        unlisted++;
        log.error('cannot list; kind skipped', { controller: c.name, error });
      }),
    ),
  );
  if (progress) {
    clearInterval(progress);
    process.stderr.write('\r\x1b[2K');
  }
  const notes = [
    `${controllers.length} controller${controllers.length === 1 ? '' : 's'}`,
    ...(unlisted ? [`${unlisted} could not list`] : []),
    ...(unknownKinds ? [`${unknownKinds} unknown kind${unknownKinds === 1 ? '' : 's'}`] : []),
  ];
  process.stdout.write(
    `${options.dryRun ? 'dry run: ' : ''}seen ${seen()}, ${options.dryRun ? 'would patch' : 'patched'} ${counts.patched}, unchanged ${counts.unchanged}, conflicts ${counts.conflict}, failed ${failed()} (${notes.join(', ')})\n`,
  );
  return failed() + unlisted + unknownKinds > 0 || shutdown.intake.aborted ? 1 : 0;
}

interface Running {
  readonly client: KubeClient;
  readonly options: AppOptions;
  readonly counts: Counts;
  readonly metrics: Metrics;
  readonly shutdown: Shutdown;
  readonly log: Logger;
  /** Every started controller, for readiness; kinds served later are added. */
  readonly all: Controller<LabelledObject>[];
}

/** The controller mode: watch and reconcile (as the leader, with leader election) until a signal. */
async function runUntilStopped(controllers: readonly Controller<LabelledObject>[], unknown: readonly { kind: KindConfig }[], ctx: Running): Promise<number> {
  const { client, options, counts, metrics, shutdown, log } = ctx;
  let status = 0;
  const elector = options.leaderElection
    ? new LeaderElector(client, { ...options.leaderElection, log, onLeadingChange: metrics.leader(options.leaderElection.name) })
    : undefined;
  const leading = elector
    ? elector.acquire(shutdown.intake, () => {
        // Another process may be writing now: stop at once, as controller-runtime does.
        status = 1;
        shutdown.stop('leadership lost');
      })
    : Promise.resolve();
  const run = (controller: Controller<LabelledObject>): Promise<void> => controller.run(shutdown.intake, leading);
  const running = Promise.all([
    ...controllers.map(run),
    startWhenServed(unknown.map((u) => u.kind), client, log, shutdown.intake, (kind, resource) => {
      const added = controllersFor(client, kind, resource, options, log, counts, metrics);
      ctx.all.push(...added);
      return Promise.all(added.map(run)).then(() => {});
    }),
  ]).catch((error: unknown) => {
    // A bug, not an API failure (those are retried inside): stop everything rather than run half-blind.
    status = 1;
    log.error('controller crashed; shutting down', { error: error instanceof Error ? error.stack : String(error) });
    shutdown.stop('crash');
  });
  if (!(await shutdown.drain(running))) {
    // As controller-runtime does: work cut short is a failed shutdown.
    log.error('grace period over with patches still running; exiting', { gracePeriodMs: options.gracePeriodMs });
    return 1;
  }
  await elector?.release();
  log.info('stopped', counts);
  return status;
}

async function discoverWithRetry(client: KubeClient, log: Logger, signal: AbortSignal): Promise<Discovery> {
  const backoff = new Backoff({ initialMs: 500, maxMs: 4000 });
  for (let attempt = 1; ; attempt++) {
    try {
      return await discover(client, signal);
    } catch (error) {
      // An API server that is still starting (or restarting) gets a few seconds, not forever.
      if (!(error instanceof ConnectionError) || attempt === 4 || signal.aborted) throw error;
      const retryInMs = backoff.next();
      log.warn('API server unreachable; retrying discovery', { error, retryInMs });
      await sleep(retryInMs, signal);
    }
  }
}

/**
 * Kinds not served at start (a CRD not installed yet) are looked for again with growing
 * pauses; each is started once discovery serves it. Resolves when `signal` aborts and the
 * controllers it started have stopped.
 */
async function startWhenServed(kinds: readonly KindConfig[], client: KubeClient, log: Logger, signal: AbortSignal, start: (kind: KindConfig, resource: ApiResource) => Promise<void>): Promise<void> {
  const started: Promise<void>[] = [];
  let pending = kinds;
  for (let pauseMs = 5_000; pending.length > 0 && !signal.aborted; pauseMs = Math.min(pauseMs * 2, 300_000)) {
    await sleep(pauseMs, signal);
    const resources = (await discover(client, signal).catch(() => undefined))?.resources;
    if (!resources) continue;
    const { resolved, unknown } = resolveKinds(pending, resources);
    for (const { kind, resource } of resolved) {
      log.info('kind is served now; watching it', { kind: resource.kind, resource: kind.resource });
      started.push(start(kind, resource));
    }
    pending = unknown.map((u) => u.kind);
  }
  await Promise.all(started);
}

function resolveKinds(kinds: readonly KindConfig[], resources: readonly ApiResource[]) {
  const resolved: { kind: KindConfig; resource: ApiResource }[] = [];
  const unknown: { kind: KindConfig; error: ResolveError }[] = [];
  for (const kind of kinds) {
    try {
      resolved.push({ kind, resource: resolveResource(kind.resource, resources) });
    } catch (error) {
      // A kind that is not served (yet) is reported and the others run; a kind that is
      // ambiguous or lacks a verb is a mistake in the config.
      if (error instanceof ResolveError && error.reason === 'unknown') unknown.push({ kind, error });
      else throw error instanceof ResolveError ? new KindError(error.message) : error;
    }
  }
  return { resolved, unknown };
}

/** The namespaces a kind is watched in: its own, or all ('') when none are set or it is cluster-scoped. */
export function watchedNamespaces(kind: KindConfig, resource: ApiResource): readonly string[] {
  return resource.namespaced && kind.namespaces.length > 0 ? kind.namespaces : [''];
}

/** What labelling one kind in one namespace takes: its metadata API, the cache projection and the reconciler. */
export function labellingFor(client: KubeClient, kind: KindConfig, resource: ApiResource, namespace: string, options: Pick<AppOptions, 'fieldManager' | 'dryRun'>, log: Logger) {
  const api = new MetadataApi(client, resource, namespace);
  const annotations = new Set([...kind.labels.values()].flatMap((t) => t.annotations));
  const reconciler = new Reconciler({
    kind: { apiVersion: apiVersion(resource), kind: resource.kind, resource: resource.resource, group: resource.group },
    labels: kind.labels,
    conflicts: kind.conflicts,
    dryRun: options.dryRun,
    client: labelClient(api, options.fieldManager),
    log,
  });
  return { api, project: projector(options.fieldManager, annotations), reconciler };
}

/** The controllers of one configured kind: one per namespace, or one for all namespaces. */
export function controllersFor(
  client: KubeClient,
  kind: KindConfig,
  resource: ApiResource,
  options: Pick<AppOptions, 'fieldManager' | 'concurrency' | 'requeueAfterMs' | 'dryRun' | 'once' | 'watchTimeoutSeconds'>,
  log: Logger,
  counts: Counts,
  metrics?: Metrics,
): Controller<LabelledObject>[] {
  const name = groupResource(resource);
  return watchedNamespaces(kind, resource).map((namespace) => {
    const controller = namespace ? `${name}/${namespace}` : name;
    const kindLog = log.child({ kind: resource.kind });
    const labelMetrics = metrics?.labels(controller);
    const { api, project, reconciler } = labellingFor(client, kind, resource, namespace, options, kindLog);
    return new Controller({
      name: controller,
      api,
      project,
      reconcile: async (object) => {
        try {
          const { outcome, patch } = await reconciler.reconcile(object);
          counts[outcome]++;
          if (outcome === 'conflict') labelMetrics?.conflict();
          if (!options.dryRun && patch.length > 0) {
            const removed = patch.filter((op) => op.op === 'remove').length;
            labelMetrics?.applied(patch.length - removed);
            labelMetrics?.removed(removed);
          }
        } catch (error) {
          counts.failed++;
          throw error;
        }
      },
      concurrency: options.concurrency,
      requeueAfterMs: options.once ? 0 : options.requeueAfterMs,
      watch: { labelSelector: kind.selector?.toString(), watchTimeoutSeconds: options.watchTimeoutSeconds },
      metrics: metrics?.controller(controller, options.concurrency),
      log: kindLog.child({ controller }),
    });
  });
}
