import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { DiscoveryCache } from '../kube/discoverycache.ts';
import { parseSources } from '../config/sources.ts';
import { createLogger } from '../util/log.ts';
import { type SourceChange, SourceSet } from './sourceset.ts';
import type { SourceContent } from './content.ts';
import { MemoryKey, remembered, sketchOf, type SourceMemory } from './memory.ts';

const quiet = createLogger({ level: 'error', format: 'json', write: () => {} });

/** A SourceSet over file sources only (no API access), and what its listeners heard. */
function sourceSet(memory?: SourceMemory) {
  const set = new SourceSet({
    apis: () => {
      throw new Error('file sources only');
    },
    discovery: {} as DiscoveryCache,
    once: false,
    memory,
    log: quiet,
  });
  const heard: [string, SourceChange][] = [];
  set.onChange((name, change) => heard.push([name, change]));
  return { set, heard };
}

const until = async (done: () => boolean): Promise<void> => {
  for (let i = 0; i < 400 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 25));
  assert.ok(done(), 'in time');
};

test('a required source that has never loaded keeps labeller from ready; an optional one is a note; a failure after loading keeps the last content', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'labeller-sources-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const [teams, sites] = [join(dir, 'teams.yaml'), join(dir, 'sites.yaml')];
  const { set, heard } = sourceSet();
  t.after(() => set.stop());
  set.apply(parseSources({ teams: { file: teams, required: true }, sites: { file: sites } }, 'kinds.yaml: sources'));
  await set.settled(['teams', 'sites']);

  assert.deepEqual(set.problems(), [`source teams has not loaded: ${teams}: cannot read the file (ENOENT)`]);
  assert.deepEqual(set.notes(), ['source sites has not loaded; labels that read it are held']);
  assert.equal(set.loaded('teams'), false);

  writeFileSync(teams, 'payments: {costCenter: cc-1}\nsearch: {costCenter: cc-2}\n');
  await until(() => set.loaded('teams'));
  assert.deepEqual(set.problems(), []);
  assert.deepEqual(heard, [['teams', 'all']], 'the first load: every object that reads it');
  assert.equal(set.lookup('teams', 'payments', 'costCenter'), 'cc-1');

  // A change: only the key whose entry changed. Then unreadable content: the last good content stays.
  writeFileSync(teams, 'payments: {costCenter: cc-1}\nsearch: {costCenter: cc-9}\n');
  await until(() => heard.length === 2);
  assert.deepEqual(heard[1], ['teams', ['search']]);
  writeFileSync(teams, '- not a mapping\n');
  await until(() => set.notes().length === 2);
  assert.match(set.notes()[0] ?? '', /^source teams cannot be read; its last good content stays: /);
  assert.equal(set.lookup('teams', 'search', 'costCenter'), 'cc-9');
  assert.deepEqual(
    set.states().map(({ name, up, keys }) => ({ name, up, keys })),
    [{ name: 'teams', up: false, keys: 2 }, { name: 'sites', up: false, keys: 0 }],
  );
});

