// The authenticated HTTP transport to the API server, on Node's own node:http(s) (transport.ts
// says why not undici or fetch): we control headers, streaming and timeouts (client-node's
// Watch/informer cannot ask for metadata-only objects). credentials.ts says who we are, and this
// file keeps a connection pool that matches: a new pool when the client certificate changes, one
// refresh and one retry on a 401. (Over 300 lines: the request, its retry and the pool's
// replacement share the one connection state.)
import { type Agent, type ClientRequest, type IncomingMessage, request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { Buffer } from 'node:buffer';
import { readBody, readBytes } from './body.ts';
import { connect } from './auth/credentials.ts';
import type { Credential, CredentialSource } from './auth/types.ts';
import { ApiError, ConnectionError, KubeConfigError, type Status } from '../apimachinery/errors.ts';
import { type Deadline, Deadlines } from './deadlines.ts';
import { retire, type Transport } from './transport.ts';

export interface ClientOptions {
  /** Path to a kubeconfig file; default: $KUBECONFIG, ~/.kube/config, then in-cluster. */
  readonly kubeconfig?: string | undefined;
  /** kubeconfig context to use instead of the current one. */
  readonly context?: string | undefined;
  readonly userAgent?: string | undefined;
  /** Act as this user (kubectl's --as), e.g. system:serviceaccount:labeller:labeller: needs the right to impersonate. */
  readonly impersonate?: string | undefined;
}

export interface RequestOptions {
  /** The query's parameters (undefined ones left out), or the query string made already (`?a=b`). */
  readonly query?: Readonly<Record<string, string | number | boolean | undefined>> | string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string;
  readonly signal?: AbortSignal | undefined;
  /** For json(): give up after this long (default 60 s); a hung request must not block a worker forever. */
  readonly timeoutMs?: number;
  /** For json(): reads a small answer from its bytes, undecoded (default: its text, with JSON.parse). */
  readonly decode?: (body: Buffer) => unknown;
}

/** Observes every request, for metrics (rest_client_requests_total) and tests. */
export type RequestObserver = (method: string, status: number | 'error', seconds: number) => void;

export class KubeClient {
  readonly server: string;
  readonly context: string;
  /** The namespace of the kubeconfig context (or the pod's own namespace in-cluster), if any. */
  readonly defaultNamespace: string | undefined;
  readonly #credentials: CredentialSource;
  readonly #send: typeof httpRequest;
  /**
   * Where requests go, parsed once: a URL string per request would be parsed again each time, and
   * headers as an object set one by one, each checked (together 5–7 % of a request's CPU).
   */
  readonly #target: {
    readonly protocol: string;
    readonly hostname: string;
    readonly port: string;
    readonly host: string;
    readonly prefix: string;
  };
  #transport: Transport;
  #pool: Agent;
  #resetAt = 0;
  readonly #deadlines = new Deadlines();
  #baseHeaders:
    | {
      readonly credential: Credential;
      readonly names: Readonly<Record<string, string>>;
      readonly flat: readonly string[];
    }
    | undefined;
  /** Headers of every request: the user agent, and who to act as. */
  readonly #fixed: Readonly<Record<string, string>>;
  readonly #observers: RequestObserver[] = [];

  private constructor(
    server: string,
    context: string,
    namespace: string | undefined,
    credentials: CredentialSource,
    transport: Transport,
    fixed: Readonly<Record<string, string>>,
  ) {
    this.server = server;
    this.context = context;
    this.defaultNamespace = namespace;
    this.#credentials = credentials;
    this.#send = server.startsWith('https:') ? httpsRequest : httpRequest;
    const url = new URL(server);
    this.#target = {
      protocol: url.protocol,
      // node:http takes an IPv6 address without its brackets.
      hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: url.port,
      host: url.host,
      // What server + path gave: a server with a path (behind a proxy) prefixes every request's.
      prefix: server.slice(url.origin.length),
    };
    this.#transport = transport;
    this.#pool = transport.pool();
    this.#fixed = fixed;
  }

  /**
   * Finds the cluster and identity (credentials.ts) and fetches the first credential, so a
   * broken kubeconfig or plugin is a KubeConfigError here, not a failed request later.
   */
  static async load(options: ClientOptions = {}): Promise<KubeClient> {
    const connection = await connect(options);
    const first = await connection.credentials.current().catch(rethrowAsConfig);
    return new KubeClient(
      connection.server,
      connection.context,
      connection.namespace,
      connection.credentials,
      first.transport,
      {
        'user-agent': options.userAgent ?? 'labeller',
        // The API server adds a ServiceAccount's groups when its user name is given alone.
        ...(options.impersonate ? { 'impersonate-user': options.impersonate } : {}),
      },
    );
  }

  observe(observer: RequestObserver): void {
    this.#observers.push(observer);
  }

  /**
   * Sends one request and resolves with the response once its headers are in (a watch's body
   * then streams). Non-2xx answers throw ApiError, unreachable servers ConnectionError; `signal`
   * ends the request and its body whenever it aborts.
   */
  request(method: string, path: string, options: RequestOptions = {}): Promise<IncomingMessage> {
    return this.#request(method, path, options, undefined);
  }

  /** request(), ended by `deadline` as well (json()'s). */
  async #request(
    method: string,
    path: string,
    options: RequestOptions,
    deadline: Deadline | undefined,
  ): Promise<IncomingMessage> {
    const target = this.#target.prefix + path + queryString(options.query);
    const ready = this.#credentials.ready();
    const credential = ready ? this.#use(ready) : await this.#credential();
    let response = await this.#exchange(method, path, target, credential, options, deadline);
    if (response.statusCode === 401) {
      const fresh = await this.#credentials.refresh(credential).catch(rethrowAsConfig);
      if (fresh !== credential) {
        response.resume(); // read and dropped, so the connection can serve the retry
        response = await this.#exchange(method, path, target, this.#use(fresh), options, deadline);
      }
    }
    const status = response.statusCode ?? 0;
    if (status < 200 || status > 299) {
      const text = await readBody(response).catch(() => '');
      const retryAfter = response.headers['retry-after'];
      throw new ApiError(method, path, status, parseStatus(text), retryAfter);
    }
    return response;
  }

  /** One request whose JSON answer is read whole, within `timeoutMs`; errors as in request(). */
  async json<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    // Released once the answer is read. AbortSignal.timeout (and AbortSignal.any over it) would
    // keep the signal, its timer and the request's abort listener, and through them the whole
    // response, alive for the full timeout after every request.
    const deadline = this.#deadlines.start(options.timeoutMs ?? 60_000);
    try {
      const response = await this.#request(method, path, options, deadline);
      try {
        const { decode } = options;
        return (decode ? decode(await readBytes(response)) : JSON.parse(await readBody(response))) as T;
      } catch (error) {
        // An answer that could not be read whole: a timeout or a dropped connection, or not JSON.
        throw error instanceof SyntaxError ? error : this.#failed(method, path, options.signal, deadline, error);
      }
    } finally {
      this.#deadlines.end(deadline);
    }
  }

  /** One attempt with `credential`, whatever its status; unreachable servers throw ConnectionError. */
  #exchange(
    method: string,
    path: string,
    target: string,
    credential: Credential,
    options: RequestOptions,
    deadline: Deadline | undefined,
    retried = false,
  ): Promise<IncomingMessage> {
    const started = performance.now();
    const { body, signal } = options;
    return new Promise<IncomingMessage>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      if (deadline?.expired) return reject(this.#failed(method, path, signal, deadline, undefined));
      let sent: ClientRequest;
      try {
        const { protocol, hostname, port } = this.#target;
        sent = this.#send({
          protocol,
          hostname,
          port,
          path: target,
          method,
          headers: this.#headers(credential, options, body),
          agent: this.#pool,
        });
      } catch (error) {
        return reject(new ConnectionError(this.server, error));
      }
      // The abort and the deadline reach the request, and through it the response's body, until
      // the exchange ends: the request's 'close' comes when the body has been read or the
      // connection dropped.
      const abort = (): void => void sent.destroy(signal?.reason instanceof Error ? signal.reason : undefined);
      signal?.addEventListener('abort', abort, ONCE);
      if (deadline) deadline.request = sent;
      if (signal || deadline) {
        sent.once('close', () => {
          signal?.removeEventListener('abort', abort);
          if (deadline?.request === sent) deadline.request = undefined;
        });
      }
      let answered = false;
      sent.once('response', (response) => {
        answered = true;
        this.#notify(method, response.statusCode ?? 0, started);
        // A connection that drops before the caller reads the body must not be an uncaught
        // 'error': the reader's own listener (readBody, the watch stream) still sees it.
        response.on('error', () => {});
        resolve(response);
      });
      sent.on('error', (error: NodeJS.ErrnoException) => {
        // After the answer began, the failure belongs to its body, whose reader sees it.
        if (answered) return;
        this.#notify(method, 'error', started);
        // A kept-alive connection the server closed as we reused it (reset, or the write hit a
        // closed pipe): nothing was answered, so send again once on a fresh one, as Go's
        // transport does (not a POST, which may have arrived). Node documents this race.
        if (
          sent.reusedSocket && (error.code === 'ECONNRESET' || error.code === 'EPIPE') && method !== 'POST' &&
          !retried && !signal?.aborted && !deadline?.expired
        ) {
          resolve(this.#exchange(method, path, target, credential, options, deadline, true));
          return;
        }
        reject(this.#failed(method, path, signal, deadline, error));
      });
      sent.end(body);
    });
  }

  /**
   * Replaces the connection pool, so no new request lands on an idle connection that died
   * silently (a load balancer dropping its flows). Called when a watch goes silent; at most
   * once a second however many watches notice. Requests still running on the old pool finish
   * there.
   */
  async resetConnections(): Promise<void> {
    if (Date.now() - this.#resetAt < 1000) return;
    this.#resetAt = Date.now();
    this.#swapPool(this.#transport);
  }

  /** Drops open connections: called on the way out, after the work that mattered has drained. */
  async close(): Promise<void> {
    retire(this.#pool);
    this.#pool.destroy();
  }

  /** The request's headers as node:http takes them whole, names and values in turn (it adds no Host then). */
  #headers(credential: Credential, options: RequestOptions, body: string | undefined): string[] {
    // The headers every request with this credential sends, made once for it.
    let base = this.#baseHeaders;
    if (base?.credential !== credential) {
      const names: Record<string, string> = { host: this.#target.host, ...credential.headers, ...this.#fixed };
      const flat: string[] = [];
      for (const name in names) flat.push(name, names[name]!);
      base = this.#baseHeaders = { credential, names, flat };
    }
    const flat = base.flat.slice();
    if (body !== undefined) flat.push('content-length', String(Buffer.byteLength(body)));
    for (const name in options.headers) {
      // A request's own value of a header sent with every request (none of labeller's do) replaces it.
      if (Object.hasOwn(base.names, name) || name === 'content-length') return this.#merged(base.names, options, body);
      flat.push(name, options.headers[name]!);
    }
    return flat;
  }

  #merged(names: Readonly<Record<string, string>>, options: RequestOptions, body: string | undefined): string[] {
    const headers: Record<string, string> = {
      ...names,
      ...(body === undefined ? {} : { 'content-length': String(Buffer.byteLength(body)) }),
      ...options.headers,
    };
    const flat: string[] = [];
    for (const name in headers) flat.push(name, headers[name]!);
    return flat;
  }

  /** What a request that got no answer throws: ConnectionError, or the reason it was aborted for. */
  #failed(
    method: string,
    path: string,
    signal: AbortSignal | undefined,
    deadline: Deadline | undefined,
    error: unknown,
  ): unknown {
    if (deadline?.expired) return new ConnectionError(this.server, new Error(`${method} ${path}: no answer in time`));
    if (signal?.aborted) return signal.reason;
    return new ConnectionError(this.server, error);
  }

  #notify(method: string, status: number | 'error', started: number): void {
    const seconds = (performance.now() - started) / 1000;
    for (const observer of this.#observers) observer(method, status, seconds);
  }

  /** The credential for the next request, on a pool made for it. */
  async #credential(): Promise<Credential> {
    return this.#use(await this.#credentials.current().catch(rethrowAsConfig));
  }

  /** Makes the pool match `credential` (a new client certificate needs new connections). */
  #use(credential: Credential): Credential {
    if (credential.transport !== this.#transport) this.#swapPool(credential.transport);
    return credential;
  }

  /** New requests go to a new pool; requests still running on the old one finish there, then it closes. */
  #swapPool(transport: Transport): void {
    const old = this.#pool;
    this.#transport = transport;
    this.#pool = transport.pool();
    if (old !== this.#pool) retire(old);
  }
}

/** Listener options of every request's abort: one object, not one per request. */
const ONCE = Object.freeze({ once: true });

function rethrowAsConfig(error: unknown): never {
  throw error instanceof KubeConfigError
    ? error
    : new KubeConfigError(`cannot get credentials: ${error instanceof Error ? error.message : String(error)}`);
}

/**
 * `?a=b&c=d` of the values set, each encoded as a URI component (URLSearchParams would write a
 * space as `+`, which the API server reads the same way, but costs an object per request: one
 * for every PATCH).
 */
export function queryString(query: RequestOptions['query']): string {
  if (!query) return '';
  if (typeof query === 'string') return query;
  let s = '';
  for (const key in query) {
    const value = query[key];
    if (value === undefined) continue;
    s += `${s ? '&' : '?'}${encodeURIComponent(key)}=${encodeURIComponent(String(value))}`;
  }
  return s;
}

function parseStatus(text: string): Status {
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === 'object') return parsed as Status;
  } catch {
    // Not JSON (a proxy's error page): keep the text as the message.
  }
  return text ? { message: text.slice(0, 500) } : {};
}
