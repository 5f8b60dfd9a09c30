// The last word of a run that fails: one line that names the problem and the fix, never a stack
// trace, in the log format of the other lines, and the exit status (2 for usage, configuration
// and missing permissions: running again unchanged cannot help; 1 for failures at run time).
import { createLogger } from '../util/log.ts';

export interface Fatal {
  readonly message: string;
  readonly status: 1 | 2;
}

/** `usage`: the error is one of the command's usage or configuration errors. */
export function fatal(error: unknown, usage: boolean): Fatal {
  // Deno without -A: the first read of the environment, a file or the network throws.
  if (error instanceof Error && (error.name === 'NotCapable' || error.name === 'PermissionDenied')) {
    const what = error.message.replace(/, run again with .*$/s, '');
    return {
      message:
        `${what}: Deno runs labeller only with these permissions: deno run --allow-env --allow-read --allow-net --allow-sys --allow-run src/cli.ts (or -A)`,
      status: 2,
    };
  }
  return { message: error instanceof Error ? error.message : String(error), status: usage ? 2 : 1 };
}

/** Writes the line: `labeller: …` as text, or a JSON log line with the exit status. */
export function report({ message, status }: Fatal, format: 'json' | 'text'): void {
  if (format === 'json') createLogger({ level: 'error', format }).error(message, { exitStatus: status });
  else process.stderr.write(`labeller: ${message}\n`);
}
