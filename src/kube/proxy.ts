// Proxies from the environment, as kubectl (Go's net/http ProxyFromEnvironment) reads them for an
// https API server: HTTPS_PROXY (or https_proxy), bypassed for hosts NO_PROXY (or no_proxy)
// names, and never for localhost or loopback addresses. A kubeconfig cluster's proxy-url wins
// over the environment (credentials.ts), with kubectl's schemes: http, https and socks5.
// Requests go through the proxy as a tunnel, an HTTP CONNECT or a SOCKS5 CONNECT (RFC 1928, with
// RFC 1929's user and password from the URL; host names resolved by the proxy, as Go's dialer
// does), with TLS to the API server end to end. (An http:// API server is reached directly.)
import { Agent as HttpsAgent, type AgentOptions } from 'node:https';
import type { Duplex } from 'node:stream';
import { connect as tcpConnect, isIP } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';

type Env = Readonly<Record<string, string | undefined>>;

/** The proxy to reach `server` through, or undefined to connect directly. */
export function proxyFor(server: URL, env: Env): URL | undefined {
  const value = env['HTTPS_PROXY'] || env['https_proxy'];
  if (!value || server.protocol !== 'https:') return undefined;
  const host = server.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const port = server.port || '443';
  if (host === 'localhost' || isLoopback(host)) return undefined;
  if (bypassed(host, port, env['NO_PROXY'] ?? env['no_proxy'] ?? '')) return undefined;
  // A proxy given as "host:port", as Go accepts it.
  return new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : `http://${value}`);
}

/** Whether NO_PROXY (comma-separated hosts, .domains, IPs and CIDRs, each with an optional port, or "*") names `host`. */
export function bypassed(host: string, port: string, noProxy: string): boolean {
  for (const raw of noProxy.split(',').map((entry) => entry.trim().toLowerCase()).filter(Boolean)) {
    if (raw === '*') return true;
    if (raw.includes('/')) {
      if (isIP(host) && inCidr(host, raw)) return true;
      continue;
    }
    const [entryHost, entryPort] = hostAndPort(raw);
    if (entryPort !== undefined && entryPort !== port) continue;
    if (isIP(entryHost)) {
      if (entryHost === host) return true;
      continue;
    }
    // "example.com" matches it and its subdomains; ".example.com" its subdomains only.
    const domain = entryHost.replace(/^\*?\./, '');
    if (entryHost.startsWith('.') || entryHost.startsWith('*.')) {
      if (host.endsWith(`.${domain}`)) return true;
    } else if (host === domain || host.endsWith(`.${domain}`)) return true;
  }
  return false;
}

/** `host:port`, `[v6]:port` or a bare host or address. */
function hostAndPort(entry: string): [string, string | undefined] {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
  if (bracketed) return [bracketed[1]!, bracketed[2]];
  if (isIP(entry) === 6) return [entry, undefined];
  const withPort = /^(.*):(\d+)$/.exec(entry);
  return withPort ? [withPort[1]!, withPort[2]] : [entry, undefined];
}

function isLoopback(host: string): boolean {
  return (isIP(host) === 4 && host.startsWith('127.')) || host === '::1';
}

function inCidr(ip: string, cidr: string): boolean {
  const [base = '', bitsText = ''] = cidr.split('/');
  const family = isIP(base);
  if (family === 0 || family !== isIP(ip)) return false;
  const bits = Number(bitsText);
  const a = bytes(ip);
  const b = bytes(base);
  for (let i = 0; i < a.length; i++) {
    const take = Math.max(0, Math.min(8, bits - i * 8));
    const mask = take === 0 ? 0 : (0xff << (8 - take)) & 0xff;
    if ((a[i]! & mask) !== (b[i]! & mask)) return false;
  }
  return true;
}

function bytes(ip: string): number[] {
  if (isIP(ip) === 4) return ip.split('.').map(Number);
  const [head = '', tail = ''] = ip.split('::');
  const groups = (text: string) => (text ? text.split(':') : []);
  const missing = 8 - groups(head).length - groups(tail).length;
  const all = [...groups(head), ...Array<string>(ip.includes('::') ? missing : 0).fill('0'), ...groups(tail)];
  return all.flatMap((group) => {
    const value = Number.parseInt(group || '0', 16);
    return [value >> 8, value & 0xff];
  });
}

/** The schemes a proxy URL may have (kubectl's). */
const SCHEMES = ['http:', 'https:', 'socks5:'];

/** A kubeconfig cluster's `proxy-url`, or a message saying what is wrong with it. */
export function parseProxyUrl(value: string): URL | string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return `proxy-url ${JSON.stringify(value)} is not a URL: give one such as http://proxy:3128 or socks5://proxy:1080`;
  }
  return SCHEMES.includes(url.protocol)
    ? url
    : `proxy-url ${JSON.stringify(value)}: the scheme must be http, https or socks5, as kubectl takes it`;
}

/**
 * A keep-alive pool whose connections are tunnels through `proxy` (HTTP CONNECT with basic
 * credentials from the proxy URL, or SOCKS5), each carrying TLS to the API server.
 */
export class TunnelAgent extends HttpsAgent {
  readonly #proxy: URL;

  constructor(proxy: URL, options: AgentOptions) {
    super(options);
    this.#proxy = proxy;
  }

