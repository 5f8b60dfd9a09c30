// The HTTPS loader's rules on a local endpoint (plain http, which the config allows only when
// asked): ETag and 304, redirects only on the same origin, the size limit, the timeout, and a
// token that never appears in what it reports.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { httpLoader } from './http.ts';
import type { Loaded } from './loader.ts';

async function serve(t: TestContext, handle: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const origin = (url: string, fields: Partial<Parameters<typeof httpLoader>[0]> = {}) => ({
  url,
  intervalMs: 60_000,
  timeoutMs: 2_000,
  caFile: undefined,
  bearerTokenFile: undefined,
  maxBytes: 1024,
  ...fields,
});

/** One read. */
async function once(loader: ReturnType<typeof httpLoader>): Promise<Loaded | Error> {
  const results: (Loaded | Error)[] = [];
  await loader((result) => results.push(result), new AbortController().signal, true);
  assert.equal(results.length, 1);
  return results[0]!;
}

test('a body is read with the token from its file; the ETag makes the next poll a 304, which reports nothing new', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'labeller-http-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const tokenFile = join(dir, 'token');
  writeFileSync(tokenFile, 'secret-1\n');
  const seen: (string | undefined)[] = [];
  const url = await serve(t, (req, res) => {
    seen.push(`${req.headers.authorization} ${req.headers['if-none-match'] ?? '-'}`);
    if (req.headers['if-none-match'] === '"v1"') return void res.writeHead(304).end();
    res.writeHead(200, { etag: '"v1"' }).end('{"web": {"costCenter": "cc-1"}}');
  });
  const reports: (Loaded | Error)[] = [];
  const stop = new AbortController();
  const running = httpLoader(origin(url, { intervalMs: 20, bearerTokenFile: tokenFile }))(
    (r) => reports.push(r),
    stop.signal,
    false,
  );
  while (seen.length < 3) await new Promise((resolve) => setTimeout(resolve, 10));
  stop.abort();
  await running;
  assert.deepEqual(seen.slice(0, 3), ['Bearer secret-1 -', 'Bearer secret-1 "v1"', 'Bearer secret-1 "v1"']);
  assert.equal(reports.length, 1, 'the 304s report nothing');
  assert.equal((reports[0] as Loaded).content.size, 1);
});

test('a redirect is followed on the same origin only; a body over maxBytes, a non-200 and a silent endpoint are failures that name the URL and not the token', async (t) => {
  const elsewhere = await serve(t, (_req, res) => res.end('{"a": "stolen"}'));
  const url = await serve(t, (req, res) => {
    if (req.url === '/moved') return void res.writeHead(302, { location: '/teams.json' }).end();
    if (req.url === '/away') return void res.writeHead(302, { location: `${elsewhere}/teams.json` }).end();
    if (req.url === '/big') return void res.end(`{"a": "${'x'.repeat(2000)}"}`);
    if (req.url === '/down') return void res.writeHead(503).end();
    if (req.url === '/silent') return;
    res.end('{"a": "b"}');
  });
  assert.equal((await once(httpLoader(origin(`${url}/moved`))) as Loaded).content.get('a'), 'b');
  const failures = await Promise.all(
    ['/away', '/big', '/down', '/silent'].map(async (path) =>
      String(await once(httpLoader(origin(`${url}${path}`, { timeoutMs: 300 }))))
    ),
  );
  assert.match(failures[0]!, /redirected to http:\/\/127\.0\.0\.1:\d+, another origin; not followed/);
  assert.match(failures[1]!, /larger than maxBytes \(1024 bytes\)/);
  assert.match(failures[2]!, /: 503/);
  assert.match(failures[3]!, /no answer in 300 ms/);
  for (const failure of failures) assert.match(failure, new RegExp(`^Error: ${url}/`));
});

test('a token in the query string is in no failure: each names the URL with its query left out', async (t) => {
  const token = 's3cret-query-token';
  const elsewhere = await serve(t, (_req, res) => res.end('{"a": "b"}'));
  const url = await serve(t, (req, res) => {
    const path = req.url?.split('?')[0];
    if (path === '/away') return void res.writeHead(302, { location: `${elsewhere}/t.json?token=${token}` }).end();
    if (path === '/big') return void res.end(`{"a": "${'x'.repeat(2000)}"}`);
    if (path === '/down') return void res.writeHead(503).end();
    if (path === '/bad') return void res.end('{"a": [');
    if (path === '/silent') return;
    res.end('{"a": "b"}');
  });
  // Port 1: nothing listens there, so the connection is refused.
  const refused = 'http://127.0.0.1:1';
  const failures = await Promise.all(
    [`${url}/away`, `${url}/big`, `${url}/down`, `${url}/bad`, `${url}/silent`, `${refused}/t.json`].map(
      async (at) => [at, String(await once(httpLoader(origin(`${at}?token=${token}`, { timeoutMs: 300 }))))] as const,
    ),
  );
  for (const [at, failure] of failures) {
    assert.ok(!failure.includes(token), failure);
    assert.ok(failure.startsWith(`Error: ${at}?…: `), failure);
    assert.equal(failure.split(at).length, 2, `named once: ${failure}`);
  }
});

test('a body that never completes is a timeout, as an endpoint that never answers is', async (t) => {
  const url = await serve(t, (req, res) => {
    if (req.url === '/silent') return;
    // Headers and part of the body, then nothing (a stalled upstream behind a proxy).
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write('{"a": ');
  });
  for (const path of ['/stalled', '/silent']) {
    const failure = String(await once(httpLoader(origin(`${url}${path}`, { timeoutMs: 300 }))));
    assert.equal(failure, `Error: ${url}${path}: no answer in 300 ms (timeout)`);
  }
});

test('a malformed HTTPS_PROXY fails the load, where the source set reports it, not the making of the loader', async () => {
  let loader: ReturnType<typeof httpLoader> | undefined;
  assert.doesNotThrow(() => {
    loader = httpLoader(origin('https://catalog.example.com/t.json'), { HTTPS_PROXY: 'http://proxy:notaport' });
  });
  await assert.rejects(loader!(() => {}, new AbortController().signal, true), /Invalid URL/);
});
