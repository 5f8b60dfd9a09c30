// Child processes whose stderr is read and whose real exit status is known. On Deno host the
// node:child_process polyfill reports a child that was sent SIGTERM as killed by it even when it
// handled the signal and exited 0, so Deno.Command is used there.
import { spawn } from 'node:child_process';

export interface Exit {
  readonly code: number | null;
  readonly signal: string | null;
}

export interface Child {
  readonly pid: number | undefined;
  /** Set once the process has exited. */
  readonly exit: Exit | undefined;
  readonly exited: Promise<Exit>;
  kill(signal: 'SIGTERM' | 'SIGKILL' | 'SIGINT'): void;
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
      options: { args: string[]; stdin: 'null'; stdout: 'piped' | 'null'; stderr: 'piped' },
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

/** Starts `command`; `onStderr` (and `onStdout`, if given) get its output as text. */
export function start(
  command: string,
  args: readonly string[],
  onStderr: (chunk: string) => void,
  onStdout?: (chunk: string) => void,
): Child {
  if (typeof Deno !== 'undefined') {
    const child = new Deno.Command(command, {
      args: [...args],
      stdin: 'null',
      stdout: onStdout ? 'piped' : 'null',
      stderr: 'piped',
    }).spawn();
    const output = Promise.all([
      pump(child.stderr, onStderr),
      onStdout ? pump(child.stdout, onStdout) : Promise.resolve(),
    ]).catch(() => {});
    const handle: { exit: Exit | undefined } & Child = {
      pid: child.pid,
      exit: undefined,
      exited: child.status.then(async ({ code, signal }) => {
        await output;
        // Deno reports 128 + n with the signal's name for a signal death; keep Node's convention.
        const exit = { code: signal ? null : code, signal };
        handle.exit = exit;
        return exit;
      }),
      kill: (signal) => {
        try {
          child.kill(signal);
        } catch {
          // already exited
        }
      },
    };
    return handle;
  }
  const child = spawn(command, [...args], { stdio: ['ignore', onStdout ? 'pipe' : 'ignore', 'pipe'] });
  child.stderr?.setEncoding('utf8').on('data', onStderr);
  if (onStdout) child.stdout?.setEncoding('utf8').on('data', onStdout);
  const handle: { exit: Exit | undefined } & Child = {
    pid: child.pid,
    exit: undefined,
    exited: new Promise((resolve) => {
      child.on('close', (code, signal) => {
        handle.exit = { code, signal };
        resolve(handle.exit);
      });
    }),
    kill: (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
  };
  return handle;
}
