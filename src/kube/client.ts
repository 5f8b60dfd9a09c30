// The authenticated HTTP transport to the API server. Requests go through undici (fetch for
// streams, its request API for whole JSON answers) so we control headers, streaming and timeouts (client-node's Watch/informer cannot ask for
// metadata-only objects); credentials.ts says who we are, and this file keeps a connection pool
// that matches: a new pool when the client certificate changes, one refresh and one retry on a 401.
import { type Dispatcher, fetch, request as undiciRequest, type Response } from 'undici';
import { connect, type Credential, type CredentialSource, type Transport } from './credentials.ts';
import { ApiError, ConnectionError, KubeConfigError, type Status } from './errors.ts';

export interface ClientOptions {
  /** Path to a kubeconfig file; default: $KUBECONFIG, ~/.kube/config, then in-cluster. */
  readonly kubeconfig?: string | undefined;
  /** kubeconfig context to use instead of the current one. */
  readonly context?: string | undefined;
  readonly userAgent?: string | undefined;
}

export interface RequestOptions {
  readonly query?: Readonly<Record<string, string | number | boolean | undefined>>;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string;
  readonly signal?: AbortSignal | undefined;
  /** For json(): give up after this long (default 60 s); a hung request must not block a worker forever. */
  readonly timeoutMs?: number;
}

/** Observes every request, for metrics (rest_client_requests_total) and tests. */
export type RequestObserver = (method: string, status: number | 'error', seconds: number) => void;

export class KubeClient {
  readonly server: string;
  readonly context: string;
  /** The namespace of the kubeconfig context (or the pod's own namespace in-cluster), if any. */
  readonly defaultNamespace: string | undefined;
  readonly #credentials: CredentialSource;
  #transport: Transport;
  #dispatcher: Dispatcher;
  #resetAt = 0;
  readonly #userAgent: string;
  readonly #observers: RequestObserver[] = [];

