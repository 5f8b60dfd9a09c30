// The one clock a Lease's holder and its observers read: this host's monotonic clock, never a
// wall clock (a Lease's renewTime is written by another host's), behind an interface a test drives.
import { sleep } from '../util/sleep.ts';

export interface MonotonicClock {
  /** Milliseconds on a monotonic clock. */
  now(): number;
  /** Waits `ms` on this clock, or less if `signal` aborts first (never rejects). */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const monotonicClock: MonotonicClock = { now: () => performance.now(), sleep };

/** Runs `action` after `ms` on `clock`; returns the cancel function. */
export function after(clock: MonotonicClock, ms: number, action: () => void): () => void {
  const cancel = new AbortController();
  void clock.sleep(Math.max(0, ms), cancel.signal).then(() => {
    if (!cancel.signal.aborted) action();
  });
  return () => cancel.abort();
}
