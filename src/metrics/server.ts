// The probe and metrics endpoints: /healthz (the process and its event loop answer),
// /readyz (every controller has its first list and a live watch; a standby is ready too; what is
// wrong without keeping it from being ready follows the ok), /metrics;
// on one address or two (--health-probe-bind-address, --metrics-bind-address).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from './prometheus.ts';

/** A listen address as Kubernetes components take it: `host:port`, `:port` for every interface. */
export interface BindAddress {
  /** Empty: every interface. */
  readonly host: string;
  readonly port: number;
}

export interface Readiness {
  /** Why the process is not ready, one line each; none when it is. */
  problems(): readonly string[];
  /** What is wrong without keeping the process from being ready (labels held, kinds not served), one line each. */
  notes?(): readonly string[];
}

/** What one server answers: the probes, the metrics, or both. */
export interface Endpoints {
  readonly readiness?: Readiness | undefined;
  readonly registry?: Registry | undefined;
}

export async function serveHttp(address: BindAddress, { readiness, registry }: Endpoints): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const reply = (status: number, body: string, type = 'text/plain; charset=utf-8'): void => {
      res.writeHead(status, { 'content-type': type });
      res.end(body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return reply(405, 'method not allowed\n');
    switch (path) {
      case '/healthz':
      case '/livez':
        if (!readiness) break;
        return reply(200, 'ok\n');
      case '/readyz': {
        if (!readiness) break;
        const problems = readiness.problems();
        const notes = readiness.notes?.() ?? [];
        const lines = (list: readonly string[]) => list.map((line) => `- ${line}\n`).join('');
        return problems.length === 0
          ? reply(200, `ok\n${notes.length > 0 ? `but:\n${lines(notes)}` : ''}`)
          : reply(503, `not ready:\n${lines(problems)}${notes.length > 0 ? `also:\n${lines(notes)}` : ''}`);
      }
      case '/metrics':
        if (!registry) break;
        registry.metrics().then(
          (text) => reply(200, text, registry.contentType),
          (error: unknown) => reply(500, `${String(error)}\n`),
        );
        return;
    }
    reply(
      404,
      `not found: try ${
        [...(readiness ? ['/healthz', '/readyz'] : []), ...(registry ? ['/metrics'] : [])].join(' or ')
      }\n`,
    );
  });
  // Probes must not be held up by keep-alive connections at shutdown.
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    const flag = readiness ? '--health-probe-bind-address' : '--metrics-bind-address';
    server.once(
      'error',
      (error) =>
        reject(
          new Error(
            `cannot listen on ${
              formatAddress(address)
            }: ${error.message}. Pick a free address with ${flag}, or 0 to turn it off`,
          ),
        ),
    );
    server.listen(address.port, address.host || undefined, () => resolve());
  });
  return server;
}

export function boundPort(server: Server): number {
  return (server.address() as AddressInfo).port;
}

export function formatAddress({ host, port }: BindAddress): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}
