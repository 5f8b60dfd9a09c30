// Waiting for labeller to converge without loading the API server that is being measured.
import type { MetadataApi } from '../../src/kube/api.ts';
import type { Labeller } from '../../test/process/labeller.ts';
import { sleep } from '../../test/process/sleep.ts';

/**
 * What converged() follows: labeller (the writes its `objects written` lines sum up), or another controller
 * whose successful PATCHes the audit log counts (bench/lib/outside.ts).
 */
export type Converging = Pick<Labeller, 'assertRunning' | 'stderr'> & { readonly counts: { readonly applied: number } };

/**
 * Resolves when no object of `apis` matches `selector` (say `team!=platform`). Lists confirm it
 * once labeller has logged `applied` writes in all, and only every 5 s before that (a log level
 * above info logs none): a list with a selector scans the namespace on the server, and polling
 * one every 200 ms took 10–15 % of a core, which the tight loop it is compared with does not pay.
 */
export async function converged(
  labeller: Converging,
  apis: readonly MetadataApi[],
  selector: string,
  applied: number,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<void> {
  let listed = 0;
  for (const deadline = Date.now() + timeoutMs;;) {
    labeller.assertRunning();
    signal.throwIfAborted();
    if (labeller.counts.applied >= applied || Date.now() - listed > 5000) {
      listed = Date.now();
      const left = await Promise.all(apis.map((api) => api.list({ labelSelector: selector, limit: 1 })));
      if (left.every((page) => page.items.length === 0)) return;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `objects still match ${selector} after ${Math.round(timeoutMs / 1000)} s\n${labeller.stderr}`,
      );
    }
    await sleep(100, signal);
  }
}
