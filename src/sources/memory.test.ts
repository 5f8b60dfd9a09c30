import assert from 'node:assert/strict';
import { createHash, createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseSources } from '../config/sources.ts';
import type { Lease, LeaseApi } from '../kube/lease.ts';
import { createLogger } from '../util/log.ts';
import { UsageError } from '../util/usage.ts';
import type { SourceContent } from './content.ts';
import {
  formatRecord,
  LeaseMemory,
  type LeaseMemoryOptions,
  MemoryKey,
  memoryLeaseName,
  originOf,
  outageSinceRestart,
  parseRecord,
  readMemoryKey,
  RECORD_MAX_BYTES,
  recordKey,
  removedSince,
  SKETCH_SIZE,
  sketchOf,
} from './memory.ts';

const content = (keys: Iterable<string>): SourceContent => new Map([...keys].map((key) => [key, 'v']));
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => `team-${from + i}`);
const KEY = new MemoryKey(Buffer.from('a secret of thirty-two bytes ...'));

test('a sketch of a small source is exact: what was dropped is counted, key by key', () => {
  const before = sketchOf(content(['red', 'blue', 'green', 'gray']), KEY);
  assert.equal(before.sample?.length, 4);
  assert.equal(removedSince(before, content(['gray']), KEY), 3);
  assert.equal(removedSince(before, content(['red', 'blue', 'green', 'gray', 'new']), KEY), 0);
  // The key count alone would take four new keys for the four old ones.
  assert.equal(removedSince(before, content(['a', 'b', 'c', 'd']), KEY), 4);
});

test('a sketch of a large source keeps SKETCH_SIZE hashes and estimates the share dropped', () => {
  const before = sketchOf(content(range(0, 10_000)), KEY);
  assert.equal(before.sample?.length, SKETCH_SIZE);
  assert.equal(before.keys, 10_000);
  const estimate = removedSince(before, content(range(7_000, 10_000)), KEY);
  assert.ok(estimate > 6_000 && estimate < 8_000, `about 7000 dropped, estimated ${estimate}`);
  assert.equal(removedSince(before, content(range(0, 10_000)), KEY), 0);
});

test('the first read after a restart is an outage when it drops most of the keys remembered', () => {
  const before = sketchOf(content(['red', 'blue', 'green', 'gray']), KEY);
  assert.equal(
    outageSinceRestart(before, content(['gray']), KEY),
    'it drops 3 of the 4 keys it had before labeller started',
  );
  assert.equal(
    outageSinceRestart(before, content(['red', 'blue', 'gray']), KEY),
    undefined,
    'one key dropped is an edit',
  );
  assert.equal(outageSinceRestart(undefined, content(['gray']), KEY), undefined, 'nothing remembered');
  assert.match(
    outageSinceRestart(sketchOf(content(range(0, 1000)), KEY), content(range(0, 10)), KEY) ?? '',
    /^it drops about \d+ of the 1000 keys it had before labeller started$/,
  );
});

test('without a key only the count is kept, and a drop is judged by count, as the refusal says', () => {
  const before = sketchOf(content(range(0, 1000)), undefined);
  assert.deepEqual(before, { keys: 1000 }, 'no sample');
  assert.equal(
    outageSinceRestart(before, content(['team-0']), undefined),
    "it drops 999 of the 1000 keys it had before labeller started, by count (without --sources-memory-key-file the sources' memory keeps key counts only)",
  );
  assert.equal(outageSinceRestart(before, content(range(0, 900)), undefined), undefined, '1000 → 900: an edit');
  assert.equal(outageSinceRestart(before, content(range(5000, 6000)), undefined), undefined, 'what a count cannot see');
  // A count-only record read by a process with a key is judged by count too.
  assert.match(outageSinceRestart(before, content(['team-0']), KEY) ?? '', /drops 999 of the 1000 keys.*by count/);
});

