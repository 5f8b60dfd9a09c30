// An HTTP CONNECT proxy on loopback, as a corporate egress proxy would be: it answers CONNECT for
// any host:port by tunnelling to one upstream (the test's API server), so a name that resolves
// nowhere still reaches it, and counts the tunnels and the targets asked for.
import { connect, createServer, type Server, type Socket } from 'node:net';

export class ConnectProxy {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  /** The host:port of every CONNECT, in order. */
  readonly targets: string[] = [];

  private constructor(server: Server) {
    this.#server = server;
  }

  /** Listens on a free loopback port; every tunnel goes to `upstream` (host:port). */
  static async start(upstream: { host: string; port: number }): Promise<ConnectProxy> {
    const server = createServer();
    const proxy = new ConnectProxy(server);
    server.on('connection', (client) => proxy.#accept(client, upstream));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get url(): string {
    const address = this.#server.address();
    if (address === null || typeof address === 'string') throw new Error('proxy not listening');
    return `http://127.0.0.1:${address.port}`;
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #accept(client: Socket, upstream: { host: string; port: number }): void {
    this.#sockets.add(client);
    client.on('close', () => this.#sockets.delete(client));
    client.on('error', () => {});
    let head = '';
    const onData = (chunk: Buffer): void => {
      head += chunk.toString('latin1');
      const end = head.indexOf('\r\n\r\n');
      if (end === -1) return;
      client.off('data', onData);
      const target = /^CONNECT (\S+) HTTP\/1\.[01]\r\n/.exec(head)?.[1];
      if (!target) {
        client.end('HTTP/1.1 405 Method Not Allowed\r\n\r\n');
        return;
      }
      this.targets.push(target);
      const tunnel = connect(upstream.port, upstream.host, () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        const rest = Buffer.from(head.slice(end + 4), 'latin1');
        if (rest.length > 0) tunnel.write(rest);
        client.pipe(tunnel).pipe(client);
      });
      this.#sockets.add(tunnel);
      tunnel.on('close', () => this.#sockets.delete(tunnel));
      tunnel.on('error', () => client.destroy());
    };
    client.on('data', onData);
  }
}
