// Connection pools to the API server: Node's own http(s) Agents with keep-alive. They cost
// nothing to load (node:http is part of the runtime), where undici costs 15–28 MiB of RSS, and
// they leave less garbage per request (bench/README.md, "Where the CPU and memory go").
// HTTP/1.1 only: with HTTP/2 every request shares one connection, so one that dies silently
// stalls them all.
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { ConnectionOptions } from 'node:tls';
import { TunnelAgent } from './proxy.ts';

/** TLS settings of a pool, as node:tls takes them. */
export type TlsOptions = Pick<
  ConnectionOptions,
  'ca' | 'cert' | 'key' | 'pfx' | 'passphrase' | 'rejectUnauthorized' | 'servername'
>;

/**
 * An idle kept-alive connection is closed after this long, well before the API server's own idle
 * timeout (90 s), so that the server rarely closes one just as a request reuses it. (The Agent
 * applies it to idle connections only: a quiet watch is not cut.)
 */
const IDLE_MS = 30_000;

/** How connections are made: a different Transport object means a new connection pool. */
export interface Transport {
  /** A connection pool: a new one, or the same one when it cannot be replaced (a proxy's). */
  pool(): HttpAgent;
}

/** A transport whose pools keep connections to `server` open between requests, tunnelled through `proxy` when given. */
export function keepAliveTransport(server: string, tls: TlsOptions, proxy?: URL): Transport {
  const options = Object.fromEntries(Object.entries(tls).filter(([, v]) => v !== undefined));
  return {
    pool: () =>
      !server.startsWith('https:')
        ? new HttpAgent({ keepAlive: true, timeout: IDLE_MS })
        : proxy
        ? new TunnelAgent(proxy, { ...options, keepAlive: true, timeout: IDLE_MS })
        : new HttpsAgent({ ...options, keepAlive: true, timeout: IDLE_MS }),
  };
}

/**
 * Stops `pool` from being used again: its idle connections close now, the busy ones when their
 * request ends, so requests still running on it finish there.
 */
export function retire(pool: HttpAgent): void {
  pool.keepSocketAlive = () => false;
  for (const sockets of Object.values(pool.freeSockets)) {
    for (const socket of sockets ?? []) socket.destroy();
  }
}
