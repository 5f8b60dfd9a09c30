// The objects a measurement runs over: a fresh namespace holding N objects of the bench's kinds
// (bench/lib/objects.ts), and a metadata-only API per kind over it for the confirming lists.
import { MetadataApi } from '../../src/kube/api.ts';
import type { Bench } from './context.ts';
import { createNamespace } from '../../test/cluster/cluster.ts';
import { type BenchObject, createObjects, type KindSpec, split } from './objects.ts';
import { load1, seconds } from './report.ts';

export interface SetupResults {
  readonly namespace: string;
  /** Objects per resource, e.g. { configmaps: 3334, … }. */
  readonly objects: Record<string, number>;
  readonly seconds: number;
  readonly load: number;
}

export interface Setup {
  readonly namespace: string;
  readonly objects: readonly BenchObject[];
  readonly apis: ReadonlyMap<KindSpec, MetadataApi>;
  readonly results: SetupResults;
}

/** Creates a namespace `<prefix>-<time>` with `n` objects split over the bench's kinds, `concurrency` requests in flight. */
export async function setUp(bench: Bench, n: number, concurrency: number, prefix = 'labeller-bench'): Promise<Setup> {
  const { admin, resources, signal, log } = bench;
  const kinds = [...resources.keys()];
  const namespace = `${prefix}-${Date.now().toString(36)}`;
  await createNamespace(admin, namespace);
  const perKind = split(n, kinds);
  log(
    `creating ${n} objects in ${namespace} (${
      [...perKind].map(([k, count]) => `${count} ${k.resource}`).join(', ')
    }), ${concurrency} in flight`,
  );
  const started = performance.now();
  const objects = await createObjects(admin, namespace, n, concurrency, signal, kinds);
  const results = {
    namespace,
    objects: Object.fromEntries([...perKind].map(([k, count]) => [k.resource, count])),
    seconds: (performance.now() - started) / 1000,
    load: load1(),
  };
  log(`created in ${seconds(results.seconds)}`);
  const apis = new Map([...resources].map(([k, r]) => [k, new MetadataApi(admin, r, namespace)]));
  return { namespace, objects, apis, results };
}
