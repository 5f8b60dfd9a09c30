import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Lease, LeaseApi } from '../kube/lease.ts';
import { createLogger } from '../util/log.ts';
import type { SourceContent } from './content.ts';
import {
  formatSketch,
  LeaseMemory,
  memoryLeaseName,
  outageSinceRestart,
  parseSketch,
  removedSince,
  SKETCH_SIZE,
  sketchOf,
} from './memory.ts';

const content = (keys: Iterable<string>): SourceContent => new Map([...keys].map((key) => [key, 'v']));
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => `team-${from + i}`);

test('a sketch of a small source is exact: what was dropped is counted, key by key', () => {
  const before = sketchOf(content(['red', 'blue', 'green', 'gray']));
  assert.equal(before.sample.length, 4);
  assert.equal(removedSince(before, content(['gray'])), 3);
  assert.equal(removedSince(before, content(['red', 'blue', 'green', 'gray', 'new'])), 0);
  // The key count alone would take four new keys for the four old ones.
  assert.equal(removedSince(before, content(['a', 'b', 'c', 'd'])), 4);
});

test('a sketch of a large source keeps SKETCH_SIZE hashes and estimates the share dropped', () => {
  const before = sketchOf(content(range(0, 10_000)));
  assert.equal(before.sample.length, SKETCH_SIZE);
  assert.equal(before.keys, 10_000);
  const estimate = removedSince(before, content(range(7_000, 10_000)));
  assert.ok(estimate > 6_000 && estimate < 8_000, `about 7000 dropped, estimated ${estimate}`);
  assert.equal(removedSince(before, content(range(0, 10_000))), 0);
});

test('the first read after a restart is an outage when it drops most of the keys remembered', () => {
  const before = sketchOf(content(['red', 'blue', 'green', 'gray']));
  assert.equal(
    outageSinceRestart(before, content(['gray'])),
    'it drops 3 of the 4 keys it had before labeller started',
  );
  assert.equal(outageSinceRestart(before, content(['red', 'blue', 'gray'])), undefined, 'one key dropped is an edit');
  assert.equal(outageSinceRestart(undefined, content(['gray'])), undefined, 'nothing remembered');
  assert.match(
    outageSinceRestart(sketchOf(content(range(0, 1000))), content(range(0, 10))) ?? '',
    /^it drops about \d+ of the 1000 keys it had before labeller started$/,
  );
});

test('a record is read back as written; anything else is no record', () => {
  const sketch = sketchOf(content(range(0, 300)));
  assert.deepEqual(parseSketch(formatSketch('teams', sketch)), sketch);
  assert.ok(formatSketch('teams', sketch).length < 1500, 'about 1.4 KB at most');
  assert.equal(parseSketch('not json'), undefined);
  assert.equal(parseSketch('{"keys": "4"}'), undefined);
});

test("the memory's Lease is the leader-election group's, else one per field manager", () => {
  assert.equal(memoryLeaseName('labeller', 'labeller'), 'labeller-sources');
  assert.match(memoryLeaseName('platform/Labeller', undefined), /^sources-platform-labeller-[0-9a-f]{10}$/);
  assert.notEqual(memoryLeaseName('a', undefined), memoryLeaseName('b', undefined));
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
  return { leases, api: api as unknown as LeaseApi };
}

const quiet = createLogger({ level: 'error', format: 'json', write: () => {} });

test('a source started again later (a reload) recalls what this process recorded since, not what it read at start', async () => {
  const { leases, api } = leaseStore();
  const options = { namespace: 'labeller', name: 'labeller-sources', log: quiet };
  const first = new LeaseMemory(api, options);
  assert.equal(await first.recall('origin-a'), undefined);
  const old = sketchOf(content(['red', 'blue', 'green', 'gray']));
  first.remember('origin-a', 'teams', old);
  await first.close();

  const memory = new LeaseMemory(api, options);
  assert.deepEqual(await memory.recall('origin-a'), old, 'read at start');
  // The source is edited step by step, away from every key it had at start.
  const edited = sketchOf(content(['a', 'b', 'c', 'd', 'e']));
  memory.remember('origin-a', 'teams', edited);
  assert.deepEqual(await memory.recall('origin-a'), edited, 'still waiting to be written: counts');
  memory.remember('origin-b', 'sites', sketchOf(content(['x'])));
  await memory.close();
  assert.deepEqual(await memory.recall('origin-a'), edited, 'written: counts');
  const annotations = leases.get('labeller-sources')?.metadata.annotations ?? {};
  assert.deepEqual(Object.keys(annotations).sort(), ['labeller/source.origin-a', 'labeller/source.origin-b']);
});
