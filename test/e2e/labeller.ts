// Runs the real `labeller` command (Node or Deno) against the test cluster and reads its JSON logs.
import { spawn, type ChildProcess } from 'node:child_process';
import { after } from 'node:test';
import { denoPath } from '../tools.ts';
import { kubeconfig } from './cluster.ts';

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
}

function command(runtime: Runtime): [string, string[]] {
  return runtime === 'node' ? [process.execPath, ['bin/labeller.js']] : [denoPath(), ['run', '--allow-all', 'src/cli.ts']];
}

const running = new Set<ChildProcess>();
// A failed assertion must not leave a labeller running: it would keep the test file alive.
after(() => {
  for (const child of running) child.kill('SIGKILL');
});

export class Labeller {
  readonly process: ChildProcess;
  readonly logs: LogLine[] = [];
  stdout = '';
  stderr = '';
  readonly exited: Promise<Exit>;
  readonly #waiters = new Set<() => void>();

  constructor(args: readonly string[], options: { runtime?: Runtime; env?: Record<string, string>; kubeconfig?: string } = {}) {
    const [bin, prefix] = command(options.runtime ?? 'node');
    const withKubeconfig = args.some((a) => a.startsWith('--kubeconfig')) ? [] : ['--kubeconfig', options.kubeconfig ?? kubeconfig()];
    this.process = spawn(bin, [...prefix, ...withKubeconfig, '--log-format', 'json', ...args], {
      env: { ...process.env, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.process.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      this.stdout += chunk;
    });
    let pending = '';
    this.process.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr += chunk;
      pending += chunk;
      const lines = pending.split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) {
        if (!line.startsWith('{')) continue;
        this.logs.push(JSON.parse(line) as LogLine);
      }
      for (const wake of this.#waiters) wake();
    });
    running.add(this.process);
    this.exited = new Promise((resolve) => {
      this.process.on('exit', (code, signal) => {
        running.delete(this.process);
        for (const wake of this.#waiters) wake();
        resolve({ code, signal, stdout: this.stdout, stderr: this.stderr });
      });
    });
  }

  /** Resolves with the first log line matching `predicate`; rejects after `timeoutMs` or if the process exits. */
  waitForLog(predicate: (line: LogLine) => boolean, timeoutMs = 30_000): Promise<LogLine> {
    return new Promise((resolve, reject) => {
      const check = (): void => {
        const found = this.logs.find(predicate);
        if (found) done(() => resolve(found));
        else if (this.process.exitCode !== null || this.process.signalCode !== null) done(() => reject(new Error(`labeller exited (${this.process.exitCode ?? this.process.signalCode}) before the expected log line\n${this.stderr.slice(-3000)}`)));
      };
      const timer = setTimeout(() => done(() => reject(new Error(`no matching log line within ${timeoutMs} ms\n${this.stderr.slice(-3000)}`))), timeoutMs);
      const done = (settle: () => void): void => {
        clearTimeout(timer);
        this.#waiters.delete(check);
        settle();
      };
      this.#waiters.add(check);
      check();
    });
  }

  /** Sends a signal and waits for the exit. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<Exit> {
    this.process.kill(signal);
    return this.exited;
  }
}

/** Runs labeller to completion (for --once and error cases). */
export function runLabeller(args: readonly string[], options: ConstructorParameters<typeof Labeller>[1] = {}): Promise<Exit> {
  return new Labeller(args, options).exited;
}
