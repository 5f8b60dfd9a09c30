// The authenticated HTTP transport to the API server. @kubernetes/client-node is used only to
// load kubeconfig and authenticate; requests go through undici's fetch so we control headers,
// streaming and timeouts (the client's own Watch/informer cannot ask for metadata-only objects).
import type { RequestOptions as HttpsOptions } from 'node:https';
import { KubeConfig, RequestContext } from '@kubernetes/client-node';
import { Agent, fetch, request as undiciRequest, type Dispatcher, type Response } from 'undici';
import { ApiError, ConnectionError, type Status } from './errors.ts';

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

/** Credentials can rotate (exec plugins, projected service-account tokens): re-read them this often. */
const AUTH_REFRESH_MS = 60_000;

export class KubeConfigError extends Error {
  override readonly name = 'KubeConfigError';
}

export class KubeClient {
  readonly server: string;
  readonly context: string;
  /** The namespace of the kubeconfig context (or the pod's own namespace in-cluster), if any. */
  readonly defaultNamespace: string | undefined;
  readonly #kc: KubeConfig;
  #dispatcher: Dispatcher | undefined;
  #resetAt = 0;
  readonly #userAgent: string;
  readonly #observers: RequestObserver[] = [];
  #headers: Record<string, string>;
  #headersAt: number;

  private constructor(kc: KubeConfig, server: string, auth: Auth, userAgent: string, defaultNamespace: string | undefined) {
    this.#kc = kc;
    this.server = server;
    this.context = kc.getCurrentContext();
    this.defaultNamespace = defaultNamespace;
    this.#dispatcher = auth.dispatcher;
    this.#headers = auth.headers;
    this.#headersAt = Date.now();
    this.#userAgent = userAgent;
  }

  static async load(options: ClientOptions = {}): Promise<KubeClient> {
    const kc = new KubeConfig();
    try {
      if (options.kubeconfig) kc.loadFromFile(options.kubeconfig);
      else kc.loadFromDefault();
    } catch (error) {
      throw new KubeConfigError(`cannot load kubeconfig${options.kubeconfig ? ` ${options.kubeconfig}` : ''}: ${error instanceof Error ? error.message : String(error)}. Pass --kubeconfig with a valid file`);
    }
    if (options.context) {
      if (!kc.getContextObject(options.context)) {
        const known = kc.getContexts().map((c) => c.name).join(', ') || 'none';
        throw new KubeConfigError(`context "${options.context}" is not in the kubeconfig (contexts: ${known}). Pass one of them with --context`);
      }
      kc.setCurrentContext(options.context);
    }
    const cluster = kc.getCurrentCluster();
    if (!cluster) {
      throw new KubeConfigError('no cluster configured: the kubeconfig has no current context. Pass --kubeconfig and --context, or run inside a cluster');
    }
    const auth = await authenticate(kc, cluster.server);
    const namespace = kc.getContextObject(kc.getCurrentContext())?.namespace;
    return new KubeClient(kc, cluster.server.replace(/\/+$/, ''), auth, options.userAgent ?? 'labeller', namespace);
  }

  observe(observer: RequestObserver): void {
    this.#observers.push(observer);
  }

