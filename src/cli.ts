// The entry point (`node bin/labeller.js`, `deno run -A src/cli.ts`). It has no static imports,
// so it runs at once: until the shutdown coordinator takes over, a termination signal simply
// ends the process with status 0 (nothing has started that needs draining). bin/labeller.js
// installs that handler even earlier and leaves it here for the coordinator to replace.
const installed = (globalThis as Record<symbol, unknown>)[Symbol.for('labeller.earlySignalHandler')];
const early = typeof installed === 'function' ? (installed as () => void) : (): void => process.exit(0);
if (early !== installed) {
  process.on('SIGTERM', early);
  process.on('SIGINT', early);
}

const { main } = await import('./main.ts');
process.exitCode = await main(process.argv.slice(2), early);
// Open handles (a watch being torn down) must not keep a finished run alive.
process.exit();
