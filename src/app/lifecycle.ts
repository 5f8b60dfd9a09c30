// The controller mode's lifecycle: wait for leadership (when elected), run every controller and
// the kinds served later until shutdown, drain running work within the grace period while still
// renewing the lease, then give the lease up. Losing leadership stops new work and aborts the
// writes in flight at once (the elector's deadline), then shuts down with status 1.
import type { KubeClient } from '../kube/client.ts';
import { LeaseApi, LeaseLock } from '../kube/lease.ts';
import type { ApiResource } from '../kube/resource.ts';
import type { KindConfig } from '../labeller/config.ts';
import type { LabelledObject } from '../labeller/object.ts';
import type { Logger } from '../util/log.ts';
import type { Controller } from '../runtime/controller.ts';
import { type LeaderElectionOptions, LeaderElector, LeadershipLost } from '../runtime/leader.ts';
import type { Shutdown } from '../runtime/shutdown.ts';
import { startWhenServed } from './kinds.ts';

/** Leader election through the Lease `namespace/name`. */
export type LeaderElectionConfig = Omit<LeaderElectionOptions, 'log'> & {
  readonly namespace: string;
  readonly name: string;
};

export interface Lifecycle {
  readonly client: KubeClient;
  readonly shutdown: Shutdown;
  readonly gracePeriodMs: number;
  /** Set when several replicas elect a leader through a Lease. */
  readonly leaderElection?: LeaderElectionConfig | undefined;
  /** Builds the controllers of a kind that became served after start. */
  readonly controllersFor: (kind: KindConfig, resource: ApiResource) => Controller<LabelledObject>[];
  /** Controllers started and stopped while running (a live config reload), through `run`; resolves once they have stopped. */
  readonly alsoRun?: ((run: RunController) => Promise<void>) | undefined;
  readonly log: Logger;
}

/** Runs a controller under the lifecycle (leadership, shutdown) until shutdown or `stop` aborts. */
export type RunController = (controller: Controller<LabelledObject>, stop?: AbortSignal) => Promise<void>;

export async function runUntilStopped(
  controllers: readonly Controller<LabelledObject>[],
  later: readonly KindConfig[],
  lifecycle: Lifecycle,
): Promise<number> {
  const { client, shutdown, log } = lifecycle;
  let status = 0;
  const election = lifecycle.leaderElection;
  const elector = election &&
    new LeaderElector(new LeaseLock(new LeaseApi(client), election.namespace, election.name), { ...election, log });
  elector?.leadership.addEventListener('abort', () => {
    if (!(elector.leadership.reason instanceof LeadershipLost)) return;
    // Lost while draining after a signal (a renewal late on a busy node): the writes stopped with
    // the lease, and the process was stopping anyway, so the stop stays a clean one.
    if (shutdown.intake.aborted) return;
    // Another process may be writing now: stop, as controller-runtime does.
    status = 1;
    shutdown.stop('leadership lost');
  });
  const leading = elector ? elector.acquire(shutdown.intake) : Promise.resolve();
  const run: RunController = (controller, stop) =>
    controller.run(stop ? AbortSignal.any([shutdown.intake, stop]) : shutdown.intake, leading, elector?.leadership);
  const running = Promise.all([
    ...controllers.map((c) => run(c)),
    startWhenServed(
      later,
      client,
      log,
      shutdown.intake,
      (kind, resource) => Promise.all(lifecycle.controllersFor(kind, resource).map((c) => run(c))).then(() => {}),
    ),
    lifecycle.alsoRun?.(run),
  ]).catch((error: unknown) => {
    // A bug, not an API failure (those are retried inside): stop everything rather than run half-blind.
    status = 1;
    log.error('controller crashed; shutting down', { error: error instanceof Error ? error.stack : String(error) });
    shutdown.stop('crash');
  });
  if (!(await shutdown.drain(running, lifecycle.gracePeriodMs))) {
    // As controller-runtime does: work cut short is a failed shutdown.
    log.error('grace period over with patches still running; exiting', { gracePeriodMs: lifecycle.gracePeriodMs });
    return 1;
  }
  await elector?.release();
  return status;
}
