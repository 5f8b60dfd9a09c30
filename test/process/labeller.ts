// The real `labeller` command as a child process, with its JSON logs parsed as they arrive: what
// the e2e and fault tests, the soak, the bench and the demo run. Free of node:test hooks.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Child, describeExit, type Exit, start, stop } from './child.ts';
import { Arrivals, lineSplitter } from './lines.ts';
import { host, type Runtime, tsCommand } from './runtime.ts';

export interface LogLine {
  readonly time: string;
  readonly level: string;
  readonly msg: string;
  readonly [field: string]: unknown;
}

/** A labeller's exit, with the message of the fatal line it ends a failed run with (JSON or `labeller: …`), if any. */
export interface LabellerExit extends Exit {
  readonly fatal: string | undefined;
}

/** The message of labeller's fatal line in `stderr`: a JSON log line with `exitStatus`, or `labeller: …` text. */
export function fatalMessage(stderr: string): string | undefined {
  for (const line of stderr.trim().split('\n').reverse()) {
    if (line.startsWith('labeller: ')) return line.slice('labeller: '.length);
    if (!line.startsWith('{')) continue;
    try {
      const parsed = JSON.parse(line) as Partial<LogLine>;
      if (parsed.exitStatus !== undefined) return String(parsed.msg);
    } catch {
      // not a log line
    }
  }
  return undefined;
}

/** The source run: what `npx labeller` runs in a clone, or `deno run -A src/cli.ts`. */
export function sourceEntry(runtime: Runtime): string {
  return runtime === 'node' ? 'bin/labeller.js' : 'src/cli.ts';
}

export interface LabellerOptions {
  /**
   * Without it, the test run's shared cluster (E2E_KUBECONFIG) unless `args` name one; '' passes
   * none.
   */
  readonly kubeconfig?: string | undefined;
  /** What runs labeller (default: this process's runtime). */
  readonly runtime?: Runtime | undefined;
  /** What runs: the sources by default, or a build's entry point such as dist/cli.js. */
  readonly entry?: string | undefined;
  /** Flags for the runtime, e.g. --max-semi-space-size=1. */
  readonly v8Flags?: readonly string[] | undefined;
  /** Another labeller (an installed package, the image's entry point, another checkout's) instead of `runtime` and `entry`. */
  readonly command?: readonly [string, ...string[]] | undefined;
  /** A command that runs labeller's command line, e.g. `unshare … sh -c 'exec "$@"'`. */
  readonly wrapper?: readonly string[] | undefined;
  readonly env?: Readonly<Record<string, string>> | undefined;
  /**
   * The process's wall clock this many seconds ahead (negative: behind) of the host's, through
   * libfaketime (LD_PRELOAD); its monotonic clock, and file times, as the host's. Needs
   * libfaketime(); 0 or undefined: the host's clock.
   */
  readonly clockOffsetSeconds?: number | undefined;
  readonly cwd?: string | undefined;
  /** `args` go to labeller as they are: no --kubeconfig and no --log-format json added. */
  readonly raw?: boolean | undefined;
  /**
   * Which log lines `logs` keeps (all by default); the others are only counted. A run over 50k
   * objects at debug keeps its "labels applied" lines out, and `outputLimit` characters of its output.
   */
  readonly keep?: ((line: LogLine) => boolean) | undefined;
  readonly outputLimit?: number | undefined;
}

/** Every labeller still running: a crashed script or a failed assertion must not leave one behind. */
export const running = new Set<Labeller>();
process.on('exit', () => {
  for (const labeller of running) labeller.kill();
});

export class Labeller {
  readonly process: Child;
  /** Epoch ms just before the process was spawned. */
  readonly startedAt = Date.now();
  readonly #lines = new Arrivals<LogLine>();
  readonly logs: readonly LogLine[] = this.#lines.items;
  /** Date.now() when each line of `logs` arrived. */
  readonly arrivals: number[] = [];
  /**
   * Every log line counted, kept in `logs` or not; `applied` is the objects written as the
   * `objects written` summaries add up (at every log level: no line per object below debug).
   */
  readonly counts = { applied: 0, warn: 0, error: 0 };
  readonly exited: Promise<LabellerExit>;

