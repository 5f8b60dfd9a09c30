// The one wait of the tests, the bench and the scripts, built on labeller's own sleep.
import { sleep as wait } from '../../src/util/sleep.ts';

/** Waits `ms`; with `signal`, rejects with its reason as soon as it aborts (a bench at Ctrl-C). */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  await wait(ms, signal);
  signal?.throwIfAborted();
}
