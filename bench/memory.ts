// Memory per cached object, measured in a process of its own (started by bench/run.ts with
// --expose-gc): heap and RSS before the caches fill (at 0) and once they hold every object of
// the bench namespace (at N), each after gc(). Prints one JSON line.
//
//   node --expose-gc --no-flush-bytecode --import tsx bench/memory.ts '{"mode":"pruned",...}'
//   deno run -A --v8-flags=--expose-gc,--no-flush-bytecode bench/memory.ts '{"mode":"pruned",...}'
//
// The reading is steady to a few bytes per object (it varied by ±15 % when taken once): V8
// flushes the bytecode of functions idle for a few GCs and compiles it again when they run, so
// --no-flush-bytecode; and code optimised, and source maps parsed for stack traces, on first use
// settle over warm-up rounds, after which the median of a few measured rounds is reported.
//
// Modes: pruned = labeller's own kinds and controllers (src/kinds/kindset.ts on a manager: the
// projector of src/labelling/object.ts caches identity, labels and owned label keys); full = the
// same watches and reconciles with the whole PartialObjectMetadata cached (managedFields kept);
// informer = @kubernetes/client-node's full-object informer (makeInformer) on the same kinds.
import { AppsV1Api, CoreV1Api, KubeConfig, type KubernetesObject, makeInformer } from '@kubernetes/client-node';
import { noOutcomes, type OutcomeCounts } from '../src/labelling/reconcile.ts';
import { watchedNamespaces } from '../src/kinds/resolve.ts';
import { type WiringOptions } from '../src/kinds/controller.ts';
import { KindSet } from '../src/kinds/kindset.ts';
import { metadataClient } from '../src/kinds/metadataclient.ts';
import { MetadataApi, metadataApis } from '../src/kube/api.ts';
import { KubeClient } from '../src/kube/client.ts';
import { DiscoveryCache } from '../src/kube/discoverycache.ts';
import type { PartialObjectMetadata } from '../src/apimachinery/objects.ts';
import { apiVersion, groupResource } from '../src/apimachinery/resource.ts';
import { buildConfig } from '../src/config/overlay.ts';
import type { LabelledObject } from '../src/labelling/object.ts';
import { projector } from '../src/labelling/object.ts';
import { Reconciler } from '../src/labelling/reconcile.ts';
import { Controller } from '../src/runtime/controller.ts';
import { Informer } from '../src/runtime/informer.ts';
import { Manager } from '../src/runtime/manager.ts';
import { Shutdown } from '../src/runtime/shutdown.ts';
import { createLogger, type Logger } from '../src/util/log.ts';
import { sleep } from '../test/process/sleep.ts';

export type MemoryMode = 'pruned' | 'full' | 'informer';

export interface MemoryRequest {
  readonly mode: MemoryMode;
  readonly kubeconfig: string;
  readonly namespace: string;
  /** A namespace without objects: "at 0" is read with the same caches running (watches open, code warm) on it. */
  readonly emptyNamespace: string;
  readonly kinds: readonly string[];
  readonly labels: Readonly<Record<string, string>>;
  readonly fieldManager: string;
  readonly concurrency: number;
}

export interface MemoryReading {
  readonly rss: number;
  readonly heapUsed: number;
  readonly external: number;
}

export interface MemoryResult {
  readonly mode: MemoryMode;
  readonly objects: number;
  /** The readings of the median round. */
  readonly at0: MemoryReading;
  readonly atN: MemoryReading;
  readonly heapPerObject: number;
  /** Heap per object in each measured round. */
  readonly heapPerObjectRounds: readonly number[];
  readonly rssPerObject: number;
  readonly fillSeconds: number;
}

/** Rounds (empty, then full) before the readings count, and rounds measured. */
const WARM_UP_ROUNDS = 2;
const MEASURED_ROUNDS = 3;

const gc = (globalThis as { gc?: () => void }).gc;

async function reading(): Promise<MemoryReading> {
  if (!gc) throw new Error('gc() is not exposed: run with --expose-gc (Node) or --v8-flags=--expose-gc (Deno)');
  for (let i = 0; i < 4; i++) {
    gc();
    await sleep(50);
  }
  const { rss, heapUsed, external } = process.memoryUsage();
  return { rss, heapUsed, external };
}

async function until(check: () => boolean, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`memory: timed out waiting for ${what}`);
    await sleep(50);
  }
}

