// The entry point (`node bin/labeller.js`, `deno run -A src/cli.ts`). The shutdown coordinator is
// created first, with nothing heavy loaded yet, and handed down: from here on a termination
// signal at any stage (loading, discovery, listing, patching) is a clean stop.
import { fatal, report } from './fatal.ts';
import { Shutdown } from './runtime/shutdown.ts';

const shutdown = new Shutdown();
try {
  const { main } = await import('./main.ts');
  process.exitCode = await main(process.argv.slice(2), shutdown);
} catch (error) {
  // main() reports its own failures; this is the code failing to load (Deno without permissions).
  const failure = fatal(error, false);
  report(failure, process.stderr.isTTY ? 'text' : 'json');
  process.exitCode = failure.status;
}
// Open handles (a watch being torn down) must not keep a finished run alive.
process.exit();