test('content that looks like an outage (null, {}, an error document) keeps the last good content unless the source allows it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'labeller-sources-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const [cmdb, open] = [join(dir, 'cmdb.json'), join(dir, 'open.json')];
  const good = JSON.stringify({ red: { cc: 'cc-1' }, green: { cc: 'cc-2' }, blue: { cc: 'cc-3' } });
  writeFileSync(cmdb, good);
  writeFileSync(open, good);
  const { set, heard } = sourceSet();
  t.after(() => set.stop());
  set.apply(parseSources({ cmdb: { file: cmdb }, open: { file: open, allowMassRemoval: true } }, 'sources'));
  await until(() => set.loaded('cmdb') && set.loaded('open'));
  for (const outage of ['null', '{}', '{"error": "maintenance window"}']) {
    writeFileSync(cmdb, outage);
    await until(() => set.states()[0]?.up === false);
    assert.equal(set.lookup('cmdb', 'green', 'cc'), 'cc-2', `${outage}: the last good content stays`);
    assert.match(set.notes()[0] ?? '', /^source cmdb cannot be read; its last good content stays: /);
    assert.ok(!heard.some(([name, change]) => name === 'cmdb' && change !== 'all'), `${outage}: no object requeued`);
    if (outage.includes('error')) {
      assert.match(
        set.notes()[0] ?? '',
        /it drops 3 of its 3 keys at once; refused as an outage \(set allowMassRemoval/,
      );
    }
    writeFileSync(cmdb, good);
    await until(() => set.states()[0]?.up === true);
  }
  // Allowed: the drop is taken, and the objects that read the dropped keys are queued.
  writeFileSync(open, '{"error": "maintenance window"}');
  await until(() => heard.some(([name, change]) => name === 'open' && change !== 'all'));
  assert.equal(set.lookup('open', 'green', 'cc'), undefined);
});

