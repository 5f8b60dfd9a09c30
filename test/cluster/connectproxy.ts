// An HTTP CONNECT proxy on loopback, as a corporate egress proxy would be, or a SOCKS5 one (with a
// user and password, RFC 1929): it answers CONNECT for any host:port by tunnelling to one upstream
// (the test's API server), so a name that resolves nowhere still reaches it, and counts the
// tunnels and the targets asked for.
import { connect, createServer, type Server, type Socket } from 'node:net';

/** The user and password a SOCKS5 proxy wants. */
interface SocksUser {
  readonly user: string;
  readonly password: string;
}

export class ConnectProxy {
  readonly #server: Server;
  readonly #socks: SocksUser | undefined;
  readonly #sockets = new Set<Socket>();
  /** The host:port of every CONNECT, in order. */
  readonly targets: string[] = [];

  private constructor(server: Server, socks: SocksUser | undefined) {
    this.#server = server;
    this.#socks = socks;
  }

  /** Listens on a free loopback port; every tunnel goes to `upstream` (host:port). With `socks`, a SOCKS5 proxy that wants that user and password. */
  static async start(
    upstream: { host: string; port: number },
    socks?: SocksUser,
  ): Promise<ConnectProxy> {
    const server = createServer();
    const proxy = new ConnectProxy(server, socks);
    server.on('connection', (client) => (socks ? proxy.#socks5(client, upstream) : proxy.#accept(client, upstream)));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get url(): string {
    const address = this.#server.address();
    if (address === null || typeof address === 'string') throw new Error('proxy not listening');
    const socks = this.#socks;
    return socks
      ? `socks5://${encodeURIComponent(socks.user)}:${encodeURIComponent(socks.password)}@127.0.0.1:${address.port}`
      : `http://127.0.0.1:${address.port}`;
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
      this.#tunnel(client, upstream, target, Buffer.from('HTTP/1.1 200 Connection Established\r\n\r\n'), {
        rest: Buffer.from(head.slice(end + 4), 'latin1'),
      });
    };
    client.on('data', onData);
  }

  /** SOCKS5: a greeting, the user and password, a CONNECT (an IPv4 address or a host name), then the tunnel. */
  #socks5(client: Socket, upstream: { host: string; port: number }): void {
    this.#sockets.add(client);
    client.on('close', () => this.#sockets.delete(client));
    client.on('error', () => {});
    const socks = this.#socks;
    if (!socks) return;
    let data = Buffer.alloc(0);
    let stage: 'greeting' | 'auth' | 'request' = 'greeting';
    const onData = (chunk: Buffer): void => {
      data = Buffer.concat([data, chunk]);
      if (stage === 'greeting') {
        if (data.length < 2 || data.length < 2 + data[1]!) return;
        const methods = [...data.subarray(2, 2 + data[1]!)];
        data = data.subarray(2 + data[1]!);
        if (!methods.includes(2)) {
          client.end(Buffer.from([5, 0xff]));
          return;
        }
        client.write(Buffer.from([5, 2]));
        stage = 'auth';
      }
      if (stage === 'auth') {
        if (data.length < 2) return;
        const userEnd = 2 + data[1]!;
        if (data.length < userEnd + 1 || data.length < userEnd + 1 + data[userEnd]!) return;
        const user = data.subarray(2, userEnd).toString();
        const password = data.subarray(userEnd + 1, userEnd + 1 + data[userEnd]!).toString();
        data = data.subarray(userEnd + 1 + data[userEnd]!);
        if (user !== socks.user || password !== socks.password) {
          client.end(Buffer.from([1, 1]));
          return;
        }
        client.write(Buffer.from([1, 0]));
        stage = 'request';
      }
      if (data.length < 5) return;
      const type = data[3];
      const length = type === 1 ? 10 : type === 3 ? 7 + data[4]! : 22;
      if (data.length < length) return;
      const host = type === 1
        ? [...data.subarray(4, 8)].join('.')
        : type === 3
        ? data.subarray(5, 5 + data[4]!).toString()
        : 'ipv6';
      client.off('data', onData);
      const target = `${host}:${data.readUInt16BE(length - 2)}`;
      this.#tunnel(client, upstream, target, Buffer.from([5, 0, 0, 1, 0, 0, 0, 0, 0, 0]), {
        rest: data.subarray(length),
      });
    };
    client.on('data', onData);
  }

  /** Counts `target`, connects to `upstream`, answers `established` and pipes both ways (what came after the request first). */
  #tunnel(
    client: Socket,
    upstream: { host: string; port: number },
    target: string,
    established: Buffer,
    { rest }: { readonly rest: Buffer },
  ): void {
    this.targets.push(target);
    const tunnel = connect(upstream.port, upstream.host, () => {
      client.write(established);
      if (rest.length > 0) tunnel.write(rest);
      client.pipe(tunnel).pipe(client);
    });
    this.#sockets.add(tunnel);
    tunnel.on('close', () => this.#sockets.delete(tunnel));
    tunnel.on('error', () => client.destroy());
  }
}
