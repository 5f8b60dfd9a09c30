// `labeller --once` (and `prune`, which is --once over a config that wants nothing): every object
// of every kind listed and reconciled once, while leading when there is leader election;
// progress on a terminal, one summary line on stdout, and an ending that says whether anything
// failed.
import type { Config } from '../config/model.ts';
import type { LabelledObject } from '../labelling/object.ts';
import type { OutcomeCounts } from '../labelling/reconcile.ts';
import type { Controller } from '../runtime/controller.ts';
import type { Logger } from '../util/log.ts';
import type { Ending, Host, StartOptions } from './host.ts';
import { checkRights, type PreflightSettings } from './preflight.ts';

/** How `runOnce` runs, besides the config. */
export interface OnceOptions {
  /** Checks the field manager is free for this config before the first write; the sources' memory refuses an outage that began before. */
  readonly writer?: Pick<StartOptions, 'claim' | 'sourceMemory'>;
  /**
   * A dry run's preflight: the rights the controller would need are asked about after the run:
   * `missing rights` when one is missing, each logged with the RBAC that grants it.
   */
  readonly preflight?: PreflightSettings;
  /** Work done first, once this process may write (leading, if elected), before any object is reconciled; false: it failed. */
  readonly first?: () => Promise<boolean>;
}

/** `incomplete` if anything failed, could not be listed, or was cut short by a signal. */
export async function runOnce(host: Host, config: Config, options: OnceOptions = {}): Promise<Ending> {
  const { writer = {}, preflight, first } = options;
  const started = await host.start(config, { verbs: ['list', 'patch'], ...writer });
  if (!started) return 'stopped';
  const { manager, kinds } = started;
  const ending = await manager.once(async () => {
    const firstDone = first ? await first() : true;
    const reconciled = await reconcileAll(
      kinds.kinds.map((kind) => kind.controller),
      host.counts,
      { dryRun: host.options.dryRun, unknownKinds: kinds.unknown.length },
      host.shutdown.intake,
      host.log,
    );
    return firstDone ? reconciled : 'incomplete';
  });
  if (ending === 'not leading') return 'incomplete';
  if (!preflight || host.shutdown.intake.aborted) return ending;
  const rights = await checkRights(host, started, config, preflight);
  const { log } = host;
  if (rights.error !== undefined) log.warn('permissions not checked', { error: rights.error });
  else if (rights.missing.length === 0) {
    log.info('permissions: all granted', { user: rights.user, rights: rights.asked });
  } else {
    for (const need of rights.missing) log.warn('labeller may not do what it needs', { user: rights.user, ...need });
    log.warn('grant the missing rights with this RBAC (kubectl apply -f -)', { rbac: rights.rbac });
    return 'missing rights';
  }
  return ending;
}

interface OnceReport {
  readonly dryRun: boolean;
  /** Configured kinds the API server does not serve; they count as failures. */
  readonly unknownKinds: number;
}

async function reconcileAll(
  controllers: readonly Controller<LabelledObject>[],
  counts: OutcomeCounts,
  report: OnceReport,
  signal: AbortSignal,
  log: Logger,
): Promise<Ending> {
  const seen = () => Object.values(counts).reduce((a, b) => a + b, 0);
  const failed = () => counts.failed + counts.invalid;
  const patched = report.dryRun ? 'would patch' : 'patched';
  // On a terminal, one line that keeps count; logs and pipes get just the summary.
  const progress = process.stderr.isTTY
    ? setInterval(() => {
      const total = controllers.reduce((n, c) => n + c.size, 0);
      process.stderr.write(
        `\r\x1b[2K${seen()}/${total} objects: ${counts.patched} ${
          report.dryRun ? 'to patch' : 'patched'
        }, ${failed()} failed`,
      );
    }, 250)
    : undefined;
  let unlisted = 0;
  await Promise.all(
    controllers.map((c) =>
      c.runOnce(signal).catch((error: unknown) => {
        unlisted++;
        log.error('cannot list; kind skipped', { controller: c.name, error });
      })
    ),
  );
  if (progress) {
    clearInterval(progress);
    process.stderr.write('\r\x1b[2K');
  }
  const notes = [
    `${controllers.length} controller${controllers.length === 1 ? '' : 's'}`,
    ...(unlisted ? [`${unlisted} could not list`] : []),
    ...(counts.changed ? [`${counts.changed} changed while it ran: run it again`] : []),
    ...(report.unknownKinds ? [`${report.unknownKinds} unknown kind${report.unknownKinds === 1 ? '' : 's'}`] : []),
  ];
  process.stdout.write(
    `${
      report.dryRun ? 'dry run: ' : ''
    }seen ${seen()}, ${patched} ${counts.patched}, unchanged ${counts.unchanged}, conflicts ${counts.conflict}, failed ${failed()} (${
      notes.join(', ')
    })\n`,
  );
  return failed() + unlisted + report.unknownKinds + counts.changed > 0 || signal.aborted ? 'incomplete' : 'done';
}