  /**
   * Sends one request. Non-2xx answers throw ApiError, unreachable servers ConnectionError;
   * on success the caller owns the response body.
   */
  async request(method: string, path: string, options: RequestOptions = {}): Promise<Response> {
    const started = performance.now();
    let response: Response;
    try {
      response = await fetch(this.server + path + queryString(options.query), {
        method,
        headers: await this.#headersFor(options),
        body: options.body ?? null,
        signal: options.signal ?? null,
        ...(this.#dispatcher ? { dispatcher: this.#dispatcher } : {}),
      });
    } catch (error) {
      this.#notify(method, 'error', started);
      throw this.#failed(method, path, options.signal, error);
    }
    this.#notify(method, response.status, started);
    if (!response.ok) throw new ApiError(method, path, response.status, parseStatus(await response.text()), response.headers.get('retry-after'));
    return response;
  }

  /** One request whose JSON answer is read whole, within `timeoutMs`. */
  async json<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    // One controller and one timer, both released once the answer is read. AbortSignal.timeout
    // (and AbortSignal.any over it) would keep the signal, its timer and fetch's abort listener,
    // and through that the whole response, alive for the full timeout after every request.
    const timeoutMs = options.timeoutMs ?? 60_000;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new DOMException(`no answer in ${timeoutMs} ms`, 'TimeoutError')), timeoutMs);
    const outer = options.signal;
    const forward = (): void => controller.abort(outer?.reason);
    if (outer?.aborted) forward();
    else outer?.addEventListener('abort', forward, { once: true });
    const started = performance.now();
    let answered = false;
    try {
      // undici's request API rather than fetch: a whole answer needs no WHATWG streams, Headers
      // or Response objects, which cost about 0.25 ms of CPU per request (bench/README.md).
      const { statusCode, headers, body } = await undiciRequest(this.server + path + queryString(options.query), {
        method: method as Dispatcher.HttpMethod,
        headers: await this.#headersFor(options),
        body: options.body ?? null,
        signal: controller.signal,
        ...(this.#dispatcher ? { dispatcher: this.#dispatcher } : {}),
      });
      answered = true;
      this.#notify(method, statusCode, started);
      if (statusCode < 200 || statusCode > 299) {
        const retryAfter = headers['retry-after'];
        throw new ApiError(method, path, statusCode, parseStatus(await body.text()), Array.isArray(retryAfter) ? retryAfter[0] : retryAfter);
      }
      return (await body.json()) as T;
    } catch (error) {
      // An answer that could not be read (not JSON) is no connection problem; a timeout is.
      if (error instanceof ApiError || (answered && !controller.signal.aborted)) throw error;
      if (!answered) this.#notify(method, 'error', started);
      throw this.#failed(method, path, controller.signal, error);
    } finally {
      clearTimeout(timer);
      outer?.removeEventListener('abort', forward);
    }
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
    const fresh = await authenticate(this.#kc, this.server);
    const old = this.#dispatcher;
    this.#dispatcher = fresh.dispatcher;
    this.#headers = fresh.headers;
    this.#headersAt = Date.now();
    old?.close().catch(() => {});
  }

  /** Drops open connections: called on the way out, after the work that mattered has drained. */
  async close(): Promise<void> {
    await this.#dispatcher?.destroy();
  }

  async #headersFor(options: RequestOptions): Promise<Record<string, string>> {
    return { ...(await this.#authHeaders()), 'user-agent': this.#userAgent, ...options.headers };
  }

  /** What a request that got no answer throws: ConnectionError, or the reason it was aborted for. */
  #failed(method: string, path: string, signal: AbortSignal | undefined, error: unknown): unknown {
    const reason: unknown = signal?.reason;
    if (reason instanceof DOMException && reason.name === 'TimeoutError') return new ConnectionError(this.server, new Error(`${method} ${path}: no answer in time`));
    if (signal?.aborted) return reason;
    return new ConnectionError(this.server, error);
  }

  #notify(method: string, status: number | 'error', started: number): void {
    const seconds = (performance.now() - started) / 1000;
    for (const observer of this.#observers) observer(method, status, seconds);
  }

  async #authHeaders(): Promise<Record<string, string>> {
    if (Date.now() - this.#headersAt > AUTH_REFRESH_MS) {
      // Only the headers are taken; the connection pool of the first dispatcher is kept.
      const fresh = await authenticate(this.#kc, this.server);
      this.#headers = fresh.headers;
      this.#headersAt = Date.now();
      await fresh.dispatcher?.close();
    }
    return this.#headers;
  }
}

interface Auth {
  readonly headers: Record<string, string>;
  readonly dispatcher: Dispatcher | undefined;
}

/**
 * Credentials and a connection pool for the current context. The pool speaks HTTP/1.1 only:
 * with HTTP/2 every request shares one connection, so one that dies silently stalls them all
 * (and undici's HTTP/2 client trips an assertion on Deno when such a connection is closed).
 * Proxied clusters keep client-node's own dispatcher, which knows the proxy.
 */
async function authenticate(kc: KubeConfig, server: string): Promise<Auth> {
  try {
    if (kc.getCurrentCluster()?.proxyUrl) {
      const context = new RequestContext(server, 'GET' as ConstructorParameters<typeof RequestContext>[1]);
      await kc.applySecurityAuthentication(context);
      return { headers: context.getHeaders(), dispatcher: context.getDispatcher() };
    }
    const options: HttpsOptions = {};
    await kc.applyToHTTPSOptions(options);
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(options.headers ?? {})) if (value !== undefined) headers[name] = String(value);
    if (options.auth) headers['authorization'] = `Basic ${Buffer.from(options.auth).toString('base64')}`;
    const { ca, cert, key, pfx, passphrase, rejectUnauthorized, servername } = options as HttpsOptions & { servername?: string };
    const tls = Object.fromEntries(Object.entries({ ca, cert, key, pfx, passphrase, rejectUnauthorized, servername }).filter(([, v]) => v !== undefined));
    return { headers, dispatcher: new Agent({ connect: tls, allowH2: false }) };
  } catch (error) {
    throw new KubeConfigError(`cannot authenticate to ${server}: ${error instanceof Error ? error.message : String(error)}. Check the user in the kubeconfig`);
  }
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
