// The Node floor (issue 49): the least a Node program must do to keep one label on the ConfigMaps
// of a namespace, against which labeller's own work per object is measured in `--peers`. No
// dependencies, no cache beyond name → labels, no logging per object. It lists pages of 500 as
// PartialObjectMetadataList, watches from the list's version as PartialObjectMetadata with
// bookmarks (a 410 lists again), and sends one forced server-side apply per object whose label
// differs, at most --concurrency in flight and never two for one object; a PATCH's answer is
// drained unread. Over one keep-alive HTTPS agent, or with --http2 over one HTTP/2 session.
// bench/peers/build.sh strips its types (esbuild) as for the client-node peer: Node's own
// stripping would load its TypeScript parser, tens of MiB the floor must not carry.
//
//   KUBECONFIG=… node main.js --namespace NS --label K=V --field-manager NAME --concurrency N [--http2]
//
// The kubeconfig is read as JSON (YAML's JSON subset; the bench's control plane writes JSON): its
// current context's server, CA, and a token or client certificate.
import { readFileSync } from 'node:fs';
import { type ClientHttp2Session, connect, constants as h2 } from 'node:http2';
import type { IncomingMessage } from 'node:http';
import { Agent, request } from 'node:https';
import type { Readable } from 'node:stream';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    namespace: { type: 'string' },
    label: { type: 'string' },
    'field-manager': { type: 'string' },
    concurrency: { type: 'string' },
    http2: { type: 'boolean', default: false },
  },
});
function usage(message: string): never {
  console.error(
    `${message}\nusage: main.js --namespace NS --label K=V --field-manager NAME --concurrency N [--http2]`,
  );
  process.exit(2);
}
const namespace = values.namespace ?? usage('--namespace is required');
const [key = '', value] = values.label?.split('=') ?? [];
if (!key || value === undefined) usage(`--label ${values.label}: expected K=V`);
const fieldManager = values['field-manager'] ??
  usage('--field-manager is required');
const concurrency = Number(values.concurrency);
if (!Number.isInteger(concurrency) || concurrency < 1) {
  usage(`--concurrency ${values.concurrency}: expected a whole number ≥ 1`);
}

interface Kubeconfig {
  'current-context'?: string;
  contexts: { name: string; context: { cluster: string; user: string } }[];
  clusters: {
    name: string;
    cluster: { server: string; 'certificate-authority-data'?: string };
  }[];
  users: {
    name: string;
    user: {
      token?: string;
      'client-certificate-data'?: string;
      'client-key-data'?: string;
    };
  }[];
}
const path = process.env['KUBECONFIG'] ??
  usage('KUBECONFIG is required (a JSON kubeconfig)');
const config = JSON.parse(readFileSync(path, 'utf8')) as Kubeconfig;
const context = config.contexts.find((c) => c.name === config['current-context']) ??
  config.contexts[0];
const cluster = config.clusters.find((c) => c.name === context?.context.cluster)
  ?.cluster;
const user = config.users.find((u) => u.name === context?.context.user)?.user ??
  {};
if (!cluster) usage(`${path}: no cluster for the current context`);
const pem = (
  data: string | undefined,
) => (data === undefined ? undefined : Buffer.from(data, 'base64'));
const tls = {
  ca: pem(cluster['certificate-authority-data']),
  cert: pem(user['client-certificate-data']),
  key: pem(user['client-key-data']),
};
const auth: Record<string, string> = user.token ? { authorization: `Bearer ${user.token}` } : {};
const server = new URL(cluster.server);

/** An answer: its status, and its body read whole (`read`) or drained unread. */
interface Answer {
  readonly status: number;
  readonly body: Buffer | undefined;
}

/** One request/response exchange; `lines` streams the body line by line (a watch) until it ends. */
interface Transport {
  send(
    method: string,
    path: string,
    headers: Record<string, string>,
    body: string | undefined,
    read: boolean,
  ): Promise<Answer>;
  lines(
    path: string,
    headers: Record<string, string>,
    line: (text: string) => void,
  ): Promise<number>;
}

/** A body read whole (`read`), or drained unread. */
function readBody(body: Readable, read: boolean): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    body.on('data', read ? (chunk: Buffer) => chunks.push(chunk) : () => {});
    body.on('end', () => resolve(read ? Buffer.concat(chunks) : undefined));
    body.on('error', reject);
  });
}

/** Each line of a streamed body (a watch), until it ends. */
function readLines(body: Readable, line: (text: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    let rest = '';
    body.setEncoding('utf8');
    body.on('data', (chunk: string) => {
      const parts = (rest + chunk).split('\n');
      rest = parts.pop() ?? '';
      for (const part of parts) if (part) line(part);
    });
    body.on('end', resolve);
    body.on('error', reject);
  });
}

function http1(): Transport {
  const agent = new Agent({ keepAlive: true, ...tls });
  /** The response once its headers are in. */
  const exchange = (method: string, path: string, headers: Record<string, string>, body?: string) =>
    new Promise<IncomingMessage>((resolve, reject) => {
      const req = request({
        host: server.hostname,
        port: server.port || 443,
        method,
        path,
        agent,
        headers: { ...auth, ...headers },
      });
      req.on('error', reject);
      req.on('response', resolve);
      req.end(body);
    });
  return {
    send: async (method, path, headers, body, read) => {
      const res = await exchange(method, path, headers, body);
      return { status: res.statusCode ?? 0, body: await readBody(res, read) };
    },
    lines: async (path, headers, line) => {
      const res = await exchange('GET', path, headers);
      await readLines(res, line);
      return res.statusCode ?? 0;
    },
  };
}