test("a URL source's query string (a token) reaches no log line, Event, /readyz line or note; its host and path do", async (t) => {
  const token = 's3cret-query-token';
  const server = createServer((_req, res) => res.writeHead(503).end());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/teams.json`;
  const said: string[] = [];
  const set = new SourceSet({
    apis: () => {
      throw new Error('no API access');
    },
    discovery: {} as DiscoveryCache,
    once: false,
    events: { sourceFailed: (note) => said.push(note) },
    log: createLogger({ level: 'debug', format: 'json', write: (line) => said.push(line) }),
  });
  t.after(() => set.stop());
  set.apply(parseSources({ catalog: { url: `${url}?token=${token}`, allowHTTP: true, required: true } }, 'sources'));
  await set.settled(['catalog']);
  said.push(...set.problems(), ...set.notes());
  assert.equal(said.filter((line) => line.includes(`${url}?…: 503`)).length, 3, said.join('\n'));
  assert.deepEqual(said.filter((line) => line.includes(token)), []);
});

/** A memory kept in a map, as the Lease keeps it across processes: by source name, for one origin. */
function mapMemory(): SourceMemory & {
  readonly records: Map<string, { origin: string; content: SourceContent }>;
  readonly retained: string[][];
} {
  const key = new MemoryKey(Buffer.from('a secret of thirty-two bytes ...'));
  const records = new Map<string, { origin: string; content: SourceContent }>();
  const retained: string[][] = [];
  return {
    records,
    retained,
    recall: (name, origin) => {
      const record = records.get(name);
      return Promise.resolve(
        record?.origin === origin ? remembered(sketchOf(record.content, key), key) : undefined,
      );
    },
    remember: (name, origin, content) => void records.set(name, { origin, content }),
    retain: (names) => {
      retained.push([...names]);
      for (const name of records.keys()) if (!retained.at(-1)!.includes(name)) records.delete(name);
    },
    close: () => Promise.resolve(),
  };
}

test('a restart during an outage: the first read is checked against the key set remembered, and refused', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'labeller-sources-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'teams.json');
  const specs = parseSources({ teams: { file } }, 'sources');
  writeFileSync(file, JSON.stringify({ red: 'cc-1', blue: 'cc-2', green: 'cc-3', gray: 'cc-4' }));
  const memory = mapMemory();
  const first = sourceSet(memory);
  first.set.apply(specs);
  await until(() => first.set.loaded('teams'));
  await first.set.stop();
  assert.equal(memory.records.size, 1, 'the key set is remembered');

  // The outage begins while no labeller runs; the next one starts into it.
  writeFileSync(file, JSON.stringify({ gray: 'cc-9' }));
  const second = sourceSet(memory);
  t.after(() => second.set.stop());
  second.set.apply(specs);
  await second.set.settled(['teams']);
  assert.equal(second.set.loaded('teams'), false, 'held, as before its first good read');
  assert.deepEqual(second.heard, []);
  assert.match(second.set.notes()[0] ?? '', /source teams has not loaded/);

  // The source is back: taken, and remembered again.
  writeFileSync(file, JSON.stringify({ red: 'cc-1', blue: 'cc-2', green: 'cc-3', gray: 'cc-5' }));
  await until(() => second.set.loaded('teams'));
  assert.equal(second.set.lookup('teams', 'gray', undefined), 'cc-5');
  assert.deepEqual(second.heard, [['teams', 'all']]);
});

test("each config's source names are told to the memory, which forgets the others; a source pointed elsewhere starts afresh", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'labeller-sources-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const [teams, moved, sites] = [join(dir, 'teams.json'), join(dir, 'moved.json'), join(dir, 'sites.json')];
  writeFileSync(teams, JSON.stringify({ red: 'cc-1', blue: 'cc-2', green: 'cc-3', gray: 'cc-4' }));
  writeFileSync(moved, JSON.stringify({ gray: 'cc-9' }));
  writeFileSync(sites, JSON.stringify({ a: 'x' }));
  const memory = mapMemory();
  const first = sourceSet(memory);
  first.set.apply(parseSources({ teams: { file: teams }, sites: { file: sites } }, 'sources'));
  await until(() => first.set.loaded('teams') && first.set.loaded('sites'));
  // A reload drops sites.
  first.set.apply(parseSources({ teams: { file: teams } }, 'sources'));
  assert.deepEqual(memory.retained, [['teams', 'sites'], ['teams']]);
  assert.deepEqual([...memory.records.keys()], ['teams']);
  await first.set.stop();

  // Pointed at another file: its one key is that file's content, not an outage of the other.
  const second = sourceSet(memory);
  t.after(() => second.set.stop());
  second.set.apply(parseSources({ teams: { file: moved } }, 'sources'));
  await until(() => second.set.loaded('teams'));
  assert.equal(second.set.lookup('teams', 'gray', undefined), 'cc-9');
});

test('a source that allows mass removal takes its first read after a restart whatever was remembered', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'labeller-sources-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'teams.json');
  const specs = parseSources({ teams: { file, allowMassRemoval: true } }, 'sources');
  const memory = mapMemory();
  writeFileSync(file, JSON.stringify({ red: 'cc-1', blue: 'cc-2', green: 'cc-3' }));
  const first = sourceSet(memory);
  first.set.apply(specs);
  await until(() => first.set.loaded('teams'));
  await first.set.stop();
  writeFileSync(file, JSON.stringify({ gray: 'cc-9' }));
  const second = sourceSet(memory);
  t.after(() => second.set.stop());
  second.set.apply(specs);
  await until(() => second.set.loaded('teams'));
  assert.equal(second.set.lookup('teams', 'gray', undefined), 'cc-9');
});

test('a catalogue that shrank and stays so is taken after acceptSmallerAfter, and remembered: a restart never wedges on what it had before (issue 47, item 4)', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'labeller-sources-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'teams.json');
  const specs = parseSources({ teams: { file, acceptSmallerAfter: '400ms' } }, 'sources');
  const ten = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`team-${i}`, `cc-${i}`]));
  writeFileSync(file, JSON.stringify(ten));
  const memory = mapMemory();
  const first = sourceSet(memory);
  first.set.apply(specs);
  await until(() => first.set.loaded('teams'));
  await first.set.stop();

  // While no labeller runs, the catalogue loses 6 of its 10 entries, for good.
  const four = Object.fromEntries(Object.entries(ten).slice(6));
  writeFileSync(file, JSON.stringify(four));
  const second = sourceSet(memory);
  t.after(() => second.set.stop());
  second.set.apply(specs);
  await second.set.settled(['teams']);
  assert.equal(second.set.loaded('teams'), false, 'held at first');
  assert.match(second.set.notes()[0] ?? '', /source teams has not loaded/);
  await until(() => second.set.loaded('teams'));
  assert.equal(second.set.lookup('teams', 'team-9', undefined), 'cc-9');
  assert.equal(second.set.lookup('teams', 'team-0', undefined), undefined);
  assert.deepEqual(second.heard, [['teams', 'all']]);
  await second.set.stop();

  // Remembered: the next restart takes the four keys at once.
  const third = sourceSet(memory);
  t.after(() => third.set.stop());
  third.set.apply(parseSources({ teams: { file, acceptSmallerAfter: '0s' } }, 'sources'));
  await until(() => third.set.loaded('teams'));
});

test('held content that changes starts its wait again; empty content is never taken; 0s never takes', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'labeller-sources-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const shrinking = join(dir, 'shrinking.json');
  const emptied = join(dir, 'emptied.json');
  const never = join(dir, 'never.json');
  const ten = JSON.stringify(Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`k${i}`, `v${i}`])));
  for (const file of [shrinking, emptied, never]) writeFileSync(file, ten);
  const { set } = sourceSet();
  t.after(() => set.stop());
  set.apply(parseSources({
    shrinking: { file: shrinking, acceptSmallerAfter: '1s' },
    emptied: { file: emptied, acceptSmallerAfter: '300ms' },
    never: { file: never, acceptSmallerAfter: '0s' },
  }, 'sources'));
  await until(() => ['shrinking', 'emptied', 'never'].every((name) => set.loaded(name)));
  writeFileSync(shrinking, JSON.stringify({ k0: 'v0', k1: 'v1' }));
  writeFileSync(emptied, '{}');
  writeFileSync(never, JSON.stringify({ k0: 'v0' }));
  await until(() => set.notes().length === 3);
  assert.match(
    set.notes().join('\n'),
    /drops 8 of its 10 keys at once; refused as an outage .*; taken if it stays the same for 1s/,
  );
  // Changed before its second: the wait begins again.
  await new Promise((resolve) => setTimeout(resolve, 600));
  writeFileSync(shrinking, JSON.stringify({ k0: 'v0', k2: 'v2' }));
  await new Promise((resolve) => setTimeout(resolve, 700));
  assert.equal(set.lookup('shrinking', 'k5', undefined), 'v5', 'not yet: a new wait');
  await until(() => set.lookup('shrinking', 'k5', undefined) === undefined);
  assert.equal(set.lookup('shrinking', 'k2', undefined), 'v2');
  // Empty, and never: the last good content stays.
  await new Promise((resolve) => setTimeout(resolve, 500));
  assert.equal(set.lookup('emptied', 'k5', undefined), 'v5');
  assert.equal(set.lookup('never', 'k5', undefined), 'v5');
});

test('a failed read ends a hold: content that drops most keys is taken only after a wait with no failed read in it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'labeller-sources-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'teams.json');
  const ten = JSON.stringify(Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`k${i}`, `v${i}`])));
  const two = JSON.stringify({ k0: 'v0', k1: 'v1' });
  writeFileSync(file, ten);
  const { set } = sourceSet();
  t.after(() => set.stop());
  set.apply(parseSources({ teams: { file, acceptSmallerAfter: '800ms' } }, 'sources'));
  await until(() => set.loaded('teams'));
  writeFileSync(file, two);
  await until(() => /taken if it stays the same/.test(set.notes().join()));
  // Malformed for a while (a half-written mount, an error page), then the smaller content again.
  writeFileSync(file, '{"k0": ');
  await until(() => set.notes().length === 1 && !/taken if it stays the same/.test(set.notes().join()));
  await new Promise((resolve) => setTimeout(resolve, 1000));
  assert.equal(set.lookup('teams', 'k5', undefined), 'v5', 'not taken: the source did not stay the same');
  writeFileSync(file, two);
  await until(() => /taken if it stays the same/.test(set.notes().join()));
  await until(() => set.lookup('teams', 'k5', undefined) === undefined);
  assert.equal(set.lookup('teams', 'k1', undefined), 'v1');
});
