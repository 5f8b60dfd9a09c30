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
  /**
   * When (performance.now()) the last chunk each way is forwarded, once delay() took the pair off
   * its pipes: later chunks go no sooner, so a delay that shrinks never lets bytes overtake (TLS
   * records out of order fail as "bad record mac").
   */
  due?: [toUpstream: number, toClient: number];
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
      const at = Math.max(performance.now() + this.#delayMs, ...(pair.due ?? []));
      if (pair.due) setTimeout(destroy, Math.max(0, at - performance.now()));
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

  /**
   * Forwards each chunk `#delayMs` after it arrived instead of at once, and never before the chunk
   * ahead of it (one queue each way, drained in order). Once per pair: the delay is read per chunk,
   * so a later delay() (0 included) needs no second listener, which would write every chunk twice.
   */
  #delayed(pair: Pair): void {
    if (pair.due) return;
    const due: [number, number] = pair.due = [0, 0];
    const ways = [[pair.client, pair.upstream], [pair.upstream, pair.client]] as const;
    for (const [way, [from, to]] of ways.entries()) {
      const queue: { readonly at: number; readonly chunk: Buffer }[] = [];
      const drain = (): void => {
        while (queue.length > 0 && queue[0]!.at <= performance.now()) {
          const { chunk } = queue.shift()!;
          if (!to.destroyed) to.write(chunk);
        }
        if (queue.length > 0) setTimeout(drain, Math.max(0, queue[0]!.at - performance.now()));
      };
      from.unpipe(to);
      from.on('data', (chunk: Buffer) => {
        due[way] = Math.max(performance.now() + this.#delayMs, due[way]!);
        queue.push({ at: due[way]!, chunk });
        if (queue.length === 1) setTimeout(drain, Math.max(0, due[way]! - performance.now()));
      });
      // unpipe() may have stopped the flow; a frozen connection stays frozen.
      if (!this.#paused && !pair.frozen) from.resume();
    }
  }
}
