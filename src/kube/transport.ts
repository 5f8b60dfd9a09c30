// Connection pools to the API server: Node's own http(s) Agents with keep-alive. They cost
// nothing to load (node:http is part of the runtime), where undici costs 15–28 MiB of RSS, and
// they leave less garbage per request (bench/README.md, "Where the CPU and memory go").
// HTTP/1.1 only: with HTTP/2 every request shares one connection, so one that dies silently
// stalls them all.
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { Socket } from 'node:net';
import type { ConnectionOptions } from 'node:tls';
import { TunnelAgent } from './proxy.ts';

/** TLS settings of a pool, as node:tls takes them. */
export type TlsOptions = Pick<
  ConnectionOptions,
  'ca' | 'cert' | 'key' | 'pfx' | 'passphrase' | 'rejectUnauthorized' | 'servername'
>;

/**
 * An idle kept-alive connection is closed after 15–30 s, well before the API server's own idle
 * timeout (90 s), so that the server rarely closes one just as a request reuses it. Not by the
 * Agent's `timeout`: that re-arms a timer on the connection at every request and refreshes it at
 * every read and write, about 2 % of labeller's CPU when it writes 10,000 objects. A sweep every
 * IDLE_MS looks at the idle connections instead.
 */
const IDLE_MS = 15_000;

/** How connections are made: a different Transport object means a new connection pool. */
export interface Transport {
  /** A connection pool: a new one, or the same one when it cannot be replaced (a proxy's). */
  pool(): HttpAgent;
}

/**
 * A transport whose pools keep connections to `server` open between requests, tunnelled through
 * `proxy` when given, and close those idle from one sweep to the next (`idleMs` apart).
 */
export function keepAliveTransport(server: string, tls: TlsOptions, proxy?: URL, idleMs = IDLE_MS): Transport {
  const options = Object.fromEntries(Object.entries(tls).filter(([, v]) => v !== undefined));
  return {
    pool: () =>
      closingIdle(
        !server.startsWith('https:')
          ? new HttpAgent({ keepAlive: true })
          : proxy
          ? new TunnelAgent(proxy, { ...options, keepAlive: true })
          : new HttpsAgent({ ...options, keepAlive: true }),
        idleMs,
      ),
  };
}

/** Each pool's sweep, stopped when the pool is retired. */
const sweeps = new WeakMap<HttpAgent, ReturnType<typeof setInterval>>();

/**
 * `pool`, swept every `everyMs`: an idle connection that has neither sent nor received a byte
 * since the previous sweep is closed (the Agent drops it from its pool when it closes). A watch's
 * connection is busy, not idle, however quiet, so it is never cut.
 */
function closingIdle(pool: HttpAgent, everyMs: number): HttpAgent {
  const seen = new WeakMap<Socket, number>();
  const sweep = setInterval(() => {
    for (const sockets of Object.values(pool.freeSockets)) {
      for (const socket of sockets ?? []) {
        const io = socket.bytesRead + socket.bytesWritten;
        if (seen.get(socket) === io) socket.destroy();
        else seen.set(socket, io);
      }
    }
  }, everyMs);
  sweep.unref();
  sweeps.set(pool, sweep);
  return pool;
}

/**
 * Stops `pool` from being used again: its idle connections close now, the busy ones when their
 * request ends, so requests still running on it finish there.
 */
export function retire(pool: HttpAgent): void {
  clearInterval(sweeps.get(pool));
  pool.keepSocketAlive = () => false;
  for (const sockets of Object.values(pool.freeSockets)) {
    for (const socket of sockets ?? []) socket.destroy();
  }
}
