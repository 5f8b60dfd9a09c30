// A labeller process ended cleanly: no stack trace and no unhandled rejection in what it wrote.
import assert from 'node:assert/strict';

/** Whether a process's stderr shows a crash: a stack trace or an unhandled rejection. */
export function crashed(stderr: string): boolean {
  return /^\s+at .+(\(|:\d+:\d+)/m.test(stderr) || /Unhandled|unhandledRejection|ERR_UNHANDLED|uncaught/i.test(stderr);
}

/** No stack trace and no unhandled rejection in a process's stderr. */
export function assertNoCrash(stderr: string): void {
  if (crashed(stderr)) throw new Error(`stderr shows a crash:\n${stderr.slice(-3000)}`);
}

/** Exit status 0, and no crash in stderr. */
export function assertCleanExit(exit: { readonly code: number | null; readonly stderr: string }): void {
  assert.equal(exit.code, 0, exit.stderr.slice(-3000));
  assertNoCrash(exit.stderr);
}
