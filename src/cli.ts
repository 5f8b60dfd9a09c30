// The entry point (`node bin/labeller.js`, `deno run -A src/cli.ts`). The shutdown coordinator is
// created first, with nothing heavy loaded yet, and handed down: from here on a termination
// signal at any stage (loading, discovery, listing, patching) is a clean stop.
import { Shutdown } from './runtime/shutdown.ts';

const shutdown = new Shutdown();
const { main } = await import('./main.ts');
process.exitCode = await main(process.argv.slice(2), shutdown);
// Open handles (a watch being torn down) must not keep a finished run alive.
process.exit();
