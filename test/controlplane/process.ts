// The control plane's processes: started with their output in a log file of the plane's folder,
// waited for until an endpoint answers, stopped gently then firmly. Free of the components'
// flags: controlplane.ts (etcd, kube-apiserver) and controllers.ts (the rest) use it.
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { fetch } from 'undici';
import { sleep } from '../process/sleep.ts';

export class ControlPlaneUnavailable extends Error {
  override readonly name = 'ControlPlaneUnavailable';
}

/** Starts `path` with `args`; its stdout and stderr go to `<dir>/<name>.log`. */
export function launch(dir: string, name: string, path: string, args: readonly string[]): ChildProcess {
  const log = createWriteStream(join(dir, `${name}.log`), { flags: 'a' });
  const child = spawn(path, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  return child;
}

/** SIGTERM, then SIGKILL after 10 s; resolves once the process has exited. */
export async function stopProcess(p: ChildProcess): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => p.once('exit', () => resolve()));
  p.kill('SIGTERM');
  const timer = setTimeout(() => p.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

/** `n` TCP ports free on loopback right now. */
export async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from({ length: n }, () =>
      new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
        const s = createServer();
        s.once('error', reject);
        s.listen(0, '127.0.0.1', () => resolve(s));
      })),
  );
  const ports = servers.map((s) => {
    const address = s.address();
    if (address === null || typeof address === 'string') throw new Error('no port assigned');
    return address.port;
  });
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  return ports;
}

type FetchInit = Omit<NonNullable<Parameters<typeof fetch>[1]>, 'signal'> & {
  readonly signal?: AbortSignal | undefined;
};

/** Polls `url` until it answers 2xx; throws with the tail of `log` if `process` exits or 120 s pass. */
export async function waitFor(
  url: string,
  { signal, ...init }: FetchInit,
  process: () => ChildProcess | undefined,
  log: string,
): Promise<void> {
  let last = '';
  const ready = await poll(async () => {
    const p = process();
    if (p && p.exitCode !== null) {
      throw new ControlPlaneUnavailable(
        `${url} never came up: the process exited with status ${p.exitCode}\n${tail(log)}`,
      );
    }
    try {
      const res = await fetch(url, { ...init, signal: AbortSignal.timeout(5_000) });
      if (res.ok) return true;
      last = `HTTP ${res.status}: ${(await res.text()).slice(0, 500)}`;
    } catch (error) {
      last = error instanceof Error ? error.message : String(error);
    }
    return false;
  }, signal);
  if (!ready) throw new ControlPlaneUnavailable(`${url} not ready after 120 s (last: ${last})\n${tail(log)}`);
}

/** Calls `check` every 250 ms until it returns true (then true) or 120 s pass (then false). */
export async function poll(check: () => Promise<boolean>, signal?: AbortSignal): Promise<boolean> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    signal?.throwIfAborted();
    if (await check()) return true;
    await sleep(250);
  }
  return false;
}

/** The last 30 lines of a log file, or '' if it cannot be read. */
export function tail(path: string): string {
  try {
    return readFileSync(path, 'utf8').split('\n').slice(-30).join('\n');
  } catch {
    return '';
  }
}