test('a record is read back as written, within RECORD_MAX_BYTES; anything else is no record', () => {
  const sketch = sketchOf(content(range(0, 300)), KEY);
  const record = { origin: '0123456789abcdef', keyId: KEY.id, ...sketch };
  assert.deepEqual(parseRecord(formatRecord(record)), record);
  const largest = formatRecord({ ...record, keys: Number.MAX_SAFE_INTEGER });
  assert.ok(largest.length <= RECORD_MAX_BYTES, `${largest.length} bytes`);
  const counted = { origin: '0123456789abcdef', keys: 300 };
  assert.deepEqual(parseRecord(formatRecord(counted)), counted);
  assert.equal(formatRecord(counted), '{"v":2,"origin":"0123456789abcdef","keys":300}');
  for (
    const other of [
      undefined,
      'not json',
      '{"keys": "4"}',
      '{"source":"teams","keys":4,"sample":"AAAAAQ=="}', // the format before
      '{"v":2,"origin":"x","keys":-1}',
      '{"v":2,"origin":"x","keyId":"k","keys":1}',
      '{"v":2,"origin":"x","keyId":"k","keys":1,"sample":"AAAAAQAAAAI="}',
    ]
  ) {
    assert.equal(parseRecord(other), undefined, other);
  }
});

test('the key is HMAC-SHA-256; its id names it without giving it away', () => {
  for (const secret of [Buffer.from('sixteen bytes!!!'), Buffer.alloc(100, 7)]) {
    const key = new MemoryKey(secret);
    const hmac = (text: string) => createHmac('sha256', secret).update(text).digest();
    assert.deepEqual(key.mac('some text'), hmac('some text'));
    assert.equal(key.keyHash('payments'), hmac('key\0payments').readUInt32BE(0));
    assert.equal(key.id, hmac('labeller sources memory key id').toString('hex', 0, 8));
  }
  assert.notEqual(new MemoryKey(Buffer.from('sixteen bytes!!!')).id, new MemoryKey(Buffer.from('sixteen bytes!!?')).id);
});

test('the key file: its bytes less trailing white space, 16 of them at least; else a usage error naming the fix', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'labeller-memory-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'key');
  writeFileSync(file, 'kQ3n8Zr1v0XyP2aLm5TbWc7eHs9uJd4g\n');
  assert.equal(readMemoryKey(file).id, new MemoryKey(Buffer.from('kQ3n8Zr1v0XyP2aLm5TbWc7eHs9uJd4g')).id);
  writeFileSync(file, 'short\n');
  assert.throws(() => readMemoryKey(file), (e: unknown) => e instanceof UsageError && /holds 5 bytes/.test(e.message));
  assert.throws(
    () => readMemoryKey(join(dir, 'missing')),
    (e: unknown) => e instanceof UsageError && /cannot read it \(ENOENT\).*head -c 32 \/dev\/urandom/.test(e.message),
  );
});

test("a source's origin is where its content comes from, not how it is read", () => {
  const origin = (source: object) => originOf(parseSources({ s: source }, 'sources').get('s')!.origin);
  const url = 'https://catalog.example.com/teams.json?view=all';
  const plain = origin({ url });
  for (
    const tuned of [{ interval: '1m' }, { timeout: '3s' }, { maxBytes: 2048 }, { caFile: '/ca.crt' }, {
      bearerTokenFile: '/token',
    }]
  ) {
    assert.equal(origin({ url, ...tuned }), plain, JSON.stringify(tuned));
  }
  assert.equal(origin({ url: `${url}#part` }), plain, 'the fragment is not sent');
  assert.equal(
    origin({ url: 'https://CATALOG.example.com:443/teams.json?view=all' }),
    plain,
    'as the URL parser has it',
  );
  assert.notEqual(origin({ url: 'https://catalog.example.com/teams.json?view=some' }), plain, 'the query chooses');
  assert.notEqual(origin({ url: 'https://cmdb.example.com/teams.json?view=all' }), plain);
  const configMap = origin({ configMap: { namespace: 'platform', name: 'teams', key: 'teams.yaml' } });
  assert.notEqual(origin({ configMap: { namespace: 'platform', name: 'teams' } }), configMap);
  assert.notEqual(origin({ configMap: { namespace: 'other', name: 'teams', key: 'teams.yaml' } }), configMap);
  assert.notEqual(origin({ file: '/etc/a.yaml' }), origin({ file: '/etc/b.yaml' }));
});

