// Row 4, memory per cached object: labeller's pruned cache, the whole PartialObjectMetadata, and
// @kubernetes/client-node's informer, each read by bench/memory.ts in a probe process of its own
// (--expose-gc) over the bench namespace, with an empty namespace as the zero.
import { describeExit } from '../../test/process/child.ts';
import { type Runtime, tsCommand } from '../../test/process/runtime.ts';
import type { MemoryMode, MemoryRequest, MemoryResult } from '../memory.ts';
import { startChild } from './children.ts';
import type { Bench } from './context.ts';
import { FIELD_MANAGER, LABELS } from './launch.ts';
import { createNamespace } from '../../test/cluster/cluster.ts';
import { bytes, load1, type Row, verdict } from './report.ts';

export type MemoryResults = Partial<Record<MemoryMode, MemoryResult & { load: number }>>;

async function probe(request: MemoryRequest, runtime: Runtime): Promise<MemoryResult> {
  // Bytecode flushed and compiled again between the readings would count as cache (see memory.ts).
  const [bin, args] = tsCommand(runtime, 'bench/memory.ts', ['--expose-gc', '--no-flush-bytecode']);
  const exit = await startChild(bin, [...args, JSON.stringify(request)]).exited;
  if (exit.code !== 0) {
    throw new Error(`memory probe (${request.mode}) exited with ${describeExit(exit)}\n${exit.stderr.slice(-4000)}`);
  }
  return JSON.parse(exit.stdout.trim().split('\n').at(-1) ?? '') as MemoryResult;
}

/**
 * Reads each mode over the `n` objects of `namespace` into `results` as it goes (a failed probe
 * leaves the others' readings), `concurrency` being labeller's per kind.
 */
export async function cacheMemory(
  bench: Bench,
  namespace: string,
  n: number,
  concurrency: number,
  runtime: Runtime,
  results: MemoryResults,
): Promise<void> {
  const { admin, controlPlane, resources, log } = bench;
  const emptyNamespace = `${namespace}-empty`;
  await createNamespace(admin, emptyNamespace);
  for (const mode of ['pruned', 'full', 'informer'] as const) {
    log(`memory: ${mode}`);
    const measured = await probe({
      mode,
      kubeconfig: controlPlane.kubeconfig,
      namespace,
      emptyNamespace,
      kinds: [...resources.keys()].map((k) => k.resource),
      labels: LABELS,
      fieldManager: FIELD_MANAGER,
      concurrency,
    }, runtime);
    if (measured.objects < n) {
      throw new Error(`memory probe (${mode}) cached ${measured.objects} objects, expected at least ${n}`);
    }
    results[mode] = { ...measured, load: load1() };
    log(
      `memory ${mode}: ${measured.objects} objects, heap ${bytes(measured.heapPerObject)}/object (rounds: ${
        measured.heapPerObjectRounds.map((b) => b.toFixed(0)).join(', ')
      }), RSS ${bytes(measured.rssPerObject)}/object`,
    );
  }
}

export function memoryRows(memory: MemoryResults): Row[] {
  const rows: Row[] = [];
  const m = (mode: MemoryMode, what: string, target: string, check?: (heap: number) => boolean): void => {
    const x = memory[mode];
    if (!x) return;
    rows.push({
      id: '4',
      measurement: `${what} (${x.objects} objects)`,
      result: `heap ${bytes(x.heapPerObject)}/object (median of ${x.heapPerObjectRounds.length} rounds: ${
        x.heapPerObjectRounds.map((b) => b.toFixed(0)).join(', ')
      } B), RSS ${bytes(x.rssPerObject)}/object`,
      target,
      verdict: check ? verdict(check(x.heapPerObject)) : '',
      load: x.load,
    });
  };
  m(
    'pruned',
    'Memory, labeller’s cache (managedFields pruned)',
    'heap ≤ 512 B/object at 10k and 50k',
    (heap) => heap <= 512,
  );
  m('full', 'Memory, pruning off (full PartialObjectMetadata cached)', '');
  m('informer', 'Memory, @kubernetes/client-node informer (full objects)', '');
  return rows;
}
