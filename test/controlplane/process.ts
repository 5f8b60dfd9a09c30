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

/**
 * `n` TCP ports free right now, on every address, for a child process to listen on later. They
 * are picked at random below the kernel's ephemeral range: a port the kernel handed out with
 * `listen(0)` and then freed is the next one it gives an outgoing connection, and with many test
 * files running at once one of them took such a port before the child listened on it (CI run of
 * stop 52: EADDRINUSE on :36153). Outside that range, only another caller of this function can
 * take the port, and it picks from thousands at random.
 */
export async function freePorts(n: number): Promise<number[]> {
  const [low, high] = unclaimedRange();
  const ports = new Set<number>();
  for (let tries = 0; ports.size < n; tries++) {
    if (tries > 1000) throw new Error(`no free port found in ${low}-${high} after 1000 tries`);
    const port = low + Math.floor(Math.random() * (high - low));
    if (!ports.has(port) && await bindable(port)) ports.add(port);
  }
  return [...ports];
}

/** The ports between 20000 and the start of the ephemeral range, or 20000-30000 if it is unknown. */
function unclaimedRange(): [number, number] {
  try {
    const first = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    if (first > 21_000) return [20_000, first];
  } catch {
    // not Linux: the range below is outside the usual ephemeral ranges (49152 and up on others)
  }
  return [20_000, 30_000];
}

/** Whether a listener can take `port` on all addresses (as labeller's `:PORT` does) just now. */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, () => s.close(() => resolve(true)));
  });
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
