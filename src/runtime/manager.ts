// The manager (controller-runtime's manager and its runnable groups): it owns the informer cache
// every controller and lookup reads, the controllers running now (added and removed while it
// runs), leader election, the tasks that run only while leading, readiness and the drain. Under
// leader election a standby keeps its caches warm and reconciles nothing; losing leadership
// stops the writes at once and the run (`leadership lost`). On shutdown, intake stops, running
// reconciles and the leader tasks' rounds under way get the grace period to finish (a write
// aborted on its way could land after a successor started, so it would cost the lease's expiry),
// then the holds kept while writing end, and the lease is given up last.
import { aborted } from '../util/aborted.ts';
import type { Logger } from '../util/log.ts';
import type { Controller } from './controller.ts';
import type { Informer } from './informer.ts';
import { InformerCache } from './informercache.ts';
import { type LeaderElector, LeadershipLost } from './leader.ts';
import type { Shutdown } from './shutdown.ts';

export interface ManagerOptions {
  /** List every informer once instead of watching (`--once`, status, prune). */
  readonly once: boolean;
  /** Set when several replicas elect one writer. */
  readonly elector?: LeaderElector | undefined;
  readonly gracePeriodMs: number;
  readonly log: Logger;
}

/**
 * Why run() ended: `stopped` once shutdown was asked for (a signal, or a part that stopped the
 * process for its own reason) and everything drained; otherwise the failure that ended it.
 */
export type StopReason = 'stopped' | 'leadership lost' | 'controller crashed' | 'grace period over';

/**
 * Work done while this process may write. `stop` aborts when it should end (shutdown asked for,
 * or leadership ended): it finishes the round under way and returns. `writes` aborts when writes
 * on the wire must stop (leadership ended, or the grace period over); 'cut short' when that
 * aborted a write whose bytes may have left: the lease is then left to expire rather than
 * released, so no successor writes before that write can land.
 */
export type LeaderTask = (stop: AbortSignal, writes: AbortSignal) => Promise<void | 'cut short'>;

interface Running<T> {
  readonly controller: Controller<T>;
  readonly stop: AbortController;
  done?: Promise<void>;
}

export class Manager<T> {
  readonly informers: InformerCache<T>;
  readonly #options: ManagerOptions;
  readonly #shutdown: Shutdown;
  readonly #controllers = new Map<string, Running<T>>();
  /** Controllers removed and still finishing their reconciles. */
  readonly #stopping = new Set<Promise<void>>();
  readonly #tasks: LeaderTask[] = [];
  readonly #holds: ((writes: AbortSignal) => Promise<void>)[] = [];
  /** Set once run() has begun: controllers added from then on start at once. */
  #leading: Promise<unknown> | undefined;
  #failure: StopReason | undefined;

  constructor(options: ManagerOptions, shutdown: Shutdown) {
    this.#options = options;
    this.#shutdown = shutdown;
    const { log } = options;
    this.informers = new InformerCache<T>(
      (informer, signal) => (options.once ? listOnce(informer, signal, log) : informer.run(signal)),
      shutdown.intake,
    );
  }

  /** Whether informers list once instead of watching. */
  get listsOnce(): boolean {
    return this.#options.once;
  }