  private constructor(
    server: string,
    context: string,
    namespace: string | undefined,
    credentials: CredentialSource,
    transport: Transport,
    userAgent: string,
  ) {
    this.server = server;
    this.context = context;
    this.defaultNamespace = namespace;
    this.#credentials = credentials;
    this.#transport = transport;
    this.#dispatcher = transport.pool();
    this.#userAgent = userAgent;
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
      options.userAgent ?? 'labeller',
    );
  }

  observe(observer: RequestObserver): void {
    this.#observers.push(observer);
  }

  /**
   * Sends one request. Non-2xx answers throw ApiError, unreachable servers ConnectionError;
   * on success the caller owns the response body.
   */
  async request(method: string, path: string, options: RequestOptions = {}): Promise<Response> {
    const url = this.server + path + queryString(options.query);
    const credential = await this.#credential();
    let response = await this.#send(method, path, url, credential, options);
    if (response.status === 401) {
      response = await this.#retryUnauthorized(method, path, url, credential, options, response);
    }
    if (!response.ok) {
      const text = await response.text();
      throw new ApiError(method, path, response.status, parseStatus(text), response.headers.get('retry-after'));
    }
    return response;
  }

  /** One attempt with `credential`, whatever its status; unreachable servers throw ConnectionError. */
  async #send(
    method: string,
    path: string,
    url: string,
    credential: Credential,
    options: RequestOptions,
  ): Promise<Response> {
    const started = performance.now();
    let response: Response;
    try {
      response = await fetch(url, {
        method,
        headers: this.#headers(credential, options),
        body: options.body ?? null,
        signal: options.signal ?? null,
        dispatcher: this.#dispatcher,
      });
    } catch (error) {
      this.#notify(method, 'error', started);
      throw this.#failed(method, path, options.signal, error);
    }
    this.#notify(method, response.status, started);
    return response;
  }

  /**
   * After a 401, as client-go does: one credential refresh (shared by every request refused with
   * the same credential) and one retry; the 401 stands when nothing changed or the retry fails too.
   */
  async #retryUnauthorized(
    method: string,
    path: string,
    url: string,
    rejected: Credential,
    options: RequestOptions,
    response: Response,
  ): Promise<Response> {
    const fresh = await this.#credentials.refresh(rejected).catch(rethrowAsConfig);
    if (fresh === rejected) return response;
    await response.body?.cancel();
    return this.#send(method, path, url, this.#use(fresh), options);
  }

  /** One request whose JSON answer is read whole, within `timeoutMs`; a 401 as in request(). */
  async json<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    // One controller and one timer, both released once the answer is read. AbortSignal.timeout
    // (and AbortSignal.any over it) would keep the signal, its timer and the request's abort
    // listener, and through them the whole response, alive for the full timeout after every request.
    const timeoutMs = options.timeoutMs ?? 60_000;
    const controller = new AbortController();
    const timer = setTimeout(
      () => controller.abort(new DOMException(`no answer in ${timeoutMs} ms`, 'TimeoutError')),
      timeoutMs,
    );
    const outer = options.signal;
    const forward = (): void => controller.abort(outer?.reason);
    if (outer?.aborted) forward();
    else outer?.addEventListener('abort', forward, { once: true });
    const attempt = { ...options, signal: controller.signal };
    const url = this.server + path + queryString(options.query);
    try {
      const credential = await this.#credential();
      let answer = await this.#exchange(method, path, url, credential, attempt);
      if (answer.statusCode === 401) {
        const fresh = await this.#credentials.refresh(credential).catch(rethrowAsConfig);
        if (fresh !== credential) {
          await answer.body.dump();
          answer = await this.#exchange(method, path, url, this.#use(fresh), attempt);
        }
      }
      const { statusCode, headers, body } = answer;
      if (statusCode < 200 || statusCode > 299) {
        const retryAfter = headers['retry-after'];
        throw new ApiError(
          method,
          path,
          statusCode,
          parseStatus(await body.text()),
          Array.isArray(retryAfter) ? retryAfter[0] : retryAfter,
        );
      }
      try {
        return (await body.json()) as T;
      } catch (error) {
        // An answer that could not be read whole: a timeout or a dropped connection, or not JSON.
        throw controller.signal.aborted ? this.#failed(method, path, controller.signal, error) : error;
      }
    } finally {
      clearTimeout(timer);
      outer?.removeEventListener('abort', forward);
    }
  }

  /**
   * One attempt of json(), whatever its status, over undici's request API rather than fetch: a
   * whole answer needs no WHATWG streams, Headers or Response objects, which cost about 0.25 ms
   * of CPU per request (bench/README.md).
   */
  async #exchange(
    method: string,
    path: string,
    url: string,
    credential: Credential,
    options: RequestOptions,
  ): Promise<Dispatcher.ResponseData> {
    const started = performance.now();
    let answer: Dispatcher.ResponseData;
    try {
      const sent = undiciRequest(url, {
        method: method as Dispatcher.HttpMethod,
        headers: this.#headers(credential, options),
        body: options.body ?? null,
        signal: options.signal ?? null,
        dispatcher: this.#dispatcher,
      });
      answer = await (options.signal ? untilAborted(sent, options.signal) : sent);
    } catch (error) {
      this.#notify(method, 'error', started);
      throw this.#failed(method, path, options.signal, error);
    }
    this.#notify(method, answer.statusCode, started);
    return answer;
  }

  /**
   * Replaces the connection pool, so no new request lands on an idle connection that died
   * silently (a load balancer dropping its flows). Called when a watch goes silent; at most
   * once a second however many watches notice. Requests still running on the old pool finish
   * or time out there.
   */
  async resetConnections(): Promise<void> {
    if (Date.now() - this.#resetAt < 1000) return;
    this.#resetAt = Date.now();
    this.#swapPool(this.#transport);
  }

  /** Drops open connections: called on the way out, after the work that mattered has drained. */
  async close(): Promise<void> {
    await this.#dispatcher.destroy();
  }

  #headers(credential: Credential, options: RequestOptions): Record<string, string> {
    return { ...credential.headers, 'user-agent': this.#userAgent, ...options.headers };
  }

  /** What a request that got no answer throws: ConnectionError, or the reason it was aborted for. */
  #failed(method: string, path: string, signal: AbortSignal | undefined, error: unknown): unknown {
    const reason: unknown = signal?.reason;
    if (reason instanceof DOMException && reason.name === 'TimeoutError') {
      return new ConnectionError(this.server, new Error(`${method} ${path}: no answer in time`));
    }
    if (signal?.aborted) return reason;
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
    const old = this.#dispatcher;
    this.#transport = transport;
    this.#dispatcher = transport.pool();
    if (old !== this.#dispatcher) old.close().catch(() => {});
  }
}

/**
 * `promise`, or the abort's reason as soon as `signal` aborts. undici's request API honours an
 * abort only once it has a connection: one still connecting (a TLS handshake through a proxy that
 * forwards nothing) would hold a shutdown until the connect timeout.
 */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  promise.catch(() => {});
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const abort = (): void => reject(signal.reason);
    signal.addEventListener('abort', abort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', abort));
  });
}

function rethrowAsConfig(error: unknown): never {
  throw error instanceof KubeConfigError
    ? error
    : new KubeConfigError(`cannot get credentials: ${error instanceof Error ? error.message : String(error)}`);
}

function queryString(query: RequestOptions['query']): string {
  if (!query) return '';
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined) params.set(key, String(value));
  }
  const s = params.toString();
  return s ? `?${s}` : '';
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
