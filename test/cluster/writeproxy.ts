// An HTTPS proxy in front of the API server that reads what goes through it (it terminates TLS with
// its own CA, and connects on with the API server's): every PATCH is recorded, with the place it
// came from and when it reached the API server and was answered, and the PATCHes of one place can
// be held (the request kept, in full, and sent on later), as a network that holds a request does.
// Each place connects with its own TLS server name (`tls-server-name` in its kubeconfig), which
// tells them apart: processes that share one ServiceAccount, user agent and address otherwise
// look alike. A request on the wire stays on the wire: a PATCH received (or held) is sent on even
// if its client gave up meanwhile, as a request that left the client's host still reaches the
// server. Other requests (lists, watches, Leases, Events) go on at once, streamed both ways, and
// end when either side ends; an API server that cannot be reached closes the client's connection,
// as a direct connection would fail. Put it behind a FaultProxy (which forwards TCP) to keep
// dropping and delaying connections as labeller sees them.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, createServer, request, type Server } from 'node:https';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';

/** One PATCH that went through: `at`s are Date.now(). */
export interface Write {
  /** The place it came from (its TLS server name's first label), '' if it named none. */
  readonly place: string;
  /** The object's path, without the query. */
  readonly path: string;
  /** The labels its body sets (an apply's, or a JSON patch's adds and replaces), null for a removal; undefined when unread. */
  readonly labels: Readonly<Record<string, string | null>> | undefined;
  readonly receivedAt: number;
  /** When the hold it waited in began; undefined: it was not held. */
  readonly heldSince: number | undefined;
  /** When it was sent on to the API server (undefined: never, the proxy closed first). */
  sentAt?: number;
  answeredAt?: number;
  /** The API server's status; undefined when it failed without one. */
  status?: number | undefined;
  /** The object's resourceVersion in the answer (an applied write's), once read. */
  resourceVersion?: string | undefined;
}

/** How large a request line and headers may be, each way (Node's default is 16 KiB). */
const MAX_HEADER_BYTES = 1 << 20;

/** Hop-by-hop headers, not passed on (Node's server and client set their own). */
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer']);

export class WriteProxy {
  /** The CA a client of the proxy trusts. */
  readonly caFile: string;
  readonly #dir: string;
  readonly #server: Server;
  readonly #upstream: URL;
  readonly #agent: Agent;
  /** Every PATCH received, in order. */
  readonly writes: Write[] = [];
  /** The places whose PATCHes are held now: since when, and those waiting. */
  readonly #holds = new Map<string, { readonly since: number; readonly waiting: (() => void)[] }>();

  private constructor(dir: string, server: Server, upstream: URL, ca: Buffer) {
    this.#dir = dir;
    this.caFile = join(dir, 'ca.crt');
    this.#server = server;
    this.#upstream = upstream;
    this.#agent = new Agent({ keepAlive: true, ca });
  }

