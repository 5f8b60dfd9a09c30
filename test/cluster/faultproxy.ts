// A TCP proxy in front of the API server for fault injection (TLS passes through untouched):
//   pause()          every connection, old and new, stays open but forwards nothing (a frozen LB);
//   freezeExisting() the open connections go silent, new ones work (an LB that lost its flows);
//   drop()           closes every open connection (an LB or API server restart);
//   refuse(true)     new connections are closed at once (nothing listening behind the LB);
//   delay(ms)        every byte, both ways, on open connections and new ones, arrives `ms` late,
//                    closes too: what was sent before a client gave up still reaches the server.
import { connect, createServer, type Server, type Socket } from 'node:net';

interface Pair {
  readonly client: Socket;
  readonly upstream: Socket;
  frozen: boolean;
}

export class FaultProxy {
  readonly #server: Server;
  readonly #pairs = new Set<Pair>();
  #paused = false;
  #refusing = false;
  #delayMs = 0;
  /** Connections accepted so far. */
  connections = 0;

  private constructor(server: Server) {
    this.#server = server;
  }

  /** Listens on a free loopback port and forwards to `target` (an https:// URL). */
  static async start(target: string): Promise<FaultProxy> {
    const server = createServer();
    const proxy = new FaultProxy(server);
    proxy.#target = new URL(target);
    server.on('connection', (client) => proxy.#accept(client));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  #target!: URL;

  get url(): string {
    const address = this.#server.address();
    if (address === null || typeof address === 'string') throw new Error('proxy is not listening');
    return `https://127.0.0.1:${address.port}`;
  }

  /** Open connections. */
  get open(): number {
    return this.#pairs.size;
  }

  pause(): void {
    this.#paused = true;
    for (const pair of this.#pairs) this.#freeze(pair);
  }

  /** Ends pause(): every connection that is not frozen for good forwards again. */
  resume(): void {
    this.#paused = false;
    for (const pair of this.#pairs) {
      if (pair.frozen) continue;
      pair.client.resume();
      pair.upstream.resume();
    }
  }

  /** The connections open now go silent for good; new ones are forwarded. */
  freezeExisting(): void {
    for (const pair of this.#pairs) {
      this.#freeze(pair);
      pair.frozen = true;
    }
  }

  /** Closes every open connection (frozen ones too). */
  drop(): void {
    for (const pair of this.#pairs) {
      pair.client.destroy();
      pair.upstream.destroy();
    }
  }

  refuse(refusing: boolean): void {
    this.#refusing = refusing;
  }

  /** From now on every byte and every close takes `ms` longer, in order (a slow network path). */
  delay(ms: number): void {
    this.#delayMs = ms;
    for (const pair of this.#pairs) this.#delayed(pair);
  }

  async close(): Promise<void> {
    this.drop();
    await new Promise((resolve) => this.#server.close(resolve));
  }

  #freeze(pair: Pair): void {
    pair.client.pause();
    pair.upstream.pause();
  }

  #accept(client: Socket): void {
    if (this.#refusing) {
      client.destroy();
      return;
    }
    this.connections++;
    const upstream = connect(Number(this.#target.port), this.#target.hostname);
    const pair: Pair = { client, upstream, frozen: false };
    this.#pairs.add(pair);
    const close = (): void => {
      const destroy = (): void => {
        client.destroy();
        upstream.destroy();
        this.#pairs.delete(pair);
      };
      // Behind a delay, bytes still on their way arrive before the close does.
      if (this.#delayMs > 0) setTimeout(destroy, this.#delayMs);
      else destroy();
    };
    for (const socket of [client, upstream]) {
      socket.on('close', close);
      socket.on('error', close);
    }
    client.pipe(upstream);
    upstream.pipe(client);
    // After pipe(), which resumes its source.
    if (this.#paused) this.#freeze(pair);
    if (this.#delayMs > 0) this.#delayed(pair);
  }

  /** Forwards each chunk `#delayMs` after it arrived instead of at once (equal delays keep the order). */
  #delayed(pair: Pair): void {
    for (const [from, to] of [[pair.client, pair.upstream], [pair.upstream, pair.client]] as const) {
      from.unpipe(to);
      from.on('data', (chunk: Buffer) => {
        setTimeout(() => {
          if (!to.destroyed) to.write(chunk);
        }, this.#delayMs);
      });
      // unpipe() may have stopped the flow; a frozen connection stays frozen.
      if (!this.#paused && !pair.frozen) from.resume();
    }
  }
}
