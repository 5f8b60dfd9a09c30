// Follows a file's content: the folder holding it is watched, because a mounted ConfigMap is
// updated by swapping a symlink (`..data`) next to the file rather than by writing the file,
// and a slow re-read catches what a watch can miss (network filesystems, a folder replaced).
// Each distinct content is reported once.
import { readText } from '../util/readtext.ts';
import { watch } from 'node:fs';
import { dirname } from 'node:path';

export interface FileWatchOptions {
  /** Re-read at least this often (default 5 s). */
  readonly pollMs?: number;
  /** Events arrive in bursts (an editor's save, the kubelet's swap): wait this long (default 100 ms). */
  readonly settleMs?: number;
  readonly signal: AbortSignal;
}

/**
 * Calls `onChange` with each new content of `path` (never with the content it had at start,
 * `initial`), or with the error of a read that failed, until `signal` aborts.
 */
export function watchFile(
  path: string,
  initial: string,
  onChange: (content: string | Error) => void,
  options: FileWatchOptions,
): void {
  const { signal, pollMs = 5000, settleMs = 100 } = options;
  let last: string | Error = initial;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const check = (): void => {
    timer = undefined;
    readText(path).then(
      (content) => {
        if (signal.aborted || content === last) return;
        last = content;
        onChange(content);
      },
      (error: unknown) => {
        const failure = error instanceof Error ? error : new Error(String(error));
        // Reported once, not on every poll.
        if (signal.aborted || (last instanceof Error && last.message === failure.message)) return;
        last = failure;
        onChange(failure);
      },
    );
  };
  const soon = (): void => {
    if (timer === undefined && !signal.aborted) timer = setTimeout(check, settleMs);
  };
  const watcher = watch(dirname(path), { persistent: false }, soon);
  watcher.on('error', () => {}); // the poll goes on
  const poll = setInterval(soon, pollMs);
  poll.unref?.();
  signal.addEventListener('abort', () => {
    watcher.close();
    clearInterval(poll);
    if (timer !== undefined) clearTimeout(timer);
  }, { once: true });
}
