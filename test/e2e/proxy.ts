// A TCP proxy in front of the API server that a test can freeze: while paused it keeps every
// connection open but forwards nothing, like a load balancer that silently drops traffic.
import { connect, createServer, type Server, type Socket } from 'node:net';

export class StallingProxy {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
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
    for (const socket of this.#sockets) socket.pause();
  }

  resume(): void {
    this.#paused = false;
    for (const socket of this.#sockets) socket.resume();
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
      if (this.#paused) socket.pause();
    }
    client.pipe(upstream);
    upstream.pipe(client);
  }
}
