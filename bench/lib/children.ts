// The child processes the bench starts besides labeller (memory probes, the peers of --peers) and
// control planes besides run.ts's own (--shards' second): whatever is still running when the
// bench ends or is interrupted, its teardown kills or stops.
import type { ControlPlane } from '../../test/controlplane/controlplane.ts';
import { type Child, type ChildOptions, start, stop } from '../../test/process/child.ts';

export const children = new Set<Child>();

/** Control planes a measurement started itself; it removes each once it has stopped it. */
export const controlPlanes = new Set<ControlPlane>();

/** Starts `command` as child.ts does, kept in `children` until it exits. */
export function startChild(command: string, args: readonly string[], options?: ChildOptions): Child {
  const child = start(command, args, options);
  children.add(child);
  void child.exited.then(() => children.delete(child));
  return child;
}

/** Sends SIGTERM and waits for the exit; SIGKILL after `killAfterMs`. */
export function stopChild(child: Child, killAfterMs = 15_000): Promise<Awaited<Child['exited']>> {
  return stop(child, 'SIGTERM', killAfterMs);
}
