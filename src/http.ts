// The probe and metrics endpoints: /healthz (the process and its event loop answer),
// /readyz (every controller has its first list and a live watch; a standby is ready too), /metrics.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export interface Readiness {
  /** Why the process is not ready, one line each; none when it is. */
  problems(): readonly string[];
}

export async function serveHttp(port: number, readiness: Readiness, registry: Registry): Promise<Server> {
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
        return reply(200, 'ok\n');
      case '/readyz': {
        const problems = readiness.problems();
        return problems.length === 0 ? reply(200, 'ok\n') : reply(503, `not ready:\n${problems.map((p) => `- ${p}\n`).join('')}`);
      }
      case '/metrics':
        registry.metrics().then(
          (text) => reply(200, text, registry.contentType),
          (error: unknown) => reply(500, `${String(error)}\n`),
        );
        return;
      default:
        return reply(404, 'not found: try /healthz, /readyz or /metrics\n');
    }
  });
  // Probes must not be held up by keep-alive connections at shutdown.
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error) => reject(new Error(`cannot serve /healthz, /readyz and /metrics on port ${port}: ${error.message}. Pick a free --http-port, or 0 to turn the server off`)));
    server.listen(port, () => resolve());
  });
  return server;
}

export function boundPort(server: Server): number {
  return (server.address() as AddressInfo).port;
}
