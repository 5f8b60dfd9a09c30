// Runs the real `labeller` command (Node: bin/labeller.js, Deno: src/cli.ts) and reads its JSON
// logs. Only the lines the bench needs are kept, so a 50k-object run does not hold 50k log lines.
import { existsSync } from 'node:fs';
import { Arrivals, lineSplitter } from '../../test/lines.ts';
import { host, type Runtime, tsCommand } from './runtime.ts';
import { type Child, type Exit, start } from './spawn.ts';

export interface LogLine {
  readonly time: string;
  readonly level: string;
  readonly msg: string;
  readonly [field: string]: unknown;
}

/** Every running labeller, so Ctrl-C can stop them all. */
export const running = new Set<LabellerProcess>();

export class LabellerProcess {
  readonly process: Child;
  /** Epoch ms just before the process was spawned. */
  readonly startedAt: number;
  readonly #lines = new Arrivals<LogLine>();
  /** Lines other than "labels applied" (info about one object); those are only counted. */
  readonly logs: readonly LogLine[] = this.#lines.items;
  readonly counts = { applied: 0, warn: 0, error: 0 };
  #stderrTail = '';

  /**
   * `entry` is what runs: by default the source run (Node: bin/labeller.js, Deno: src/cli.ts),
   * else a built entry point such as dist/cli.js; `v8Flags` go to the runtime (--max-semi-space-size=…).
   */
  constructor(
    runtime: Runtime,
    args: readonly string[],
    entry = sourceEntry(runtime),
    v8Flags: readonly string[] = [],
  ) {
    const [bin, prefix] = tsCommand(runtime, entry, v8Flags);
    const split = lineSplitter((text) => {
      if (!text.startsWith('{')) return;
      const line = JSON.parse(text) as LogLine;
      if (line.level === 'warn') this.counts.warn++;
      if (line.level === 'error') this.counts.error++;
      if (line.msg === 'labels applied') this.counts.applied++;
      else this.#lines.push(line);
    });
    this.startedAt = Date.now();
    this.process = start(bin, [...prefix, '--log-format', 'json', ...args], (chunk) => {
      this.#stderrTail = (this.#stderrTail + chunk).slice(-4000);
      split(chunk);
    });
    running.add(this);
    void this.process.exited.then((exit) => {
      running.delete(this);
      this.#lines.end(`labeller exited (${describe(exit)})`);
    });
  }

  get exited(): Promise<Exit> {
    return this.process.exited;
  }

  get stderrTail(): string {
    return this.#stderrTail;
  }

  /** Resolves with the first kept log line matching `predicate`; rejects on timeout or exit. */
  waitForLog(predicate: (line: LogLine) => boolean, timeoutMs: number): Promise<LogLine> {
    return this.#lines.waitFor(predicate, { timeoutMs, context: () => this.#stderrTail });
  }

  /** Throws if the process has exited (it never should on its own). */
  assertRunning(): void {
    if (this.process.exit) {
      throw new Error(`labeller exited unexpectedly (${describe(this.process.exit)})\n${this.#stderrTail}`);
    }
  }

  /** SIGTERM, then SIGKILL after `killAfterMs`; resolves with the exit. */
  async stop(killAfterMs = 15_000): Promise<Exit> {
    this.process.kill('SIGTERM');
    const timer = setTimeout(() => this.process.kill('SIGKILL'), killAfterMs);
    try {
      return await this.process.exited;
    } finally {
      clearTimeout(timer);
    }
  }
}

/** How labeller is started, shared by the benches: the runtime, the sources or a build, V8 flags. */
export interface Launch {
  readonly runtime: Runtime;
  /** What runs: the sources, or a build folder's cli.js. */
  readonly entry: string;
  readonly build: string | undefined;
  readonly v8Flags: readonly string[];
}

/** The parseArgs options behind Launch. */
export const LAUNCH_OPTIONS = {
  'labeller-runtime': { type: 'string', default: host },
  build: { type: 'string' },
  'v8-flags': { type: 'string' },
} as const;

export const LAUNCH_USAGE = `  --labeller-runtime R    node or deno: what runs labeller (default: this runtime)
  --build DIR             run the shipped build (DIR/cli.js, e.g. --build dist after \`npm run build\`)
                          instead of the sources (bin/labeller.js, or src/cli.ts on Deno)
  --v8-flags F            comma-separated V8 flags for labeller, e.g. --max-semi-space-size=1`;

export function launch(
  values: {
    readonly 'labeller-runtime'?: string | undefined;
    readonly build?: string | undefined;
    readonly 'v8-flags'?: string | undefined;
  },
): Launch {
  const runtime = values['labeller-runtime'] ?? host;
  if (runtime !== 'node' && runtime !== 'deno') throw new Error(`--labeller-runtime ${runtime}: expected node or deno`);
  const build = values.build?.replace(/\/+$/, '');
  return {
    runtime,
    entry: build === undefined ? sourceEntry(runtime) : builtEntry(build),
    build,
    v8Flags: values['v8-flags'] ? values['v8-flags'].split(',').filter(Boolean) : [],
  };
}

/** The source run: what `npx labeller` runs in a clone, or `deno run -A src/cli.ts`. */
export function sourceEntry(runtime: Runtime): string {
  return runtime === 'node' ? 'bin/labeller.js' : 'src/cli.ts';
}

/** The shipped build's entry point in `dir` (`npm run build` writes dist/cli.js); throws if it is not built. */
export function builtEntry(dir: string): string {
  const entry = `${dir}/cli.js`;
  if (!existsSync(entry)) {
    throw new Error(
      `--build ${dir}: ${entry} does not exist; run \`npm run build\` first, or leave --build out to measure the sources`,
    );
  }
  return entry;
}

export function describe(exit: Exit): string {
  return exit.signal ? `signal ${exit.signal}` : `status ${exit.code}`;
}
