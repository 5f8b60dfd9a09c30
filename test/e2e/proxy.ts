// A TCP proxy in front of the API server that a test can freeze: while paused it keeps every
// connection open but forwards nothing (it holds the bytes back until resumed), like a load
// balancer that silently stops passing traffic.
import { connect, createServer, type Server, type Socket } from 'node:net';

export class StallingProxy {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  /** Bytes held back while paused, with the socket to deliver them to. */
  readonly #held: [Socket, Buffer][] = [];
  #paused = false;

  private constructor(server: Server) {
    this.#server = server;
  }

  /** Listens on a free loopback port and forwards to `target` (an https:// URL). */
  static async start(target: string): Promise<StallingProxy> {
    const { hostname, port } = new URL(target);
    const server = createServer();
    const proxy = new StallingProxy(server);
    server.on('connection', (client) => proxy.#pipe(client, connect(Number(port), hostname)));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get url(): string {
    const address = this.#server.address();
    if (address === null || typeof address === 'string') throw new Error('proxy is not listening');
    return `https://127.0.0.1:${address.port}`;
  }

  pause(): void {
    this.#paused = true;
  }

  resume(): void {
    this.#paused = false;
    for (const [to, chunk] of this.#held.splice(0)) if (!to.destroyed) to.write(chunk);
  }

  /** Closes every open connection (both ends), as a restarting load balancer would. */
  dropConnections(): void {
    for (const socket of this.#sockets) socket.destroy();
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise((resolve) => this.#server.close(resolve));
  }

  #pipe(client: Socket, upstream: Socket): void {
    for (const socket of [client, upstream]) {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
      socket.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    const forward = (to: Socket) => (chunk: Buffer) => {
      if (this.#paused) this.#held.push([to, chunk]);
      else to.write(chunk);
    };
    client.on('data', forward(upstream));
    upstream.on('data', forward(client));
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
  }
}