test("the memory's Lease is the leader-election group's, else one per field manager; a record is the source's name", () => {
  assert.equal(memoryLeaseName('labeller', 'labeller'), 'labeller-sources');
  assert.match(memoryLeaseName('platform/Labeller', undefined), /^sources-platform-labeller-[0-9a-f]{10}$/);
  assert.notEqual(memoryLeaseName('a', undefined), memoryLeaseName('b', undefined));
  assert.equal(recordKey('teams'), 'sources.labeller/teams');
  assert.equal(recordKey('a'.repeat(63)), `sources.labeller/${'a'.repeat(63)}`);
  assert.match(recordKey('Not A Name'), /^sources\.labeller\/hash\.[0-9a-f]{16}$/);
});

/** Leases kept in a map: the memory's logic, not the API's (test/e2e/sources.test.ts runs it against kube-apiserver). */
function leaseStore() {
  const leases = new Map<string, Lease>();
  let version = 0;
  const api = {
    get: (_ns: string, name: string) => Promise.resolve(leases.get(name)),
    create: (lease: Lease) => {
      if (leases.has(lease.metadata.name)) return Promise.resolve(undefined);
      const created = { ...lease, metadata: { ...lease.metadata, resourceVersion: String(++version) } };
      leases.set(lease.metadata.name, created);
      return Promise.resolve(created);
    },
    update: (lease: Lease) => {
      if (leases.get(lease.metadata.name)?.metadata.resourceVersion !== lease.metadata.resourceVersion) {
        return Promise.resolve(undefined);
      }
      const updated = { ...lease, metadata: { ...lease.metadata, resourceVersion: String(++version) } };
      leases.set(lease.metadata.name, updated);
      return Promise.resolve(updated);
    },
  };
  const annotations = () => leases.get(LEASE)?.metadata.annotations ?? {};
  return { leases, api: api as unknown as LeaseApi, annotations };
}

const LEASE = 'labeller-sources';
const quiet = createLogger({ level: 'error', format: 'json', write: () => {} });
const memoryOf = (api: LeaseApi, options: Partial<LeaseMemoryOptions> = {}) =>
  new LeaseMemory(api, { namespace: 'labeller', name: LEASE, key: KEY, log: quiet, ...options });
const FOUR = content(['red', 'blue', 'green', 'gray']);
const TEAMS = originOf({ type: 'configMap', namespace: 'platform', name: 'teams', key: undefined });
const SITES = originOf({ type: 'file', path: '/etc/sites.yaml' });
/** Lets the background writes run. */
const settle = async () => {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
};

test('a source started again later (a reload) recalls what this process recorded since, not what it read at start', async () => {
  const { api, annotations } = leaseStore();
  const first = memoryOf(api);
  assert.equal(await first.recall('teams', TEAMS), undefined);
  first.remember('teams', TEAMS, FOUR);
  await first.close();

  const memory = memoryOf(api);
  assert.equal(
    (await memory.recall('teams', TEAMS))?.outage(content(['gray'])),
    outageSinceRestart(
      sketchOf(FOUR, KEY),
      content(['gray']),
      KEY,
    ),
    'read at start',
  );
  // The source is edited step by step, away from every key it had at start.
  const edited = content(['a', 'b', 'c', 'd', 'e']);
  memory.remember('teams', TEAMS, edited);
  assert.equal((await memory.recall('teams', TEAMS))?.outage(edited), undefined, 'still waiting to be written: counts');
  memory.remember('sites', SITES, content(['x']));
  await memory.close();
  assert.equal((await memory.recall('teams', TEAMS))?.keys, 5, 'written: counts');
  assert.deepEqual(Object.keys(annotations()).sort(), ['sources.labeller/sites', 'sources.labeller/teams']);
});

