// The entry point (`node bin/labeller.js`, `deno run -A src/cli.ts`). The shutdown coordinator is
// created first, with nothing heavy loaded yet, and handed down: from here on a termination
// signal at any stage (loading, discovery, listing, patching) is a clean stop. Help, version and
// completion scripts are answered before the rest of the code loads: they need none of it.
import timers from 'node:timers';
import { completionScript } from './cli/completion.ts';
import { fatal, report } from './cli/fatal.ts';
import { formatHelp } from './cli/help.ts';
import { Shutdown } from './runtime/shutdown.ts';
import { UsageError } from './util/usage.ts';
import { versionLine } from './cli/version.ts';

const shutdown = new Shutdown();
const argv = process.argv.slice(2);
try {
  if (argv.includes('--help') || argv.includes('-h')) process.stdout.write(formatHelp());
  else if (argv.includes('--version')) process.stdout.write(`${await versionLine()}\n`);
  else if (argv[0] === 'completion') process.stdout.write(completionScript(argv.slice(1)));
  else {
    const { main } = await import('./cli/main.ts');
    process.exitCode = await main(argv, shutdown);
  }
} catch (error) {
  // main() reports its own failures; these are the first steps failing (Deno without permissions,
  // `completion` without a shell it knows).
  const failure = fatal(error, error instanceof UsageError);
  report(failure, process.stderr.isTTY ? 'text' : 'json');
  process.exitCode = failure.status;
}
// The process ends once its event loop has drained, as Node ends one by itself, not by
// process.exit(): that stops V8's worker threads without tearing the heap down first, and a
// background compile job parked there waiting for a garbage collection never returns
// (nodejs/node#54918). About one SIGTERM in 35 after a burst of patches hung until SIGKILL.
// Handles that outlive the run (a watch being torn down) get a moment, then the exit is forced.
timers.setTimeout(() => process.exit(), 2000).unref();