  constructor(args: readonly string[], options: LabellerOptions = {}) {
    const runtime = options.runtime ?? host;
    const [bin, prefix] = options.command
      ? [options.command[0], options.command.slice(1)]
      : tsCommand(runtime, options.entry ?? sourceEntry(runtime), options.v8Flags);
    const kubeconfig = options.kubeconfig ?? process.env['E2E_KUBECONFIG'];
    const withKubeconfig = options.raw || args.some((a) => a.startsWith('--kubeconfig')) || !kubeconfig
      ? []
      : ['--kubeconfig', kubeconfig];
    const commandLine = [...prefix, ...withKubeconfig, ...(options.raw ? [] : ['--log-format', 'json']), ...args];
    const [command = bin, ...wrapperArgs] = options.wrapper ?? [];
    const keep = options.keep ?? (() => true);
    const split = lineSplitter((text) => {
      if (!text.startsWith('{')) return;
      let line: LogLine;
      try {
        line = JSON.parse(text) as LogLine;
      } catch {
        return; // a partial or foreign line: kept in stderr only
      }
      if (line.level === 'warn') this.counts.warn++;
      if (line.level === 'error') this.counts.error++;
      if (line.msg === 'objects written' && typeof line['written'] === 'number') this.counts.applied += line['written'];
      if (!keep(line)) return;
      this.arrivals.push(Date.now());
      this.#lines.push(line);
    });
    this.process = start(command, options.wrapper ? [...wrapperArgs, bin, ...commandLine] : commandLine, {
      env: options.clockOffsetSeconds ? { ...options.env, ...skewedClock(options.clockOffsetSeconds) } : options.env,
      cwd: options.cwd,
      onStderr: split,
      outputLimit: options.outputLimit,
    });
    running.add(this);
    this.exited = this.process.exited.then((exit) => {
      running.delete(this);
      // FAULTS_LOG_DIR=dir keeps every run's output, for looking into a failure.
      const dir = process.env['FAULTS_LOG_DIR'];
      if (dir) {
        mkdirSync(dir, { recursive: true });
        writeFileSync(
          join(dir, `labeller-${this.startedAt}-${this.process.pid}.log`),
          `${args.join(' ')}\nexit ${exit.code} ${exit.signal}\n${exit.stdout}\n${exit.stderr}`,
        );
      }
      this.#lines.end(`labeller exited (${describeExit(exit)})`);
      return { ...exit, fatal: fatalMessage(exit.stderr) };
    });
  }

  get pid(): number {
    if (this.process.pid === undefined) throw new Error('labeller did not start');
    return this.process.pid;
  }

  get running(): boolean {
    return this.process.exit === undefined;
  }

  get stdout(): string {
    return this.process.stdout;
  }

  get stderr(): string {
    return this.process.stderr;
  }

  /** Resolves with the first log line at index ≥ `from` matching `predicate`; rejects after `timeoutMs` or if the process exits. */
  waitForLog(predicate: (line: LogLine) => boolean, timeoutMs = 30_000, from = 0): Promise<LogLine> {
    return this.#lines.waitFor(predicate, { timeoutMs, from, context: () => this.stderr.slice(-3000) });
  }

  /** Log lines from index `from` on that match `predicate`. */
  since(from: number, predicate: (line: LogLine) => boolean = () => true): LogLine[] {
    return this.logs.slice(from).filter(predicate);
  }

  /** Throws if the process has exited (a long-running labeller never should on its own). */
  assertRunning(): void {
    const exit = this.process.exit;
    if (exit) throw new Error(`labeller exited unexpectedly (${describeExit(exit)})\n${this.stderr.slice(-3000)}`);
  }

  /** Sends a signal and waits for the exit; with `killAfterMs`, SIGKILL if it has not exited by then. */
  stop(signal: NodeJS.Signals = 'SIGTERM', killAfterMs?: number): Promise<LabellerExit> {
    return stop({ kill: (s) => this.process.kill(s), exited: this.exited }, signal, killAfterMs);
  }

  /** Ends the process whatever state it is in (for `finally` blocks). */
  kill(): void {
    this.process.kill('SIGKILL');
  }
}

/**
 * libfaketime's multi-threaded library (Debian's package `faketime`), which shifts a process's
 * wall clock; undefined when it is not installed.
 */
export function libfaketime(): string | undefined {
  const triplet = process.arch === 'arm64' ? 'aarch64-linux-gnu' : 'x86_64-linux-gnu';
  return [`/usr/lib/${triplet}/faketime`, '/usr/lib/faketime', '/usr/local/lib/faketime']
    .map((dir) => `${dir}/libfaketimeMT.so.1`)
    .find((path) => existsSync(path));
}

/**
 * The environment that runs a process with its wall clock `seconds` off the host's: libfaketime
 * preloaded, the monotonic clocks (what timers and leases measure with) and file times left alone.
 */
function skewedClock(seconds: number): Record<string, string> {
  const library = libfaketime();
  if (!library) throw new Error('a skewed clock needs libfaketime (Debian package faketime)');
  const preload = process.env['LD_PRELOAD'];
  return {
    LD_PRELOAD: preload ? `${library}:${preload}` : library,
    FAKETIME: `${seconds > 0 ? '+' : ''}${seconds}s`,
    FAKETIME_DONT_FAKE_MONOTONIC: '1',
    NO_FAKE_STAT: '1',
  };
}

/** `watch failed; retrying` lines, the watcher's report of every failed list or watch. */
export const watchFailed = (line: LogLine): boolean => line.msg === 'watch failed; retrying';

/**
 * The caches labeller filled (each informer's list or relist that completed) in `logs` from line
 * `from`, by kind. Unlike requests in the audit log, a fill the API server failed and labeller
 * tried again counts once: a streaming list waits at most 3 s for the watch cache to be fresh,
 * then fails ("Too large resource version"), which a busy machine can make happen.
 */
export function cacheFills(logs: readonly LogLine[], from = 0): Record<string, number> {
  const fills: Record<string, number> = {};
  for (const line of logs.slice(from)) {
    if (line.msg !== 'initial list complete' && line.msg !== 'relist complete') continue;
    const kind = String(line['kind']);
    fills[kind] = (fills[kind] ?? 0) + 1;
  }
  return fills;
}

/** Runs labeller to completion (for --once and error cases). */
export function runLabeller(args: readonly string[], options: LabellerOptions = {}): Promise<LabellerExit> {
  return new Labeller(args, options).exited;
}
