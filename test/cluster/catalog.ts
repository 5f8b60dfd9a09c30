// An HTTPS endpoint such as a service catalogue or a CMDB, for the sources of truth tests: its own
// CA and server certificate (openssl), a JSON document with an ETag that answers If-None-Match
// with 304, a bearer token it checks, and switches for a body that changes, a body that is not
// a map, and an outage. It counts what it answered. Its certificate also names a host that
// resolves nowhere, for tests that reach it through a proxy.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export class Catalog {
  /** A name its certificate carries besides 127.0.0.1 that resolves nowhere: only a proxy reaches it by that name. */
  static readonly host = 'catalog.labeller.test';
  readonly dir = mkdtempSync(join(tmpdir(), 'labeller-catalog-'));
  /** The CA that signed the server's certificate: what a client trusts. */
  readonly caFile = join(this.dir, 'ca.crt');
  readonly tokenFile = join(this.dir, 'token');
  /** Answers by status code, and the Authorization headers seen. */
  readonly answers: number[] = [];
  readonly authorizations: (string | undefined)[] = [];
  body = '{}';
  #server: Server | undefined;
  #port = 0;

  constructor(token: string) {
    const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    const at = (name: string) => join(this.dir, name);
    openssl(
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      at('ca.key'),
      '-out',
      this.caFile,
      '-subj',
      '/CN=catalog-test-ca',
      '-days',
      '1',
    );
    openssl(
      'req',
      '-new',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      at('server.key'),
      '-out',
      at('server.csr'),
      '-subj',
      '/CN=127.0.0.1',
    );
    writeFileSync(at('ext.cnf'), `subjectAltName=IP:127.0.0.1,DNS:${Catalog.host}\nextendedKeyUsage=serverAuth\n`);
    openssl(
      'x509',
      '-req',
      '-in',
      at('server.csr'),
      '-CA',
      this.caFile,
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
    writeFileSync(this.tokenFile, `${token}\n`);
  }

  get url(): string {
    return `https://127.0.0.1:${this.#port}/teams.json`;
  }

  /** Serves on a free loopback port (the same one again after down()). */
  async up(): Promise<void> {
    const server = createServer(
      { key: readFileSync(join(this.dir, 'server.key')), cert: readFileSync(join(this.dir, 'server.crt')) },
      (req, res) => {
        this.authorizations.push(req.headers.authorization);
        const etag = `"${createHash('sha256').update(this.body).digest('hex').slice(0, 16)}"`;
        const status = req.headers['if-none-match'] === etag ? 304 : 200;
        this.answers.push(status);
        res.writeHead(status, { etag, 'content-type': 'application/json' });
        res.end(status === 200 ? this.body : undefined);
      },
    );
    await new Promise<void>((resolve) => server.listen(this.#port, '127.0.0.1', resolve));
    this.#port = (server.address() as AddressInfo).port;
    this.#server = server;
  }

  /** Stops answering: connections are refused until up() again. */
  async down(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    server?.closeAllConnections();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }

  async close(): Promise<void> {
    await this.down();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
