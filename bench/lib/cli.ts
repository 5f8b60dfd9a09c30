// What every bench script's command line does alike: --help prints the usage and exits 0, a bad
// option prints its message and the usage and exits 2, and progress goes to stderr with the time.

/** Runs `parse` (a parseArgs call and its checks); on an error, prints it with `usage` and exits 2. */
export function parseOrExit<T>(name: string, usage: string, parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    process.stderr.write(`${name}: ${error instanceof Error ? error.message : String(error)}\n${usage}\n`);
    process.exit(2);
  }
}

/** Prints `usage` and exits 0, for --help. */
export function exitWithUsage(usage: string): never {
  process.stdout.write(`${usage}\n`);
  process.exit(0);
}

/** A progress line on stderr: `[name HH:MM:SS] message`. */
export type Log = (message: string) => void;

export function progress(name: string): Log {
  return (message) => process.stderr.write(`[${name} ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}
