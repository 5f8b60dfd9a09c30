// Row 2, the server's limit: the same server-side apply patches as labeller's, from a minimal
// worker pool at the same concurrency through the same client code (labelClient over
// MetadataApi), with no watch, cache or reconcile; labeller's convergence is reported as a ratio
// to it. --related and --peers time the same loop.
import { MetadataApi } from '../../src/kube/api.ts';
import { KubeClient } from '../../src/kube/client.ts';
import type { ApiResource } from '../../src/apimachinery/resource.ts';
import { metadataClient } from '../../src/kinds/metadataclient.ts';
import type { ColdResults } from './cold.ts';
import type { Bench } from './context.ts';
import { LABELS } from './launch.ts';
import { type BenchObject, type KindSpec, pool } from './objects.ts';
import { load1, type Row, seconds, verdict } from './report.ts';

export interface LoopResults {
  seconds: number;
  cpuSeconds: number;
  patches: number;
  concurrency: number;
  load: number;
}

/** A forced apply of `labels` to each of `objects` by `fieldManager`, `concurrency` in flight: its wall time and this process's CPU. */
export async function applyAll(
  client: KubeClient,
  resources: ReadonlyMap<KindSpec, ApiResource>,
  namespace: string,
  objects: readonly BenchObject[],
  labels: Readonly<Record<string, string>>,
  fieldManager: string,
  concurrency: number,
  signal: AbortSignal,
): Promise<{ seconds: number; cpuSeconds: number }> {
  const clients = new Map(
    [...resources].map(([kind, resource]) => [
      kind,
      metadataClient(() => new MetadataApi(client, resource, namespace), fieldManager),
    ]),
  );
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  await pool(objects, concurrency, async (o) => {
    await clients.get(o.kind)!.apply(
      { apiVersion: o.kind.apiVersion, kind: o.kind.kind, name: o.name, namespace, uid: o.uid },
      { labels, annotations: {} },
      { force: true, dryRun: false, annotationKeys: [] },
    );
  }, signal);
  const cpu = process.cpuUsage(cpuBefore);
  return { seconds: (performance.now() - started) / 1000, cpuSeconds: (cpu.user + cpu.system) / 1e6 };
}

/**
 * Labels of other keys than LABELS' (each with `-loop`), with a value no object carries yet:
 * every patch of the loop is a real write.
 */
export function loopLabels(keys: readonly string[] = Object.keys(LABELS)): Record<string, string> {
  const value = `v${Date.now().toString(36)}`;
  return Object.fromEntries(keys.map((k) => [`${k}-loop`, value]));
}

/** Row 2 over `objects` in `namespace`, through a client of its own, `concurrency` in flight. */
export async function tightLoop(
  bench: Bench,
  namespace: string,
  objects: readonly BenchObject[],
  concurrency: number,
  labels: Readonly<Record<string, string>> = loopLabels(),
): Promise<LoopResults> {
  const { controlPlane, resources, signal, log } = bench;
  log(`tight loop: ${objects.length} server-side apply patches, ${concurrency} in flight`);
  const client = await KubeClient.load({ kubeconfig: controlPlane.kubeconfig, userAgent: 'labeller-bench-loop' });
  try {
    const took = await applyAll(client, resources, namespace, objects, labels, 'bench-loop', concurrency, signal);
    return { ...took, patches: objects.length, concurrency, load: load1() };
  } finally {
    await client.close();
  }
}

export function loopRows(loop: LoopResults, cold: ColdResults | undefined, n: number): Row[] {
  const rows: Row[] = [{
    id: '2',
    measurement:
      `Tight loop: ${loop.patches} server-side apply patches, ${loop.concurrency} in flight, same KubeClient`,
    // The CPU of this process for the loop: what one apply costs on this runtime, before any
    // watch event, cache or reconcile; the floor under labeller's CPU per object.
    result: `${seconds(loop.seconds)} (${Math.round(loop.patches / loop.seconds)} patches/s); CPU ${
      (loop.cpuSeconds * 1000 / loop.patches).toFixed(2)
    } ms per PATCH`,
    target: '',
    verdict: '',
    load: loop.load,
  }];
  if (cold) {
    const ratio = cold.seconds / loop.seconds;
    rows.push({
      id: '1/2',
      measurement: 'Convergence ÷ tight loop',
      result: `${ratio.toFixed(2)}×`,
      target: '≤ 1.1× at N = 10k',
      verdict: verdict(ratio <= 1.1),
      ...(n !== 10_000 ? { verdictNote: `(at N = ${n})` } : {}),
      load: loop.load,
    });
  }
  return rows;
}
