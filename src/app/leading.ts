// One-off work (`--once`, `prune`) under --leader-elect: it waits for the Lease, so it never
// writes while a labeller of the same Lease does. A prune run right after an uninstall thus
// starts only once the last labeller pod has let go (or its lease expired), and cannot race a
// terminating pod that would put the labels back. The lease is given up when the work is done.
import type { KubeClient } from '../kube/client.ts';
import { LeaseApi, LeaseLock } from '../kube/lease.ts';
import type { Logger } from '../util/log.ts';
import { LeaderElector, LeadershipLost } from '../runtime/leader.ts';
import type { Shutdown } from '../runtime/shutdown.ts';
import type { LeaderElectionConfig } from './lifecycle.ts';

/** Runs `work` while leading (at once without election); returns its exit status, 1 if leadership was lost or a signal came first. */
export async function whileLeading(
  client: KubeClient,
  election: LeaderElectionConfig | undefined,
  shutdown: Shutdown,
  log: Logger,
  work: () => Promise<number>,
): Promise<number> {
  if (!election) return work();
  const elector = new LeaderElector(new LeaseLock(new LeaseApi(client), election.namespace, election.name), {
    ...election,
    log,
  });
  let lost = false;
  elector.leadership.addEventListener('abort', () => {
    if (!(elector.leadership.reason instanceof LeadershipLost)) return;
    lost = true;
    shutdown.stop('leadership lost');
  });
  if (!(await elector.acquire(shutdown.intake))) return 1;
  try {
    const status = await work();
    return lost ? 1 : status;
  } finally {
    await elector.release();
  }
}
