// Child processes whose output is read and whose real exit status is known. On a Deno host the
// node:child_process polyfill reports a child that was sent SIGTERM as killed by it even when it
// handled the signal and exited 0, so Deno.Command is used there.
import { spawn } from 'node:child_process';

export interface Exit {
  readonly code: number | null;
  readonly signal: string | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface ChildOptions {
  /** Added to this process's environment. */
  readonly env?: Readonly<Record<string, string>> | undefined;
  readonly cwd?: string | undefined;
  /** Each chunk of output as it arrives, as text. */
  readonly onStdout?: ((chunk: string) => void) | undefined;
  readonly onStderr?: ((chunk: string) => void) | undefined;
  /** Characters of stdout and of stderr kept, the last ones (all by default). */
  readonly outputLimit?: number | undefined;
}

export interface Child {
  readonly pid: number | undefined;
  /** Set once the process has exited. */
  readonly exit: Exit | undefined;
  /** Resolves once the process has exited and its output is read to the end. */
  readonly exited: Promise<Exit>;
  /** The output so far (its last `outputLimit` characters). */
  readonly stdout: string;
  readonly stderr: string;
  /** Sends a signal if the process is still running. */
  kill(signal: NodeJS.Signals): void;
}

interface DenoChild {
  readonly pid: number;
  readonly stderr: ReadableStream<Uint8Array>;
  readonly stdout: ReadableStream<Uint8Array>;
  readonly status: Promise<{ code: number; signal: string | null }>;
  kill(signal: string): void;
}

declare const Deno:
  | {
    Command: new (
      cmd: string,
      options: {
        args: string[];
        cwd?: string;
        env?: Record<string, string>;
        stdin: 'null';
        stdout: 'piped';
        stderr: 'piped';
      },
    ) => { spawn(): DenoChild };
  }
  | undefined;

async function pump(stream: ReadableStream<Uint8Array>, onData: (chunk: string) => void): Promise<void> {
  const decoder = new TextDecoder();
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    onData(decoder.decode(value, { stream: true }));
  }
}

/** Starts `command` with `args`; its stdin is closed. */
export function start(command: string, args: readonly string[], options: ChildOptions = {}): Child {
  const limit = options.outputLimit ?? Number.POSITIVE_INFINITY;
  const output = { stdout: '', stderr: '' };
  const onStdout = (chunk: string): void => {
    output.stdout = keepLast(output.stdout + chunk, limit);
    options.onStdout?.(chunk);
  };
  const onStderr = (chunk: string): void => {
    output.stderr = keepLast(output.stderr + chunk, limit);
    options.onStderr?.(chunk);
  };
  let exit: { code: number | null; signal: string | null } | undefined;
  const withOutput = (): Exit | undefined => exit && { ...exit, ...output };

  if (typeof Deno !== 'undefined') {
    const child = new Deno.Command(command, {
      args: [...args],
      ...(options.cwd ? { cwd: options.cwd } : {}),
      ...(options.env ? { env: { ...options.env } } : {}),
      stdin: 'null',
      stdout: 'piped',
      stderr: 'piped',
    }).spawn();
    const read = Promise.all([pump(child.stdout, onStdout), pump(child.stderr, onStderr)]).catch(() => {});
    return {
      pid: child.pid,
      get exit() {
        return withOutput();
      },
      exited: child.status.then(async ({ code, signal }) => {
        await read;
        // Deno reports 128 + n with the signal's name for a signal death; keep Node's convention.
        exit = { code: signal ? null : code, signal };
        return withOutput()!;
      }),
      get stdout() {
        return output.stdout;
      },
      get stderr() {
        return output.stderr;
      },
      kill: (signal) => {
        try {
          child.kill(signal);
        } catch {
          // already exited
        }
      },
    };
  }

  const child = spawn(command, [...args], {
    ...(options.cwd ? { cwd: options.cwd } : {}),
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.setEncoding('utf8').on('data', onStdout);
  child.stderr.setEncoding('utf8').on('data', onStderr);
  // 'exit' says the process is gone; 'close' comes once its output has been read too.
  child.on('exit', (code, signal) => (exit = { code, signal }));
  return {
    pid: child.pid,
    get exit() {
      return withOutput();
    },
    exited: new Promise((resolve) => {
      child.on('close', (code, signal) => {
        exit ??= { code, signal };
        resolve(withOutput()!);
      });
    }),
    get stdout() {
      return output.stdout;
    },
    get stderr() {
      return output.stderr;
    },
    kill: (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
  };
}

function keepLast(text: string, limit: number): string {
  return text.length > limit ? text.slice(-limit) : text;
}

export function describeExit(exit: Pick<Exit, 'code' | 'signal'>): string {
  return exit.signal ? `signal ${exit.signal}` : `status ${exit.code}`;
}

/** Sends `signal` and waits for the exit; with `killAfterMs`, SIGKILL if it has not exited by then. */
export async function stop<E>(
  child: { kill(signal: NodeJS.Signals): void; readonly exited: Promise<E> },
  signal: NodeJS.Signals = 'SIGTERM',
  killAfterMs?: number,
): Promise<E> {
  child.kill(signal);
  const timer = killAfterMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), killAfterMs);
  try {
    return await child.exited;
  } finally {
    clearTimeout(timer);
  }
}
