// Proxies from the environment, as kubectl (Go's net/http ProxyFromEnvironment) reads them for an
// https API server: HTTPS_PROXY (or https_proxy), bypassed for hosts NO_PROXY (or no_proxy)
// names, and never for localhost or loopback addresses. A kubeconfig cluster's proxy-url wins
// over the environment (credentials.ts). Requests go through the proxy as an HTTP CONNECT tunnel,
// with TLS to the API server end to end. (An http:// API server is reached directly.)
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

/**
 * A keep-alive pool whose connections are tunnels through `proxy` (HTTP CONNECT; basic
 * credentials from the proxy URL), each carrying TLS to the API server.
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
    const target = `${options.host?.includes(':') ? `[${options.host}]` : options.host}:${options.port ?? 443}`;
    const proxy = this.#proxy;
    const proxyPort = Number(proxy.port || (proxy.protocol === 'https:' ? 443 : 80));
    const socket = proxy.protocol === 'https:'
      ? tlsConnect({ host: proxy.hostname, port: proxyPort, servername: proxy.hostname })
      : tcpConnect({ host: proxy.hostname, port: proxyPort });
    const auth = proxy.username
      ? `proxy-authorization: Basic ${
        Buffer.from(`${decodeURIComponent(proxy.username)}:${decodeURIComponent(proxy.password)}`).toString('base64')
      }\r\n`
      : '';
    let answer = '';
    const fail = (error: Error): void => {
      socket.destroy();
      created(error);
    };
    socket.once('error', fail);
    socket.once(proxy.protocol === 'https:' ? 'secureConnect' : 'connect', () => {
      socket.write(`CONNECT ${target} HTTP/1.1\r\nhost: ${target}\r\n${auth}\r\n`);
    });
    const onData = (chunk: Buffer): void => {
      answer += chunk.toString('latin1');
      const end = answer.indexOf('\r\n\r\n');
      if (end === -1) {
        if (answer.length > 16_384) fail(new Error(`proxy ${proxy.host}: answer to CONNECT too long`));
        return;
      }
      socket.off('data', onData);
      socket.off('error', fail);
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(answer)?.[1];
      if (status !== '200') {
        fail(new Error(`proxy ${proxy.host} refused CONNECT ${target}: ${answer.slice(0, answer.indexOf('\r\n'))}`));
        return;
      }
      // Node's Agent worked out the server name (none for an IP address), as for a direct connection.
      const secure = tlsConnect({ ...options, socket });
      const failed = (error: Error): void => created(error);
      secure.once('error', failed);
      secure.once('secureConnect', () => {
        secure.off('error', failed);
        created(null, secure);
      });
    };
    socket.on('data', onData);
    return undefined;
  }
}