/**
 * The same watches and reconciles as labeller's kinds, but caching the whole PartialObjectMetadata
 * (no pruning): informers with the identity projection, each reconcile projecting the object it is given.
 */
function fullControllers(
  client: KubeClient,
  discovery: DiscoveryCache,
  config: ReturnType<typeof buildConfig>,
  options: WiringOptions,
  log: Logger,
  counts: OutcomeCounts,
  intake: AbortSignal,
): { controllers: Controller<PartialObjectMetadata>[]; runs: Promise<void>[] } {
  const runs: Promise<void>[] = [];
  const controllers = config.kinds.map((kind) => {
    const resource = discovery.resolve(kind.resource);
    const project = projector({ fieldManager: options.fieldManager });
    const reconciler = new Reconciler({
      kind: {
        apiVersion: apiVersion(resource),
        kind: resource.kind,
        resource: resource.resource,
        group: resource.group,
      },
      labels: kind.labels,
      conflicts: kind.conflicts,
      dryRun: false,
      client: metadataClient((namespace) => new MetadataApi(client, resource, namespace), options.fieldManager),
      log,
    });
    const sources = watchedNamespaces(kind, resource).map((namespace) =>
      new Informer<PartialObjectMetadata>({
        name: `${groupResource(resource)}/${namespace}`,
        api: new MetadataApi(client, resource, namespace),
        project: Object.assign((object: PartialObjectMetadata) => object, {
          version: (object: PartialObjectMetadata) => object.metadata.resourceVersion,
        }),
        watch: { labelSelector: kind.selector?.toString(), watchTimeoutSeconds: options.watchTimeoutSeconds },
        log,
      })
    );
    runs.push(...sources.map((source) => source.run(intake)));
    return new Controller<PartialObjectMetadata>({
      name: groupResource(resource),
      informers: sources,
      reconcile: async (object, key) => {
        counts[(await reconciler.reconcile(project(object, key, undefined) as LabelledObject)).outcome]++;
      },
      concurrency: options.concurrency,
      requeueAfterMs: options.requeueAfterMs,
      log,
    });
  });
  return { controllers, runs };
}

async function labellerCache(request: MemoryRequest): Promise<MemoryResult> {
  const client = await KubeClient.load({ kubeconfig: request.kubeconfig, userAgent: 'labeller-bench-memory' });
  const log = createLogger({ level: 'error', format: 'json', write: () => {} });
  const discovery = DiscoveryCache.of(client, log);
  await discovery.load(new AbortController().signal);
  // The CLI's defaults: a re-check every 5 minutes keeps one delayed queue entry per object.
  const options: WiringOptions = {
    fieldManager: request.fieldManager,
    concurrency: request.concurrency,
    requeueAfterMs: 300_000,
    dryRun: false,
    watchTimeoutSeconds: 290,
  };
  const start = async (namespace: string) => {
    const counts = noOutcomes();
    const config = buildConfig({ kinds: [...request.kinds], labels: { ...request.labels }, namespaces: [namespace] });
    const shutdown = new Shutdown({ signals: [] });
    let controllers: { readonly size: number; readonly synced: Promise<void> }[];
    let running: Promise<unknown>;
    let release = (): Promise<void> => Promise.resolve();
    if (request.mode === 'pruned') {
      const manager = new Manager<LabelledObject>({ once: false, gracePeriodMs: 30_000, log }, shutdown);
      const apis = metadataApis(client);
      const kinds = new KindSet({
        manager,
        discovery,
        wiring: { apis, options, log, counts },
        log,
      });
      await kinds.apply(config);
      running = manager.run();
      controllers = manager.controllers;
      release = () => kinds.release();
    } else {
      const full = fullControllers(client, discovery, config, options, log, counts, shutdown.intake);
      running = Promise.all([...full.runs, ...full.controllers.map((c) => c.run(shutdown.intake))]);
      controllers = full.controllers;
    }
    await Promise.all(controllers.map((c) => c.synced));
    const objects = controllers.reduce((n, c) => n + c.size, 0);
    const seen = (): number => Object.values(counts).reduce((a, b) => a + b, 0);
    // Every object reconciled once (all labelled already: no writes); what stays queued is the 5-minute re-check.
    await until(() => seen() >= objects, 'every object to be reconciled', 600_000);
    return {
      objects,
      stop: async () => {
        shutdown.stop();
        await running;
        await release();
        shutdown.dispose();
      },
    };
  };
  const measured = await measure(request, start);
  await client.close();
  return measured(request.mode);
}

