// A source at an HTTPS endpoint (a CMDB, a service catalogue), polled: `If-None-Match` with the
// last ETag, so an unchanged document costs a 304; a timeout; trust roots and a bearer token read
// from files at each poll (rotated as credentials are); a size limit; redirects followed only on
// the same origin; plain http only when the config asked for it; HTTPS_PROXY and NO_PROXY from
// the environment, as kubectl and the API client (kube/proxy.ts) take them. The token never
// reaches a log line or an Event: failures name the URL, without its query string (which may
// carry a token of its own), and the status, nothing of the request.
import type { HttpOrigin } from '../config/sources.ts';
import type { Agent, IncomingMessage } from 'node:http';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { proxyFor, TunnelAgent } from '../kube/proxy.ts';
import { Backoff } from '../util/backoff.ts';
import { readText } from '../util/readtext.ts';
import { sleep } from '../util/sleep.ts';
import { redactUrl } from '../util/url.ts';
import { attempt, type Loaded, type Loader, parseContent } from './loader.ts';

const MAX_REDIRECTS = 5;

/** What a poll found: new content, the same as before (304), or a failure. */
type Poll = Loaded | 'unchanged' | Error;

/** The environment a proxy is taken from: HTTPS_PROXY, NO_PROXY and their lowercase spellings. */
type Env = Readonly<Record<string, string | undefined>>;

export function httpLoader(origin: HttpOrigin, env: Env = process.env): Loader {
  return async (report, signal, once) => {
    // Redirects stay on the origin, so every request of the source takes the same way. (Inside the
    // loader: a malformed HTTPS_PROXY is then this source's failure, reported as such.)
    const proxy = proxyFor(new URL(origin.url), env);
    let etag: string | undefined;
    // After a failure the next poll comes sooner, never later than the interval.
    const retry = new Backoff({ initialMs: Math.min(5_000, origin.intervalMs), maxMs: origin.intervalMs });
    while (!signal.aborted) {
      const poll = await pollOnce(origin, proxy, etag, signal);
      if (signal.aborted) return;
      if (poll === 'unchanged') retry.reset();
      else if (poll instanceof Error) {
        // The good content's ETag would make its return a 304, which says nothing: ask afresh.
        etag = undefined;
        report(poll);
      } else {
        retry.reset();
        etag = poll.etag;
        report(poll.loaded);
      }
      if (once) return;
      await sleep(poll instanceof Error ? retry.next() : origin.intervalMs, signal);
    }
  };
}

async function pollOnce(
  origin: HttpOrigin,
  proxy: URL | undefined,
  etag: string | undefined,
  signal: AbortSignal,
): Promise<{ loaded: Loaded; etag: string | undefined } | Exclude<Poll, Loaded>> {
  const at = redactUrl(origin.url);
  // Polls are minutes apart: no tunnel is kept between them (the finally closes any left).
  const agent = proxy && new TunnelAgent(proxy, {});
  // One deadline for the whole poll, redirects and body included: a body that stalls after its
  // headers is as unanswered as headers that never come.
  const timeout = new AbortController();
  const timer = setTimeout(() => timeout.abort(), origin.timeoutMs);
  try {
    const [ca, token] = await Promise.all([
      origin.caFile === undefined ? undefined : readText(origin.caFile),
      origin.bearerTokenFile === undefined ? undefined : readText(origin.bearerTokenFile).then((t) => t.trim()),
    ]);
    const headers: Record<string, string> = { accept: 'application/json, application/yaml;q=0.9, */*;q=0.1' };
    if (token) headers['authorization'] = `Bearer ${token}`;
    if (etag) headers['if-none-match'] = etag;
    let url = new URL(origin.url);
    for (let hops = 0;; hops++) {
      const response = await send(url, headers, ca, agent, AbortSignal.any([signal, timeout.signal]));
      const status = response.statusCode ?? 0;
      if (status >= 300 && status < 400 && status !== 304) {
        response.resume();
        const next = response.headers.location ? new URL(response.headers.location, url) : undefined;
        // The token goes where the config said, and nowhere else.
        if (!next || next.origin !== url.origin) {
          return new Error(`${at}: redirected to ${next?.origin ?? 'nowhere'}, another origin; not followed`);
        }
        if (hops === MAX_REDIRECTS) return new Error(`${at}: more than ${MAX_REDIRECTS} redirects`);
        url = next;
        continue;
      }
      if (status === 304) {
        response.resume();
        return 'unchanged';
      }
      if (status !== 200) {
        response.resume();
        return new Error(`${at}: ${status} ${response.statusMessage ?? ''}`.trimEnd());
      }
      const text = await readLimited(response, origin.maxBytes);
      const loaded = attempt(() => parseContent(text));
      if (loaded instanceof Error) return new Error(`${at}: ${loaded.message}`);
      const tag = response.headers.etag;
      return { loaded, etag: typeof tag === 'string' ? tag : undefined };
    }
  } catch (error) {
    if (signal.aborted) return 'unchanged';
    // A refused or silent connection may be the proxy's: say which way it went.
    const way = proxy ? `${at} through proxy ${proxy.host}` : at;
    // Whatever the abort broke (the request: AbortError; the body: ECONNRESET), the deadline passed.
    if (timeout.signal.aborted) return new Error(`${way}: no answer in ${origin.timeoutMs} ms (timeout)`);
    const why = error instanceof Error ? ((error as NodeJS.ErrnoException).code ?? error.message) : String(error);
    return new Error(`${way}: ${why}`);
  } finally {
    clearTimeout(timer);
    agent?.destroy();
  }
}

function send(
  url: URL,
  headers: Readonly<Record<string, string>>,
  ca: string | undefined,
  agent: Agent | undefined,
  signal: AbortSignal,
): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    // The trust roots reach the tunnel's TLS too: the Agent hands the request's options to it.
    const options = { method: 'GET', headers, signal, ...(ca ? { ca } : {}), ...(agent ? { agent } : {}) };
    const sent = url.protocol === 'https:' ? httpsRequest(url, options) : httpRequest(url, options);
    sent.once('response', resolve);
    sent.once('error', reject);
    sent.end();
  });
}

/** The body as text, refused past `maxBytes` (reading stops there); the caller names the URL. */
function readLimited(response: IncomingMessage, maxBytes: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    response.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        response.destroy();
        reject(new Error(`larger than maxBytes (${maxBytes} bytes)`));
        return;
      }
      chunks.push(chunk);
    });
    response.once('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    response.once('error', reject);
  });
}
