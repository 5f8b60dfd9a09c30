// One-off work (`--once`, `prune`) under --leader-elect: it waits for the Lease, so it never
// writes while a labeller of the same Lease does. A prune run right after an uninstall thus
// starts only once the last labeller pod has let go (or its lease expired), and cannot race a
// terminating pod that would put the labels back. The lease is given up when the work is done.
import type { KubeClient } from '../kube/client.ts';
import type { Logger } from '../log.ts';
import { LeaderElector, type LeaderElectionOptions } from '../runtime/leader.ts';
import type { Shutdown } from '../runtime/shutdown.ts';

/** Runs `work` while leading (at once without election); returns its exit status, 1 if leadership was lost or a signal came first. */
export async function whileLeading(client: KubeClient, election: Omit<LeaderElectionOptions, 'log'> | undefined, shutdown: Shutdown, log: Logger, work: () => Promise<number>): Promise<number> {
  if (!election) return work();
  const done = new AbortController();
  const signal = AbortSignal.any([shutdown.intake, done.signal]);
  const elector = new LeaderElector(client, { ...election, log });
  let lost = false;
  const leading = elector.acquire(signal, () => {
    lost = true;
    shutdown.stop('leadership lost');
  });
  await Promise.race([leading, new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }))]);
  if (!elector.leading) return 1;
  try {
    const status = await work();
    return lost ? 1 : status;
  } finally {
    done.abort();
    await elector.release();
  }
}