/** The caches a measurement starts: on a namespace, and stopped again. */
type Start = (namespace: string) => Promise<{ objects: number; stop: () => Promise<void> }>;

interface Round {
  readonly objects: number;
  readonly at0: MemoryReading;
  readonly atN: MemoryReading;
  readonly fillSeconds: number;
}

/**
 * One round: a reading with the same watches open on an empty namespace, then one with the
 * cache full. A function of its own, so that nothing of a round outlives it: an async function
 * keeps its dead locals (the last round's caches) alive until they are overwritten.
 */
async function round(request: MemoryRequest, start: Start): Promise<Round> {
  const empty = await start(request.emptyNamespace);
  const at0 = await reading();
  await empty.stop();
  const started = performance.now();
  const full = await start(request.namespace);
  const fillSeconds = (performance.now() - started) / 1000;
  const atN = await reading();
  await full.stop();
  return { objects: full.objects, at0, atN, fillSeconds };
}

/**
 * The protocol every cache is measured with: rounds, of which the first only warm up, so that
 * code compiled on first use is not counted as cache; the median of the others is reported.
 */
async function measure(request: MemoryRequest, start: Start) {
  const rounds: Round[] = [];
  for (let i = 0; i < WARM_UP_ROUNDS + MEASURED_ROUNDS; i++) {
    const measured = await round(request, start);
    if (i >= WARM_UP_ROUNDS) rounds.push(measured);
  }
  const per = (r: Round, of: keyof MemoryReading): number => r.objects ? (r.atN[of] - r.at0[of]) / r.objects : 0;
  const median = [...rounds].sort((a, b) => per(a, 'heapUsed') - per(b, 'heapUsed'))[Math.floor(rounds.length / 2)]!;
  return (mode: MemoryMode): MemoryResult => ({
    mode,
    objects: median.objects,
    at0: median.at0,
    atN: median.atN,
    heapPerObject: per(median, 'heapUsed'),
    heapPerObjectRounds: rounds.map((r) => per(r, 'heapUsed')),
    rssPerObject: per(median, 'rss'),
    fillSeconds: median.fillSeconds,
  });
}

async function informerCache(request: MemoryRequest): Promise<MemoryResult> {
  const kc = new KubeConfig();
  kc.loadFromFile(request.kubeconfig);
  const core = kc.makeApiClient(CoreV1Api);
  const apps = kc.makeApiClient(AppsV1Api);
  const start = async (namespace: string) => {
    let stopping = false;
    const lists: Record<string, { path: string; list: () => Promise<{ items: KubernetesObject[] }> }> = {
      configmaps: {
        path: `/api/v1/namespaces/${namespace}/configmaps`,
        list: () => core.listNamespacedConfigMap({ namespace }),
      },
      services: {
        path: `/api/v1/namespaces/${namespace}/services`,
        list: () => core.listNamespacedService({ namespace }),
      },
      deployments: {
        path: `/apis/apps/v1/namespaces/${namespace}/deployments`,
        list: () => apps.listNamespacedDeployment({ namespace }),
      },
    };
    const informers = request.kinds.map((kind) => {
      const spec = lists[kind];
      if (!spec) throw new Error(`memory: no informer for ${kind}`);
      const informer = makeInformer(kc, spec.path, spec.list as never);
      informer.on('error', (error: unknown) => {
        if (!stopping) process.stderr.write(`informer ${kind}: ${String(error)}\n`);
      });
      return informer;
    });
    await Promise.all(informers.map((i) => i.start()));
    return {
      objects: informers.reduce((n, i) => n + i.list().length, 0),
      stop: async () => {
        stopping = true;
        await Promise.all(informers.map((i) => i.stop()));
      },
    };
  };
  return (await measure(request, start))('informer');
}

const request = JSON.parse(process.argv[2] ?? '{}') as MemoryRequest;
try {
  const measured = request.mode === 'informer' ? await informerCache(request) : await labellerCache(request);
  process.stdout.write(`${JSON.stringify(measured)}\n`);
  process.exit(0);
} catch (error) {
  process.stderr.write(
    `memory (${request.mode}): ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
}
