// Rows of labels from a source of truth (--sources): an entry of a ConfigMap source changed, and
// fanned out to the N objects that looked it up (bench/lib/related.ts's fan-out, twice, each
// followed by the tight loop), and the heap the lookup index adds per cached object.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { randomUUID } from 'node:crypto';
import type { PartialObjectMetadata } from '../../src/apimachinery/objects.ts';
import { LookupIndex, lookupKey } from '../../src/labelling/lookupindex.ts';
import { projector } from '../../src/labelling/object.ts';
import type { Bench } from './context.ts';
import { TEAM } from './launch.ts';
import { createNamespace } from '../../test/cluster/cluster.ts';
import { fanOut, type FanOutDriver, type FanOutResults, fanOutRows, type RelatedOptions } from './related.ts';
import { bytes, type Row } from './report.ts';

export interface SourcesResults extends FanOutResults {
  /** Heap of the lookup index per cached object, over `n` objects looking up one of 20 keys. */
  lookupIndexBytes?: number | undefined;
}

/** The source: ConfigMap `teams` in its own namespace, the objects' namespace labelled team=payments. */
const driver = (dir: string): FanOutDriver => {
  const source = (namespace: string) => `/api/v1/namespaces/${namespace}-src/configmaps/teams`;
  const data = (value: string) => ({
    'teams.yaml': `payments: { costCenter: ${value} }\nsearch: { costCenter: other }\n`,
  });
  return {
    name: 'sources',
    prepare: async (bench, namespace) => {
      await createNamespace(bench.admin, namespace, { team: 'payments' });
      await createNamespace(bench.admin, `${namespace}-src`, {});
      await bench.admin.json('POST', `/api/v1/namespaces/${namespace}-src/configmaps`, {
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ metadata: { name: 'teams' }, data: data('a') }),
      });
    },
    labelArgs: (namespace) => {
      const config = join(dir, `${namespace}.yaml`);
      writeFileSync(
        config,
        `sources:\n  teams:\n    configMap: { namespace: ${namespace}-src, name: teams, key: teams.yaml }\nlabels:\n  ${TEAM}: "{{teams[namespace.labels.team].costCenter}}"\n`,
      );
      return ['--config', config];
    },
    set: (bench, namespace, value) =>
      bench.admin.json('PATCH', source(namespace), {
        headers: { 'content-type': 'application/merge-patch+json' },
        body: JSON.stringify({ data: data(value) }),
      }),
    alsoListed: [],
  };
};

export async function benchSources(bench: Bench, options: RelatedOptions): Promise<SourcesResults> {
  const lookupIndexBytes = measureLookupIndex(options.n);
  if (lookupIndexBytes !== undefined) bench.log(`sources: lookup index ${bytes(lookupIndexBytes)}/object`);
  const dir = mkdtempSync(join(tmpdir(), 'labeller-bench-sources-'));
  return await fanOut(bench, options, driver(dir), { n: options.n, lookupIndexBytes });
}

/**
 * Heap per object of the lookup index: the slot each cached object keeps for what it looked up,
 * and the object's key under one of 20 source keys; cached objects with and without the slot.
 */
function measureLookupIndex(n: number): number | undefined {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as (() => void) | undefined;
  if (typeof gc !== 'function') return undefined;
  const wire = (i: number): PartialObjectMetadata => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: `object-${i}`, namespace: `team-${i % 20}`, uid: randomUUID(), resourceVersion: String(i) },
  });
  const looked = Array.from({ length: 20 }, (_, i) => [lookupKey('teams', `team-${i}`)]);
  const settled = (): number => {
    for (let i = 0; i < 4; i++) gc();
    return process.memoryUsage().heapUsed;
  };
  const cache = (lookups: boolean): [number, unknown] => {
    const before = settled();
    const project = projector({ fieldManager: 'labeller', lookups });
    const objects = Array.from({ length: n }, (_, i) => project(wire(i), `team-${i % 20}/object-${i}`, undefined));
    const index = lookups ? new LookupIndex() : undefined;
    objects.forEach((object, i) => index?.record(object, looked[i % 20]!));
    if (index && [...index.objects('teams', 'team-0')].length !== Math.ceil(n / 20)) throw new Error('lookup index');
    return [settled() - before, [objects, index]];
  };
  const measure = (): number => (cache(true)[0] - cache(false)[0]) / n;
  measure();
  return [measure(), measure(), measure()].sort((a, b) => a - b)[1];
}

export function sourcesRows(r: SourcesResults, load: number | undefined): Row[] {
  const rows = fanOutRows(r, load, {
    prefix: 'S',
    change: 'An entry of a ConfigMap source changed',
    in: 'that looked it up (3 kinds)',
  });
  if (r.lookupIndexBytes !== undefined) {
    rows.push({
      id: 'S4',
      measurement: `Heap of the lookup index (objects by the source key they looked up), ${r.n} objects over 20 keys`,
      result: `${bytes(r.lookupIndexBytes)}/object`,
      target: '≤ 64 B/object',
      verdict: r.lookupIndexBytes <= 64 ? 'pass' : 'miss',
      load,
    });
  }
  return rows;
}
