// The real `labeller` command (Node or Deno) as a child process, with its JSON logs parsed as they
// arrive. Free of node:test hooks, so scripts (test/soak.ts) use it too.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Arrivals, lineSplitter } from '../lines.ts';
import { denoPath } from '../tools.ts';

export type Runtime = 'node' | 'deno';

export interface LogLine {
  readonly level: string;
  readonly msg: string;
  readonly [field: string]: unknown;
}

export interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
  /** The message of the fatal line labeller ends a failed run with (JSON or `labeller: …`), if any. */
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

const running = new Set<ChildProcess>();
// A failed assertion or a crashed script must not leave a labeller running behind it.
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

export class Labeller {
  readonly process: ChildProcess;
  readonly #lines = new Arrivals<LogLine>();
  readonly logs: readonly LogLine[] = this.#lines.items;
  /** Date.now() when each line of `logs` arrived. */
  readonly arrivals: number[] = [];
  readonly startedAt = Date.now();
  stdout = '';
  stderr = '';
  readonly exited: Promise<Exit>;

  /**
   * Without `kubeconfig`, the test run's shared cluster (E2E_KUBECONFIG); `kubeconfig: ''` passes
   * none. `command` runs another labeller (an installed package, the image's entry point) instead
   * of this tree's, on `runtime`. `wrapper` is a command that runs labeller's command line (e.g.
   * `unshare … sh -c 'exec "$@"'`).
   */
  constructor(
    args: readonly string[],
    options: {
      readonly kubeconfig?: string;
      readonly runtime?: Runtime;
      readonly env?: Record<string, string>;
      readonly command?: readonly [string, ...string[]];
      readonly wrapper?: readonly string[];
    } = {},
  ) {
    const [bin, prefix] = options.command
      ? [options.command[0], options.command.slice(1)]
      : options.runtime === 'deno'
      ? [denoPath(), ['run', '--allow-all', 'src/cli.ts']]
      : [process.execPath, ['bin/labeller.js']];
    const kubeconfig = options.kubeconfig ?? process.env['E2E_KUBECONFIG'];
    const withKubeconfig = args.some((a) => a.startsWith('--kubeconfig')) || !kubeconfig
      ? []
      : ['--kubeconfig', kubeconfig];
    const [command = bin, ...wrapperArgs] = options.wrapper ?? [];
    const commandLine = [...prefix, ...withKubeconfig, '--log-format', 'json', ...args];
    this.process = spawn(command, options.wrapper ? [...wrapperArgs, bin, ...commandLine] : commandLine, {
      env: { ...process.env, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.process.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      this.stdout += chunk;
    });
    const split = lineSplitter((line) => {
      if (!line.startsWith('{')) return;
      try {
        const parsed = JSON.parse(line) as LogLine;
        this.arrivals.push(Date.now());
        this.#lines.push(parsed);
      } catch {
        // A partial or foreign line: kept in stderr only.
      }
    });
    this.process.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr += chunk;
      split(chunk);
    });
    running.add(this.process);
    this.exited = new Promise((resolve) => {
      this.process.on('exit', (code, signal) => {
        running.delete(this.process);
        // FAULTS_LOG_DIR=dir keeps every run's stderr, for looking into a failure.
        const dir = process.env['FAULTS_LOG_DIR'];
        if (dir) {
          mkdirSync(dir, { recursive: true });
          writeFileSync(
            join(dir, `labeller-${this.startedAt}-${this.process.pid}.log`),
            `${args.join(' ')}\nexit ${code} ${signal}\n${this.stdout}\n${this.stderr}`,
          );
        }
        this.#lines.end(`labeller exited (${code ?? signal})`);
        resolve({ code, signal, stdout: this.stdout, stderr: this.stderr, fatal: fatalMessage(this.stderr) });
      });
    });
  }

  get pid(): number {
    if (this.process.pid === undefined) throw new Error('labeller did not start');
    return this.process.pid;
  }

  get running(): boolean {
    return this.process.exitCode === null && this.process.signalCode === null;
  }

  /** Resolves with the first log line at index ≥ `from` matching `predicate`; rejects after `timeoutMs` or if the process exits. */
  waitForLog(predicate: (line: LogLine) => boolean, timeoutMs = 30_000, from = 0): Promise<LogLine> {
    return this.#lines.waitFor(predicate, { timeoutMs, from, context: () => this.stderr.slice(-3000) });
  }

  /** Log lines from index `from` on that match `predicate`. */
  since(from: number, predicate: (line: LogLine) => boolean = () => true): LogLine[] {
    return this.logs.slice(from).filter(predicate);
  }

  /** Sends a signal and waits for the exit. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<Exit> {
    if (this.running) this.process.kill(signal);
    return this.exited;
  }

  /** Ends the process whatever state it is in (for `finally` blocks). */
  kill(): void {
    if (this.running) this.process.kill('SIGKILL');
  }
}

/** `watch failed; retrying` lines, the watcher's report of every failed list or watch. */
export const watchFailed = (line: LogLine): boolean => line.msg === 'watch failed; retrying';

/** Runs labeller to completion (for --once and error cases). */
export function runLabeller(
  args: readonly string[],
  options: ConstructorParameters<typeof Labeller>[1] = {},
): Promise<Exit> {
  return new Labeller(args, options).exited;
}
