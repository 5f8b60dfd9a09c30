// Row R4 of --related: the heap the relation indexes (by namespace, by owner uid) and the kept
// controller reference add per cached object, measured in this process over synthetic Pods of
// 3-replica ReplicaSets, each JSON-parsed afresh as from the wire.
import { randomUUID } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { PartialObjectMetadata } from '../../src/apimachinery/objects.ts';
import { type LabelledObject, projector } from '../../src/labelling/object.ts';
import { StoreIndex } from '../../src/runtime/storeindex.ts';
import { Store } from '../../src/runtime/store.ts';

/** Bytes per object, over `objects` objects. */
export interface IndexHeap {
  readonly objects: number;
  readonly ownerRef: number;
  readonly indexes: number;
  readonly byNamespace: number;
  readonly byOwner: number;
}

/** Heap per object of the controller reference and of the namespace and owner indexes, or undefined without a GC to call. */
export function measureIndexHeap(n: number): IndexHeap | undefined {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as (() => void) | undefined;
  if (typeof gc !== 'function') return undefined;
  // Pods of ReplicaSets of 3 replicas, over 20 namespaces, as the API server sends them.
  const owners = Array.from({ length: Math.ceil(n / 3) }, () => randomUUID());
  const wire = (i: number): PartialObjectMetadata =>
    JSON.parse(JSON.stringify({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: `web-${i}-${randomUUID().slice(0, 5)}`,
        namespace: `team-${i % 20}`,
        uid: randomUUID(),
        resourceVersion: String(1000 + i),
        labels: { app: `app-${i % 97}` },
        ownerReferences: [{
          apiVersion: 'apps/v1',
          kind: 'ReplicaSet',
          name: `web-${Math.floor(i / 3)}`,
          uid: owners[Math.floor(i / 3)],
          controller: true,
          blockOwnerDeletion: true,
        }],
      },
    })) as PartialObjectMetadata;
  const settled = (): number => {
    for (let i = 0; i < 4; i++) gc();
    return process.memoryUsage().heapUsed;
  };
  const heapOf = (make: () => Store<LabelledObject>): number => {
    const before = settled();
    const store = make();
    for (let i = 0; i < n; i++) store.apply({ type: 'apply', object: wire(i) });
    const used = settled() - before;
    if (store.size !== n) throw new Error('related heap: store size');
    return used;
  };
  const byNamespace = () => new StoreIndex<LabelledObject>('namespace', (o) => o.namespace || undefined);
  const byOwner = () => new StoreIndex<LabelledObject>('owner', (o) => o.owner?.uid);
  const shapes = [
    () => new Store(projector({ fieldManager: 'labeller' })),
    () => new Store(projector({ fieldManager: 'labeller', owners: true })),
    () => new Store(projector({ fieldManager: 'labeller', owners: true }), [byNamespace()]),
    () => new Store(projector({ fieldManager: 'labeller', owners: true }), [byNamespace(), byOwner()]),
  ];
  // A first pass compiles the code and sizes the projector's tables: not counted. Then the median
  // of 3 readings of each shape, interleaved, so that a stray allocation moves one reading only.
  for (const shape of shapes) heapOf(shape);
  const readings = [0, 1, 2].map(() => shapes.map(heapOf));
  const [plain, withOwner, namespaced, indexed] = shapes.map((_, i) =>
    readings.map((r) => r[i]!).sort((a, b) => a - b)[1]!
  ) as [number, number, number, number];
  return {
    objects: n,
    ownerRef: (withOwner - plain) / n,
    indexes: (indexed - withOwner) / n,
    byNamespace: (namespaced - withOwner) / n,
    byOwner: (indexed - namespaced) / n,
  };
}