test('five edits of how a source is read leave one record, which the re-tuned source recalls (issue 47, item 5)', async () => {
  const { api, annotations } = leaseStore();
  for (const interval of ['1m', '2m', '3m', '4m', '5m']) {
    const spec = parseSources({ catalog: { url: 'https://cmdb.example.com/teams', interval } }, 'sources').get(
      'catalog',
    )!;
    // Each edit restarts the source, in this process or the next.
    const memory = memoryOf(api);
    memory.retain(['catalog']);
    const before = await memory.recall('catalog', originOf(spec.origin));
    if (interval !== '1m') assert.equal(before?.keys, 1000, `${interval}: remembered across the edit`);
    memory.remember('catalog', originOf(spec.origin), content(range(0, 1000)));
    await memory.close();
  }
  assert.deepEqual(Object.keys(annotations()), ['sources.labeller/catalog']);
  const bytes = Object.entries(annotations()).reduce((sum, [k, v]) => sum + k.length + v.length, 0);
  assert.ok(bytes < 1_500, `${bytes} bytes`);
  // Pointed elsewhere: nothing to compare with; its first record replaces the old one.
  const memory = memoryOf(api);
  const elsewhere = originOf({ type: 'file', path: '/etc/catalog.json' });
  assert.equal(await memory.recall('catalog', elsewhere), undefined);
  memory.remember('catalog', elsewhere, content(['one']));
  await memory.close();
  assert.equal(parseRecord(annotations()['sources.labeller/catalog'])?.keys, 1);
});

test("the records of sources no longer in the config, and of the format before, are deleted; others' annotations stay", async () => {
  const { leases, api, annotations } = leaseStore();
  leases.set(LEASE, {
    metadata: {
      name: LEASE,
      resourceVersion: '1',
      annotations: {
        'labeller/source.0123456789abcdef': '{"source":"teams","keys":4,"sample":"AAAAAQ=="}',
        'labeller/source.fedcba9876543210': '{"source":"teams","keys":4,"sample":"AAAAAg=="}',
        'example.com/note': 'not ours',
      },
    },
    spec: {},
  });
  // At start: the sources of the config, then their recall reads the Lease and sees what to delete.
  const memory = memoryOf(api);
  memory.retain(['teams', 'sites']);
  assert.equal(await memory.recall('teams', TEAMS), undefined, 'a record of the format before is none');
  await settle();
  assert.deepEqual(
    annotations(),
    { 'example.com/note': 'not ours' },
    'the old format deleted without waiting for a record',
  );
  memory.remember('teams', TEAMS, FOUR);
  memory.remember('sites', SITES, content(['x', 'y']));
  await settle();
  assert.deepEqual(Object.keys(annotations()).sort(), [
    'example.com/note',
    'sources.labeller/sites',
    'sources.labeller/teams',
  ]);

  // A reload drops sites: its record goes at once; one still waiting is not written.
  memory.retain(['teams']);
  memory.remember('sites', SITES, content(['late']));
  await settle();
  assert.deepEqual(Object.keys(annotations()).sort(), ['example.com/note', 'sources.labeller/teams']);
  await memory.close();

  // A process of another config finds records it has no source for: deleted at its start.
  const other = memoryOf(api);
  other.retain(['owners']);
  assert.equal(await other.recall('owners', SITES), undefined);
  await other.close();
  assert.deepEqual(Object.keys(annotations()), ['example.com/note']);
});

test('a memory never told its sources deletes only the format before; with none, it never reads the Lease', async () => {
  const { leases, api, annotations } = leaseStore();
  let reads = 0;
  const counting = { ...api, get: (ns: string, name: string) => (reads++, api.get(ns, name)) } as unknown as LeaseApi;
  const idle = memoryOf(counting);
  idle.retain([]);
  await settle();
  await idle.close();
  assert.equal(reads, 0, 'no sources: the Lease is not read (it may not be granted)');

  const memory = memoryOf(api);
  memory.remember('teams', TEAMS, FOUR);
  await memory.close();
  leases.set(LEASE, {
    ...leases.get(LEASE)!,
    metadata: {
      ...leases.get(LEASE)!.metadata,
      annotations: { ...annotations(), 'sources.labeller/sites': '{}', 'labeller/source.0123456789abcdef': '{}' },
    },
  });
  const untold = memoryOf(api);
  untold.remember('teams', TEAMS, content(['a', 'b']));
  await untold.close();
  assert.deepEqual(Object.keys(annotations()).sort(), ['sources.labeller/sites', 'sources.labeller/teams']);
});

