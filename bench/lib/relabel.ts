// Relabel latency: a metadata-only watch per kind sees a managed label disappear (another
// manager's merge patch) and come back (labeller's apply); the latency is the time between the
// two events on the same watch. Background churn creates and updates other objects meanwhile.
import { MetadataApi } from '../../src/kube/api.ts';
import type { KubeClient } from '../../src/kube/client.ts';
import { ApiError } from '../../src/apimachinery/errors.ts';
import type { ApiResource } from '../../src/apimachinery/resource.ts';
import { type BenchObject, collection, type KindSpec } from './objects.ts';
import { sleep } from '../../test/process/sleep.ts';

type Labels = Readonly<Record<string, string>>;

interface Tracker {
  readonly steps: ((labels: Labels) => boolean)[];
  readonly times: number[];
  readonly resolve: (times: number[]) => void;
}

/** Metadata-only watches of the bench kinds in one namespace, with per-object expectations. */
export class LabelWatch {
  readonly #apis: Map<string, MetadataApi>;
  readonly #trackers = new Map<string, Tracker>();
  readonly #abort = new AbortController();
  readonly #loops: Promise<void>[] = [];
  errors = 0;

  constructor(client: KubeClient, resources: ReadonlyMap<KindSpec, ApiResource>, namespace: string) {
    this.#apis = new Map(
      [...resources].map(([kind, resource]) => [kind.kind, new MetadataApi(client, resource, namespace)]),
    );
  }

  /** Starts watching from now; resolves once every watch is open. */
  async start(): Promise<void> {
    for (const [kind, api] of this.#apis) {
      const { metadata } = await api.list({ limit: 1 });
      this.#loops.push(this.#loop(kind, api, metadata.resourceVersion));
    }
  }

  /**
   * Resolves with the time (performance.now()) at which each step first held, in order, as seen
   * on the watch; rejects after `timeoutMs`.
   */
  track(kind: string, name: string, steps: ((labels: Labels) => boolean)[], timeoutMs: number): Promise<number[]> {
    const key = `${kind}/${name}`;
    return new Promise<number[]>((resolve, reject) => {
      const timer = setTimeout(() => {
        const step = (this.#trackers.get(key)?.times.length ?? 0) + 1;
        this.#trackers.delete(key);
        reject(new Error(`${key}: step ${step} not seen within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#trackers.set(key, {
        steps,
        times: [],
        resolve: (times) => {
          clearTimeout(timer);
          this.#trackers.delete(key);
          resolve(times);
        },
      });
    });
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    await Promise.all(this.#loops);
  }

  async #loop(kind: string, api: MetadataApi, from: string): Promise<void> {
    let resourceVersion = from;
    const signal = this.#abort.signal;
    while (!signal.aborted) {
      try {
        for await (const batch of await api.watch({ resourceVersion, timeoutSeconds: 600, idleMs: 700_000, signal })) {
          const now = performance.now();
          for (const event of batch) {
            if (event.type === 'ERROR') throw new ApiError('WATCH', api.path(), event.object.code ?? 500, event.object);
            resourceVersion = event.object.metadata.resourceVersion;
            if (event.type !== 'ADDED' && event.type !== 'MODIFIED') continue;
            const tracker = this.#trackers.get(`${kind}/${event.object.metadata.name}`);
            if (!tracker) continue;
            const labels = event.object.metadata.labels ?? {};
            if (tracker.steps[tracker.times.length]?.(labels)) {
              tracker.times.push(now);
              if (tracker.times.length === tracker.steps.length) tracker.resolve(tracker.times);
            }
          }
        }
      } catch (error) {
        if (signal.aborted) return;
        this.errors++;
        if (error instanceof ApiError && error.expired) {
          resourceVersion = (await api.list({ limit: 1 })).metadata.resourceVersion;
        }
        await sleep(200);
      }
    }
  }
}

export interface LatencySamples {
  readonly samples: number;
  readonly timeouts: number;
  /** Milliseconds from the removal event to the restoration event, sorted. */
  readonly latenciesMs: number[];
}

/** Removes `key` from `samples` objects in turn (merge patch by another manager) and times its return. */
export async function measureRelabel(
  client: KubeClient,
  watch: LabelWatch,
  namespace: string,
  objects: readonly BenchObject[],
  label: { readonly key: string; readonly value: string },
  samples: number,
  offset: number,
  signal: AbortSignal,
): Promise<LatencySamples> {
  const latencies: number[] = [];
  let timeouts = 0;
  for (let i = 0; i < samples; i++) {
    signal.throwIfAborted();
    // Spread the samples over the kinds and the objects.
    const object = objects[(offset + i * 7919) % objects.length]!;
    const times = watch.track(object.kind.kind, object.name, [
      (l) => l[label.key] === undefined,
      (l) => l[label.key] === label.value,
    ], 10_000);
    times.catch(() => {}); // awaited below; a failed PATCH must not leave it unhandled
    await client.json('PATCH', `${collection(object.kind, namespace)}/${object.name}`, {
      query: { fieldManager: 'kubectl-edit' },
      headers: {
        'content-type': 'application/merge-patch+json',
        accept: 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json',
      },
      body: JSON.stringify({ metadata: { labels: { [label.key]: null } } }),
    });
    try {
      const [removed, restored] = await times;
      latencies.push(restored! - removed!);
    } catch {
      timeouts++;
    }
    // A short pause, so that samples do not queue behind each other.
    await sleep(20);
  }
  return { samples, timeouts, latenciesMs: latencies.sort((a, b) => a - b) };
}

export function percentile(sorted: readonly number[], p: number): number | undefined {
  if (sorted.length === 0) return undefined;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/** Creates and updates other ConfigMaps at a steady rate until stopped. */
export class Churn {
  readonly #client: KubeClient;
  readonly #namespace: string;
  readonly #rate: number;
  readonly #abort = new AbortController();
  #loop: Promise<void> | undefined;
  created = 0;
  updated = 0;
  errors = 0;
  #startedAt = 0;
  #stoppedAt = 0;

  constructor(client: KubeClient, namespace: string, ratePerSecond: number) {
    this.#client = client;
    this.#namespace = namespace;
    this.#rate = ratePerSecond;
  }

  start(): void {
    this.#startedAt = performance.now();
    this.#loop = this.#run();
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    await this.#loop;
    this.#stoppedAt = performance.now();
  }

  /** Writes per second actually achieved. */
  get achievedRate(): number {
    const seconds = ((this.#stoppedAt || performance.now()) - this.#startedAt) / 1000;
    return seconds > 0 ? (this.created + this.updated) / seconds : 0;
  }

  async #run(): Promise<void> {
    const path = `/api/v1/namespaces/${this.#namespace}/configmaps`;
    const interval = 1000 / this.#rate;
    let next = performance.now();
    for (let i = 0; !this.#abort.signal.aborted; i++) {
      try {
        if (i % 2 === 0 || this.created === 0) {
          await this.#client.json('POST', path, {
            query: { fieldManager: 'churn-writer' },
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({
              apiVersion: 'v1',
              kind: 'ConfigMap',
              metadata: { name: `churn-${this.created}`, labels: { app: 'churn' } },
              data: { n: String(i) },
            }),
          });
          this.created++;
        } else {
          await this.#client.json('PATCH', `${path}/churn-${i % this.created}`, {
            query: { fieldManager: 'churn-writer' },
            headers: { 'content-type': 'application/merge-patch+json' },
            body: JSON.stringify({
              metadata: { annotations: { 'example.com/revision': String(i) } },
              data: { n: String(i) },
            }),
          });
          this.updated++;
        }
      } catch {
        this.errors++;
      }
      next += interval;
      const wait = next - performance.now();
      if (wait > 0) await sleep(wait);
    }
  }
}
