// The slice of a resource that one process keeps when several share the work (src/shard/): which
// objects its cache holds, and the selector that asks the API server for only those. Generic: the
// informer knows nothing of how the slice is chosen, only that it may change while it watches.
import type { PartialObjectMetadata } from '../apimachinery/objects.ts';

/** The name and namespace of an object, all a partition looks at. */
export type ObjectName = Pick<PartialObjectMetadata['metadata'], 'name' | 'namespace'>;

/** What a partition that grew now keeps and did not. */
export interface Added {
  /** Whether the object named so lies in it. */
  readonly adds: (meta: ObjectName) => boolean;
  /** The `shardSelector` that asks the API server for it; undefined when no selector can say it. */
  readonly selector: string | undefined;
}

/** How a partition changed: `added` when it now keeps objects it did not (a list fetches them). */
export interface PartitionChange {
  readonly added?: Added | undefined;
}

export interface Partition {
  /** Whether this process keeps the object named so in its cache. */
  keeps(meta: ObjectName): boolean;
  /**
   * The list and watch `shardSelector` that asks the server for what it keeps (KEP-5866); undefined
   * when no selector can say it (then the stream is whole and keeps() filters it here).
   */
  selector(): string | undefined;
  /** Told of every change; returns the unsubscribe function. */
  subscribe(listener: (change: PartitionChange) => void): () => void;
}