test('a record written under another key, or without one, is none; the next record replaces it', async () => {
  const { api, annotations } = leaseStore();
  const first = memoryOf(api);
  first.remember('teams', TEAMS, FOUR);
  await first.close();
  const rotated = memoryOf(api, { key: new MemoryKey(Buffer.from('another secret of 32 bytes .....')) });
  assert.equal(await rotated.recall('teams', TEAMS), undefined, 'another key');
  const keyless = memoryOf(api, { key: undefined });
  assert.equal(await keyless.recall('teams', TEAMS), undefined, 'no key');
  keyless.remember('teams', TEAMS, FOUR);
  await keyless.close();
  const counted = parseRecord(annotations()['sources.labeller/teams']);
  assert.ok(counted && counted.keys === 4 && counted.sample === undefined && counted.keyId === undefined);
  assert.equal((await memoryOf(api, { key: undefined }).recall('teams', TEAMS))?.keys, 4, 'count only, read back');
  assert.equal(
    await memoryOf(api).recall('teams', TEAMS),
    undefined,
    'a keyed memory does not take a count-only record',
  );
  await rotated.close();
});

/** 1,000 plausible key names, as a dictionary an attacker would try. */
const WORDS = ['payments', 'search', 'platform', 'checkout', 'billing', 'identity', 'mobile', 'data', 'infra', 'web']
  .flatMap((team) =>
    ['core', 'api', 'ui', 'ops', 'ml', 'eu', 'us', 'apac', 'dev', 'prod'].flatMap((part) =>
      ['', '-1', '-2', '-team', '-svc', '-east', '-west', '-blue', '-green', '-red'].map((tail) =>
        `${team}-${part}${tail}`
      )
    )
  );

test('nothing stored gives the keys away: a dictionary over the record finds none without the secret', async () => {
  assert.equal(new Set(WORDS).size, 1000);
  const { api, annotations } = leaseStore();
  const url = 'https://cmdb.example.com/teams?token=s3cr3t-t0ken';
  const origin = originOf(parseSources({ cmdb: { url } }, 'sources').get('cmdb')!.origin);
  const memory = memoryOf(api);
  memory.retain(['cmdb']);
  memory.remember('cmdb', origin, content(WORDS));
  await memory.close();
  const stored = JSON.stringify(annotations());
  for (const text of ['cmdb.example.com', 's3cr3t', 'token', ...WORDS]) assert.ok(!stored.includes(text), text);
  const record = parseRecord(annotations()['sources.labeller/cmdb'])!;
  assert.equal(record.sample?.length, SKETCH_SIZE);
  const sample = new Set(record.sample);

  const found = (hash: (word: string) => number) => WORDS.filter((word) => sample.has(hash(word))).length;
  const sha = (text: string) => createHash('sha256').update(text).digest();
  // The attack that recovered 256 of 256 keys from the format before: unsalted SHA-256 prefixes.
  assert.equal(found((word) => sha(word).readUInt32BE(0)), 0);
  assert.equal(found((word) => sha(`key\0${word}`).readUInt32BE(0)), 0);
  // HMAC under keys one might guess, the stored key id and fingerprint among them.
  const guesses = ['', 'labeller', LEASE, 'sources.labeller', 'secret', 'changeme', record.keyId!, record.origin, url];
  for (const guess of guesses) {
    const hmac = (word: string) => createHmac('sha256', guess).update(`key\0${word}`).digest().readUInt32BE(0);
    assert.equal(found(hmac), 0, JSON.stringify(guess));
    assert.equal(found((word) => createHmac('sha256', guess).update(word).digest().readUInt32BE(0)), 0);
  }
  assert.notEqual(record.origin, sha(origin).toString('hex', 0, 8), 'the origin is keyed too');
  // The secret alone turns the sample back into keys: it is what must stay off the Lease.
  assert.equal(found((word) => KEY.keyHash(word)), SKETCH_SIZE);
});