function http2(): Transport {
  let session: ClientHttp2Session | undefined;
  /** The stream, and its status once the response's headers are in. */
  const exchange = (method: string, path: string, headers: Record<string, string>, body?: string) => {
    if (!session || session.closed || session.destroyed) {
      session = connect(server.origin, tls);
      session.on('error', () => {});
    }
    const stream = session.request({
      [h2.HTTP2_HEADER_METHOD]: method,
      [h2.HTTP2_HEADER_PATH]: path,
      ...auth,
      ...headers,
    });
    stream.end(body);
    const status = new Promise<number>((resolve, reject) => {
      stream.on('response', (h) => resolve(Number(h[h2.HTTP2_HEADER_STATUS])));
      stream.on('error', reject);
    });
    // Its failure is the body's reader's too: handled there, never unhandled here.
    status.catch(() => {});
    return { stream, status };
  };
  return {
    send: async (method, path, headers, body, read) => {
      const { stream, status } = exchange(method, path, headers, body);
      const [answered, text] = await Promise.all([status, readBody(stream, read)]);
      return { status: answered, body: text };
    },
    lines: async (path, headers, line) => {
      const { stream, status } = exchange('GET', path, headers);
      await readLines(stream, line);
      return status;
    },
  };
}

const transport = values.http2 ? http2() : http1();
const collection = `/api/v1/namespaces/${encodeURIComponent(namespace)}/configmaps`;
const LIST_ACCEPT = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json';
const WATCH_ACCEPT = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json';

interface Meta {
  readonly name: string;
  readonly resourceVersion?: string;
  readonly labels?: Record<string, string>;
}

/** The cache: name → labels. */
const labels = new Map<string, Record<string, string> | undefined>();
/** Names to apply, in order, each once; those in flight; those changed while in flight. */
const pending = new Set<string>();
const inFlight = new Set<string>();
const again = new Set<string>();

function observe(meta: Meta): void {
  labels.set(meta.name, meta.labels);
  if (meta.labels?.[key] !== value) want(meta.name);
}

function want(name: string): void {
  if (inFlight.has(name)) again.add(name);
  else pending.add(name);
  pump();
}

function pump(): void {
  for (const name of pending) {
    if (inFlight.size >= concurrency) return;
    pending.delete(name);
    inFlight.add(name);
    void apply(name);
  }
}

async function apply(name: string): Promise<void> {
  const body = JSON.stringify({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, namespace, labels: { [key]: value } },
  });
  const query = `?fieldManager=${encodeURIComponent(fieldManager)}&force=true`;
  let retry = false;
  try {
    const { status } = await transport.send(
      'PATCH',
      `${collection}/${encodeURIComponent(name)}${query}`,
      {
        'content-type': 'application/apply-patch+yaml',
        accept: 'application/json',
      },
      body,
      false,
    );
    retry = status >= 300 && status !== 404;
    if (retry) console.error(`apply ${name}: ${status}`);
  } catch (error) {
    retry = true;
    console.error(`apply ${name} failed: ${String(error)}`);
  }
  inFlight.delete(name);
  if (retry) setTimeout(() => labels.has(name) && want(name), 1000);
  // Changed while in flight, and still there (an apply to a deleted object would make it again).
  else if (again.delete(name) && labels.has(name) && labels.get(name)?.[key] !== value) pending.add(name);
  pump();
}

/** Lists every page into the cache (replacing it); answers the list's resourceVersion. */
async function list(): Promise<string> {
  const listed: Meta[] = [];
  let next = '';
  let version = '';
  do {
    const query = `?limit=500${next ? `&continue=${encodeURIComponent(next)}` : ''}`;
    const answer = await transport.send(
      'GET',
      `${collection}${query}`,
      { accept: LIST_ACCEPT },
      undefined,
      true,
    );
    if (answer.status !== 200) {
      throw new Error(
        `list: ${answer.status} ${answer.body?.toString().slice(0, 200)}`,
      );
    }
    const page = JSON.parse(answer.body!.toString()) as {
      metadata: { resourceVersion: string; continue?: string };
      items: { metadata: Meta }[];
    };
    for (const item of page.items) {
      listed.push(item.metadata);
    }
    next = page.metadata.continue ?? '';
    version = page.metadata.resourceVersion;
  } while (next);
  labels.clear();
  for (const meta of listed) observe(meta);
  return version;
}

/** Watches from `version` until the stream ends; answers the version to resume from, or undefined to list again (410). */
async function watch(version: string): Promise<string | undefined> {
  let resume: string | undefined = version;
  const query = `?watch=1&allowWatchBookmarks=true&resourceVersion=${encodeURIComponent(version)}`;
  const status = await transport.lines(`${collection}${query}`, {
    accept: WATCH_ACCEPT,
  }, (line) => {
    const event = JSON.parse(line) as {
      type: string;
      object: { code?: number; metadata: Meta };
    };
    if (event.type === 'ERROR') {
      resume = event.object.code === 410 ? undefined : resume;
      return;
    }
    resume = event.object.metadata.resourceVersion ?? resume;
    if (event.type === 'ADDED' || event.type === 'MODIFIED') {
      observe(event.object.metadata);
    } else if (event.type === 'DELETED') {
      labels.delete(event.object.metadata.name);
      pending.delete(event.object.metadata.name);
    }
  });
  return status === 410 ? undefined : resume;
}

process.on('SIGTERM', () => process.exit(0));
let version: string | undefined;
for (let synced = false;;) {
  try {
    version ??= await list();
    if (!synced) console.error(`synced: ${labels.size} objects cached`);
    synced = true;
    version = await watch(version);
  } catch (error) {
    console.error(`list or watch failed: ${String(error)}`);
    version = undefined;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}