  get controllers(): Controller<T>[] {
    return [...this.#controllers.values()].map((running) => running.controller);
  }

  get(name: string): Controller<T> | undefined {
    return this.#controllers.get(name)?.controller;
  }

  /** Adds a controller, started at once when the manager runs; its name must be free. */
  add(controller: Controller<T>): void {
    if (this.#controllers.has(controller.name)) throw new Error(`controller ${controller.name} is running already`);
    const running: Running<T> = { controller, stop: new AbortController() };
    this.#controllers.set(controller.name, running);
    if (this.#leading) this.#start(running, this.#leading);
  }

  /** Stops a controller; resolves once its running reconciles have finished. */
  async remove(name: string): Promise<void> {
    const running = this.#controllers.get(name);
    if (!running) return;
    this.#controllers.delete(name);
    running.stop.abort();
    if (!running.done) return;
    const done = running.done;
    this.#stopping.add(done);
    await done;
    this.#stopping.delete(done);
  }

  /** Runs `task` while this process may write, from leadership (at once without election); drained at shutdown as controllers are. */
  whileLeading(task: LeaderTask): void {
    this.#tasks.push(task);
  }

  /** Runs `hold` (a Lease others must see while this process writes) from leadership until every write has ended, when its signal aborts. */
  whileWriting(hold: (writes: AbortSignal) => Promise<void>): void {
    this.#holds.push(hold);
  }

  /** Why the process is not ready: every controller's caches that have not listed, or whose watch is down. */
  problems(): string[] {
    return this.controllers.flatMap((controller) => controller.problems());
  }

  /** Runs until shutdown; answers why it stopped. */
  async run(): Promise<StopReason> {
    const { elector, log, gracePeriodMs } = this.#options;
    const { intake } = this.#shutdown;
    elector?.leadership.addEventListener('abort', () => {
      if (!(elector.leadership.reason instanceof LeadershipLost)) return;
      // Lost while draining after a signal (a renewal late on a busy node): the writes stopped with
      // the lease, and the process was stopping anyway, so the stop stays a clean one.
      if (intake.aborted) return;
      // Another process may be writing now: stop, as controller-runtime does.
      this.#failure ??= 'leadership lost';
      this.#shutdown.stop('leadership lost');
    });
    const leading = elector ? elector.acquire(intake) : Promise.resolve(true);
    this.#leading = leading;
    for (const running of this.#controllers.values()) this.#start(running, leading);
    const writesEnd = new AbortController();
    const writes = elector ? AbortSignal.any([elector.leadership, writesEnd.signal]) : writesEnd.signal;
    const stop = AbortSignal.any([intake, writes]);
    const tasks = Promise.all(this.#tasks.map(async (task) => (await leading) ? task(stop, writes) : undefined));
    const holds = Promise.all(this.#holds.map(async (hold) => (await leading) ? hold(writes) : undefined));
    const drained = (async () => {
      await aborted(intake);
      // Controllers a reload is stopping are awaited too.
      await Promise.all([
        ...[...this.#controllers.values()].map((running) => running.done),
        ...this.#stopping,
        tasks,
      ]);
      await this.informers.stopped();
    })();
    const clean = await this.#shutdown.drain(drained, gracePeriodMs);
    writesEnd.abort();
    const cut = (await tasks).includes('cut short');
    await holds;
    if (!clean) {
      // As controller-runtime does: work cut short is a failed shutdown.
      log.error('grace period over with patches still running; exiting', { gracePeriodMs });
      return 'grace period over';
    }
    await elector?.release(cut);
    return this.#failure ?? 'stopped';
  }

  /** Runs one-off `work` (`--once`, prune) while leading; answers its result, or `not leading` when leadership was lost or a signal came first. */
  async once<R>(work: () => Promise<R>): Promise<R | 'not leading'> {
    const { elector } = this.#options;
    if (!elector) return work();
    let lost = false;
    elector.leadership.addEventListener('abort', () => {
      if (!(elector.leadership.reason instanceof LeadershipLost)) return;
      lost = true;
      this.#shutdown.stop('leadership lost');
    });
    if (!(await elector.acquire(this.#shutdown.intake))) return 'not leading';
    try {
      const result = await work();
      return lost ? 'not leading' : result;
    } finally {
      await elector.release();
    }
  }

  #start(running: Running<T>, leading: Promise<unknown>): void {
    const { intake } = this.#shutdown;
    const { elector, log } = this.#options;
    running.done = running.controller.run(AbortSignal.any([intake, running.stop.signal]), leading, elector?.leadership)
      .catch((error: unknown) => {
        // A bug, not an API failure (those are retried inside): stop everything rather than run half-blind.
        this.#failure ??= 'controller crashed';
        log.error('controller crashed; shutting down', {
          controller: running.controller.name,
          error: error instanceof Error ? error.stack : String(error),
        });
        this.#shutdown.stop('crash');
      });
  }
}

/** Lists once; a failure is logged here and rejects the informer's `synced` for its readers. */
async function listOnce<T>(informer: Informer<T>, signal: AbortSignal, log: Logger): Promise<void> {
  try {
    await informer.listOnce(signal);
  } catch (error) {
    if (!signal.aborted) log.error('cannot list', { controller: informer.name, error });
  }
}