  // Node's Agent takes a socket from createConnection's callback when it returns none.
  override createConnection(
    options: ConnectionOptions & { host?: string; port?: number },
    created: (error: Error | null, socket?: Duplex) => void,
  ): Duplex | undefined {
    const host = options.host ?? 'localhost';
    const port = options.port ?? 443;
    const proxy = this.#proxy;
    const socks = proxy.protocol === 'socks5:';
    const proxyPort = Number(proxy.port || (socks ? 1080 : proxy.protocol === 'https:' ? 443 : 80));
    const socket = proxy.protocol === 'https:'
      ? tlsConnect({ host: proxy.hostname, port: proxyPort, servername: proxy.hostname })
      : tcpConnect({ host: proxy.hostname, port: proxyPort });
    const fail = (error: Error): void => {
      socket.destroy();
      created(error);
    };
    socket.once('error', fail);
    socket.once(proxy.protocol === 'https:' ? 'secureConnect' : 'connect', () => {
      const tunnel = socks ? socks5Connect(socket, proxy, host, port) : httpConnect(socket, proxy, host, port);
      tunnel.then(() => {
        socket.off('error', fail);
        // Node's Agent worked out the server name (none for an IP address), as for a direct connection.
        const secure = tlsConnect({ ...options, socket });
        const failed = (error: Error): void => created(error);
        secure.once('error', failed);
        secure.once('secureConnect', () => {
          secure.off('error', failed);
          created(null, secure);
        });
      }, fail);
    });
    return undefined;
  }
}

/** Reads from `socket` until `complete` says how long the answer is (undefined: not yet); the rest stays unread. */
function answer(socket: Duplex, complete: (data: Buffer) => number | undefined, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let data = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      data = Buffer.concat([data, chunk]);
      const length = complete(data);
      if (length === undefined) {
        if (data.length > limit) done(new Error('proxy answer too long'));
        return;
      }
      socket.off('data', onData);
      socket.off('close', onClose);
      // Anything after the answer belongs to the tunnel (the TLS layer reads it next).
      if (data.length > length) socket.unshift(data.subarray(length));
      resolve(data.subarray(0, length));
    };
    const onClose = (): void => done(new Error('proxy closed the connection'));
    const done = (error: Error): void => {
      socket.off('data', onData);
      socket.off('close', onClose);
      reject(error);
    };
    socket.on('data', onData);
    socket.once('close', onClose);
  });
}

/** An HTTP CONNECT to `host:port` over `socket`, with basic credentials from the proxy URL. */
async function httpConnect(socket: Duplex, proxy: URL, host: string, port: number): Promise<void> {
  const target = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  const auth = proxy.username
    ? `proxy-authorization: Basic ${
      Buffer.from(`${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`).toString('base64')
    }\r\n`
    : '';
  socket.write(`CONNECT ${target} HTTP/1.1\r\nhost: ${target}\r\n${auth}\r\n`);
  const head = (await answer(socket, (data) => {
    const end = data.indexOf('\r\n\r\n');
    return end === -1 ? undefined : end + 4;
  }, 16_384)).toString('latin1');
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1];
  if (status !== '200') {
    throw new Error(`proxy ${proxy.host} refused CONNECT ${target}: ${head.slice(0, head.indexOf('\r\n'))}`);
  }
}

const SOCKS_REPLIES: Readonly<Record<number, string>> = {
  1: 'general failure',
  2: 'not allowed by its rules',
  3: 'network unreachable',
  4: 'host unreachable',
  5: 'connection refused',
  6: 'TTL expired',
  7: 'command not supported',
  8: 'address type not supported',
};

/** A SOCKS5 CONNECT to `host:port` over `socket` (RFC 1928), with user and password from the proxy URL (RFC 1929). */
async function socks5Connect(socket: Duplex, proxy: URL, host: string, port: number): Promise<void> {
  const where = `SOCKS5 proxy ${proxy.host}`;
  const user = decodeURIComponent(proxy.username);
  const password = decodeURIComponent(proxy.password);
  socket.write(Buffer.from(user ? [5, 2, 0, 2] : [5, 1, 0]));
  const [, method] = await answer(socket, (data) => (data.length >= 2 ? 2 : undefined), 2);
  if (method === 2 && user) {
    const u = Buffer.from(user);
    const p = Buffer.from(password);
    socket.write(Buffer.concat([Buffer.from([1, u.length]), u, Buffer.from([p.length]), p]));
    const [, status] = await answer(socket, (data) => (data.length >= 2 ? 2 : undefined), 2);
    if (status !== 0) throw new Error(`${where} refused the user and password of the proxy URL`);
  } else if (method !== 0) {
    throw new Error(
      `${where} accepts none of the ways to authenticate labeller offers${
        user ? '' : ': give a user and password in the proxy URL'
      }`,
    );
  }
  const family = isIP(host);
  const address = family === 4
    ? Buffer.from([1, ...host.split('.').map(Number)])
    : family === 6
    ? Buffer.from([4, ...bytes(host)])
    : Buffer.concat([Buffer.from([3, Buffer.byteLength(host)]), Buffer.from(host)]);
  socket.write(Buffer.concat([Buffer.from([5, 1, 0]), address, Buffer.from([port >> 8, port & 0xff])]));
  const reply = await answer(socket, (data) => {
    if (data.length < 5) return undefined;
    const length = data[3] === 1 ? 10 : data[3] === 4 ? 22 : 7 + (data[4] ?? 0);
    return data.length >= length ? length : undefined;
  }, 262);
  if (reply[1] !== 0) {
    throw new Error(`${where} refused CONNECT ${host}:${port}: ${SOCKS_REPLIES[reply[1] ?? 1] ?? `reply ${reply[1]}`}`);
  }
}