  /**
   * Listens on a free loopback port, for clients naming `place.<domain>` for each of `places`,
   * and forwards to `upstream` (an https:// URL), trusting `ca` (PEM).
   */
  static async start(upstream: string, ca: Buffer, places: readonly string[]): Promise<WriteProxy> {
    const dir = mkdtempSync(join(tmpdir(), 'labeller-writeproxy-'));
    const { key, cert } = certificate(dir, places.map((place) => serverName(place)));
    // A list's shard selector can make a long request line: the API server takes 1 MiB of them.
    const server = createServer({ key, cert, maxHeaderSize: MAX_HEADER_BYTES });
    // Watches last minutes; a client's idle connection is closed by the client first.
    server.requestTimeout = 0;
    server.headersTimeout = 0;
    server.keepAliveTimeout = 120_000;
    const proxy = new WriteProxy(dir, server, new URL(upstream), ca);
    server.on('request', (req: IncomingMessage, res: ServerResponse) => proxy.#handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get url(): string {
    return `https://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /** Holds the PATCHes `place` sends from now on, until release(); answers since when (their `heldSince`). */
  hold(place: string): number {
    const hold = this.#holds.get(place) ?? { since: Date.now(), waiting: [] };
    this.#holds.set(place, hold);
    return hold.since;
  }

  /** Sends on, in order, the PATCHes of `place` held. */
  release(place: string): void {
    const held = this.#holds.get(place);
    this.#holds.delete(place);
    for (const send of held?.waiting ?? []) send();
  }

  async close(): Promise<void> {
    for (const place of [...this.#holds.keys()]) this.release(place);
    this.#server.closeAllConnections();
    await new Promise((resolve) => this.#server.close(resolve));
    this.#agent.destroy();
    rmSync(this.#dir, { recursive: true, force: true });
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const place = placeOf((req.socket as TLSSocket).servername);
    const path = (req.url ?? '/').split('?')[0]!;
    const write = req.method === 'PATCH' && !/\/events(\/|$)/.test(path);
    const upstream = request({
      host: this.#upstream.hostname,
      port: this.#upstream.port,
      method: req.method,
      path: req.url,
      headers: passOn(req.headers, { host: this.#upstream.host }),
      agent: this.#agent,
      maxHeaderSize: MAX_HEADER_BYTES,
    });
    let record: Write | undefined;
    upstream.on('response', (answer) => {
      if (record) {
        record.answeredAt = Date.now();
        record.status = answer.statusCode;
        // A write's answer is the object: its version tells a write that changed it from one that
        // did not. Read even when its sender has gone (a held write of a process stopped since).
        const written = record;
        const chunks: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => chunks.push(chunk));
        answer.on('end', () => {
          try {
            const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
              metadata?: { resourceVersion?: string };
            };
            written.resourceVersion = body.metadata?.resourceVersion;
          } catch {
            // Not JSON (a protobuf answer, a failure): unknown.
          }
        });
      }
      if (res.destroyed) {
        answer.resume();
        return;
      }
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, passOn(answer.headers));
      // At once, as the API server sends them: a watch's first event may be a minute away, and
      // its client waits for the headers before it counts the watch as begun.
      res.flushHeaders();
      answer.pipe(res);
      answer.on('error', () => res.destroy());
      answer.on('aborted', () => res.destroy());
    });
    // No answer (the API server down or restarting): the client's connection fails, as it would.
    upstream.on('error', () => req.socket.destroy());
    if (!write) {
      req.pipe(upstream);
      // The client gave up (or its connection dropped): so does the request, a watch included.
      res.on('close', () => {
        if (!res.writableFinished) upstream.destroy();
      });
      return;
    }
    // A PATCH: read in full, recorded, then sent on now or once its place's hold ends.
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('error', () => {});
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const held = this.#holds.get(place);
      record = { place, path, labels: labelsOf(body), receivedAt: Date.now(), heldSince: held?.since };
      this.writes.push(record);
      const send = () => {
        record!.sentAt = Date.now();
        upstream.end(body);
      };
      if (held) held.waiting.push(send);
      else send();
    });
  }
}

/** A held write that reached the API server after another place's write of the same object, made since the hold began, was answered. */
export interface LateWrite {
  readonly held: Write;
  readonly overtaken: Write;
}

/**
 * The held writes that reached the API server and changed the object after another place's write
 * of it, received since the hold began, had been applied: two writers, the held one last. A held
 * write refused (a 409: fenced by the version it was made over) or that changed nothing (answered
 * with the version the object had after the other's, the last before it) wrote nothing. A process
 * that hands its objects over once its writes are answered never has one.
 */
export function lateWrites(writes: readonly Write[]): LateWrite[] {
  const applied = (write: Write) => write.status !== undefined && write.status < 300;
  const late: LateWrite[] = [];
  for (const held of writes) {
    if (held.heldSince === undefined || held.sentAt === undefined || !applied(held)) continue;
    const before = writes.filter((other) =>
      other.path === held.path && other !== held && applied(other) && other.answeredAt !== undefined &&
      other.answeredAt <= held.sentAt!
    );
    const overtaken = before.find((other) =>
      other.place !== held.place && other.heldSince === undefined && other.receivedAt >= held.heldSince!
    );
    const last = before.reduce<Write | undefined>(
      (latest, other) => (latest && latest.answeredAt! >= other.answeredAt! ? latest : other),
      undefined,
    );
    const unchanged = held.resourceVersion !== undefined && held.resourceVersion === last?.resourceVersion;
    if (overtaken && !unchanged) late.push({ held, overtaken });
  }
  return late;
}

/** The TLS server name place `place` connects with. */
export function serverName(place: string): string {
  return `${place}.chaos.labeller.test`;
}

function placeOf(servername: string | false | null | undefined): string {
  return typeof servername === 'string' && servername.endsWith('.chaos.labeller.test')
    ? servername.slice(0, servername.indexOf('.'))
    : '';
}

function passOn(headers: IncomingHttpHeaders, extra: Record<string, string> = {}): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP.has(name)) out[name] = value;
  }
  return { ...out, ...extra };
}

/** What a PATCH body sets of the labels: an apply's or merge patch's `metadata.labels`, a JSON patch's operations on them. */
export function labelsOf(body: Buffer): Record<string, string | null> | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
  if (Array.isArray(parsed)) {
    const labels: Record<string, string | null> = {};
    for (const op of parsed as { op?: string; path?: string; value?: unknown }[]) {
      if (typeof op.path !== 'string') continue;
      if (op.path === '/metadata/labels' && op.value && typeof op.value === 'object') {
        Object.assign(labels, op.value);
        continue;
      }
      if (!op.path.startsWith('/metadata/labels/')) continue;
      const key = op.path.slice('/metadata/labels/'.length).replaceAll('~1', '/').replaceAll('~0', '~');
      if (op.op === 'remove') labels[key] = null;
      else if ((op.op === 'add' || op.op === 'replace') && typeof op.value === 'string') labels[key] = op.value;
    }
    return labels;
  }
  const metadata = (parsed as { metadata?: { labels?: Record<string, string | null> } } | null)?.metadata;
  return metadata?.labels ? { ...metadata.labels } : {};
}

/** A CA and a server certificate for 127.0.0.1 and `names` (openssl), valid for a day. */
function certificate(dir: string, names: readonly string[]): { key: Buffer; cert: Buffer } {
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const at = (name: string) => join(dir, name);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  openssl(
    'req',
    '-x509',
    ...ec,
    '-keyout',
    at('ca.key'),
    '-out',
    at('ca.crt'),
    '-subj',
    '/CN=chaos-proxy-ca',
    '-days',
    '1',
  );
  openssl('req', '-new', ...ec, '-keyout', at('server.key'), '-out', at('server.csr'), '-subj', '/CN=127.0.0.1');
  writeFileSync(
    at('ext.cnf'),
    `subjectAltName=IP:127.0.0.1,${names.map((name) => `DNS:${name}`).join(',')}\nextendedKeyUsage=serverAuth\n`,
  );
  openssl(
    'x509',
    '-req',
    '-in',
    at('server.csr'),
    '-CA',
    at('ca.crt'),
    '-CAkey',
    at('ca.key'),
    '-CAcreateserial',
    '-days',
    '1',
    '-extfile',
    at('ext.cnf'),
    '-out',
    at('server.crt'),
  );
  return { key: readFileSync(at('server.key')), cert: readFileSync(at('server.crt')) };
}
