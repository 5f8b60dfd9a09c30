// One configured kind → its controller: the kind's metadata-only informers (one per namespace it
// is limited to, or one for all), acquired from the shared informer cache with the projection and
// indexes its templates need; the label reconciler as the reconcile function; and its share of
// the related objects and of the sources of truth its templates look values up in.
import { type KindConfig, templatesOf } from '../config/model.ts';
import { isForbidden, isNotFound } from '../apimachinery/errors.ts';
import { type ApiResource, apiVersion, groupResource } from '../apimachinery/resource.ts';
import { CacheCounter, type ObjectCounts } from '../labelling/counts.ts';
import { FightTracker } from '../labelling/fights.ts';
import { LookupIndex } from '../labelling/lookupindex.ts';
import type { LabelledObject } from '../labelling/object.ts';
import { type OutcomeCounts, type Plan, Reconciler } from '../labelling/reconcile.ts';
import type { KeyTrace } from '../labelling/trace.ts';
import type { RelatedWiring } from '../related/caches.ts';
import type { KindRelations, Relations } from '../related/relations.ts';
import { Controller } from '../runtime/controller.ts';
import { Informer } from '../runtime/informer.ts';
import type { InformerHandle } from '../runtime/informercache.ts';
import type { SourceChange, SourceSet } from '../sources/sourceset.ts';
import { metadataClient } from './metadataclient.ts';
import { type Claimed, NotClaimed, type Writable } from '../labelling/ports.ts';
import { controllerName, type ResolvedKind, watchedNamespaces } from './resolve.ts';

/** What wiring a kind takes of the command-line options. */
export interface WiringOptions {
  readonly fieldManager: string;
  readonly concurrency: number;
  readonly requeueAfterMs: number;
  readonly dryRun: boolean;
  readonly watchTimeoutSeconds: number;
}

/** What wiring a kind's controller takes besides the kind: what its related caches take, and more. */
export interface Wiring extends RelatedWiring {
  readonly options: WiringOptions;
  readonly counts: OutcomeCounts;
  /** The sources of truth of the config in force (none: templates make no lookups). */
  readonly sources?: SourceSet | undefined;
  /** Told, with the controller's name, when its list or watch is refused (403): its rights may have been revoked. */
  readonly refused?: ((controller: string) => void) | undefined;
  /** Writes wait for it (the field-manager guard's Lease held); none: they never wait. */
  readonly writable?: Writable | undefined;
  /** Why this process may not write now (leadership or the guard's Lease lapsed), asked as each write is sent. */
  readonly claimed?: (() => string | undefined) | undefined;
}

/** A configured kind's controller, and how to give it new labels or let it go. */
export interface LabelledKind {
  /** Its config as last applied (relabel() changes it). */
  readonly resolved: ResolvedKind;
  readonly controller: Controller<LabelledObject>;
  /** Labels and conflict policy from `kind` (same namespaces, selector and reads): every cached object re-checked, no relist. */
  relabel(kind: KindConfig): void;
  /** What labeller owns and would change on its cached objects (see labelling/counts.ts). */
  count(): ObjectCounts;
  /** What converging one cached object takes. */
  plan(object: LabelledObject): Plan;
  /** ...and how each of its keys renders: `labeller explain`, and why an object falls short in `status --coverage`. */
  explain(object: LabelledObject): { readonly plan: Plan; readonly traces: readonly KeyTrace[] };
  /**
   * Calls `listener` with the key of each cached object that changed, went, or may be due other
   * labels (what the counts look at again), and with undefined when every object may be
   * (relabelled); answers how to stop.
   */
  onChange(listener: (key: string | undefined) => void): () => void;
  /** Queues the objects that looked up what changed in source `name` (all of them at its first load). */
  sourceChanged(name: string, change: SourceChange): void;
  /** Queues the objects left alone while another shard member wrote their buckets, now that this one has `taken` them. */
  taken(taken: ReadonlySet<number>): void;
  /** Once its controller has stopped: its related objects and its caches are let go; resolves once they have stopped. */
  release(): Promise<void>;
}

export function labelledKind(resolved: ResolvedKind, relations: Relations, wiring: Wiring): LabelledKind {
  const { kind, resource } = resolved;
  const { apis, options, log, counts, metrics, events, sources, shard } = wiring;
  const name = controllerName(resolved);
  const kindLog = log.child({ kind: resource.kind });
  const related = relations.forKind(kind, resource, watchedNamespaces(kind, resource));
  const handles = watchedNamespaces(kind, resource).map((namespace) =>
    informerOf(name, kind, resource, namespace, related, wiring)
  );
  const lookups = sources && readsSources(kind) ? { lookups: sources, index: new LookupIndex() } : undefined;
  // Kept across relabels: a fight goes on whatever else the config changes.
  const fights = new FightTracker();
  // Every claim a write needs, checked as it is sent: the process's, and its namespace's bucket.
  const claimed: Claimed = (target) =>
    wiring.claimed?.() ??
      (shard && !shard.writing(resource, target.namespace ? `${target.namespace}/${target.name}` : target.name)
        ? "its namespace's shard bucket is no longer this member's to write"
        : undefined);
  const reconcilerFor = (next: KindConfig): Reconciler =>
    new Reconciler({
      kind: {
        apiVersion: apiVersion(resource),
        kind: resource.kind,
        resource: resource.resource,
        group: resource.group,
      },
      labels: next.labels,
      annotations: next.annotations,
      conflicts: next.conflicts,
      protect: next.protect,
      yieldTo: next.fights && new Set(next.fights.yieldTo),
      dryRun: options.dryRun,
      client: metadataClient((namespace) => apis(resource, namespace), options.fieldManager, wiring.writable, claimed),
      log: kindLog,
      related: related.related,
      sources: lookups,
      fights,
    });
  let reconciler = reconcilerFor(kind);
  /**
   * Keys whose reconcile another shard member's bucket turned away: every change while a bucket
   * is not written (a relist's adds, events, relabels, source and namespace changes) passes
   * through here, so these are all that taking the bucket over must look at.
   */
  const deferred = new Set<string>();
  // What labeller owns and would change, counted from the controller's cache (read once it exists).
  const cache = { get: (key: string) => controller.get(key), keys: () => controller.keys() };
  const counterOf = (labels: KindConfig['labels']) =>
    new CacheCounter((object) => reconciler.plan(object), [...labels.keys()], cache);
  let counter = counterOf(kind.labels);
  const listeners = new Set<(key: string | undefined) => void>();
  const changed = (key: string) => {
    counter.changed(key);
    for (const listener of listeners) listener(key);
  };
  const labelMetrics = metrics?.labels(name);
  const kindEvents = events?.forKind(name, { apiVersion: apiVersion(resource), kind: resource.kind });
  const controller = new Controller<LabelledObject>({
    name,
    informers: handles.map((handle) => handle.informer),
    dependencies: lookups || related.dependencies
      ? async () => {
        await related.dependencies?.();
        await sources?.settled(sourcesRead(kind));
      }
      : undefined,
    reconcile: async (object, key, writes) => {
      // Another member's object (or not yet this one's), or this member's claim ran out: it is
      // looked at again when its bucket is taken (over, or again as the claim is renewed).
      const release = shard ? shard.hold(resource, key) : HELD;
      if (!release) {
        deferred.add(key);
        return {};
      }
      deferred.delete(key);
      // Writes on the wire stop when this member's claim lapses, as they do when leadership does.
      const signal = shard ? AbortSignal.any([writes, shard.claim]) : writes;
      let cutShort = false;
      try {
        const result = await reconciler.reconcile(object, signal);
        const { outcome, changed } = result;
        counts[outcome]++;
        kindEvents?.reconciled(object, result);
        if (outcome === 'conflict') labelMetrics?.conflict();
        if (result.fights) { for (const fight of result.fights) labelMetrics?.fight(fight.field); }
        if (result.retaken) {
          for (const retaken of result.retaken) labelMetrics?.retake(retaken.field, retaken.manager);
        }
        if (!options.dryRun && changed && labelMetrics) {
          labelMetrics.applied('labels', changed.labels.set);
          labelMetrics.removed('labels', changed.labels.removed);
          labelMetrics.applied('annotations', changed.annotations.set);
          labelMetrics.removed('annotations', changed.annotations.removed);
        }
        // The runtime reads the version written and when to look again, both the result's own.
        return result;
      } catch (error) {
        if (error instanceof NotClaimed) {
          // Looked at again when its bucket is taken again, or soon when the claim lapsed otherwise.
          kindLog.debug('write not sent: a claim lapsed while it waited', { name: key, reason: error.message });
          if (shard) deferred.add(key);
          return { requeueAfterMs: 1000 };
        }
        // Aborted on its way: its bytes may have left, so the bucket's next writer waits for them.
        cutShort = signal.aborted;
        counts.failed++;
        throw error;
      } finally {
        release(cutShort);
      }
    },
    concurrency: options.concurrency,
    requeueAfterMs: options.requeueAfterMs,
    // Queued again: what the object should carry may have changed, so its count must be looked at.
    queued: changed,
    metrics: metrics?.controller(name, options.concurrency),
    log: kindLog.child({ controller: name }),
  });
  // A cache that keeps only this member's share serves related reads only if they are split alike.
  related.attach(controller, !kind.selector && (shard?.sharesCaches(resource) ?? true));
  // An object gone from the cache leaves the lookup index.
  const forgetting = lookups
    ? handles.map(({ informer }) =>
      informer.subscribe((change) => {
        if (change.type === 'delete' && change.previous) lookups.index.forget(change.previous);
        else if (change.type === 'resync') {
          for (const key of change.removed) {
            const gone = change.previous.get(key);
            if (gone) lookups.index.forget(gone);
          }
        }
      })
    )
    : [];
  // The cache's changes mark what the counter must look at again (the controller's queue, above, the rest).
  const counting = handles.map(({ informer }) =>
    informer.subscribe((change) => {
      if (change.type !== 'resync') changed(change.key);
      else {
        for (const key of change.changed) changed(key);
        for (const key of change.removed) changed(key);
      }
    })
  );
  // A scrape plans what changed since the last, 5 ms at a time (all of the cache, the first time).
  metrics?.objects(name, async () => {
    const { counts, coverage } = await counter.settle(5);
    return { ...counts, coverage };
  });
  let current = resolved;
  return {
    get resolved() {
      return current;
    },
    controller,
    count: () => counter.read().counts,
    plan: (object) => reconciler.plan(object),
    explain: (object) => ({ plan: reconciler.plan(object), traces: reconciler.trace(object) }),
    onChange: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    sourceChanged: (name, change) => {
      if (!lookups || !sourcesRead(current.kind).has(name)) return;
      if (change === 'all') controller.requeueAll();
      else controller.enqueueAll(readers(change, (key) => lookups.index.objects(name, key)));
    },
    taken: (taken) => {
      for (const key of deferred) {
        if (controller.get(key) === undefined) deferred.delete(key);
        else if (shard?.within(resource, key, taken)) {
          deferred.delete(key);
          controller.enqueue(key);
        }
      }
    },
    relabel: (next) => {
      current = { kind: next, resource };
      reconciler = reconcilerFor(next);
      counter = counterOf(next.labels);
      for (const listener of listeners) listener(undefined);
      controller.requeueAll();
    },
    release: async () => {
      for (const stop of [...forgetting, ...counting]) stop();
      related.detach();
      await Promise.all(handles.map((handle) => handle.release()));
    },
  };
}

/** The release of an object no shard holds back: nothing to release. */
const HELD = (): void => {};

/** The sources a kind's templates look values up in. */
function sourcesRead(kind: KindConfig): Set<string> {
  return new Set(templatesOf(kind).flatMap((template) => template.lookups.map((lookup) => lookup.source)));
}

const readsSources = (kind: KindConfig): boolean => sourcesRead(kind).size > 0;

/**
 * The kind's informer of one namespace, from the shared cache: its id names everything that
 * shapes its content (resource, namespace, selector, what the projection keeps), so a kind
 * restarted with the same list and reads keeps its cache and does not list again.
 */
function informerOf(
  controller: string,
  kind: KindConfig,
  resource: ApiResource,
  namespace: string,
  related: KindRelations,
  { apis, informers, options, metrics, events, refused, notServed, shard, log }: Wiring,
): InformerHandle<LabelledObject> {
  const name = namespace ? `${groupResource(resource)}/${namespace}` : groupResource(resource);
  const kindEvents = events?.forKind(name, { apiVersion: apiVersion(resource), kind: resource.kind });
  const selector = kind.selector?.toString();
  return informers.acquire(
    `kind ${name} ${resource.version} ${selector ?? ''} ${related.signature}`,
    () =>
      new Informer<LabelledObject>({
        name,
        api: apis(resource, namespace, related.whole),
        project: related.project,
        indexes: related.indexes(),
        watch: { labelSelector: selector, watchTimeoutSeconds: options.watchTimeoutSeconds },
        partition: shard?.partition(resource, 'kind'),
        metrics: metrics?.informer(name),
        onWatchError: (error) => {
          kindEvents?.watchFailed(error);
          if (isForbidden(error)) refused?.(controller);
          if (isNotFound(error)) notServed?.();
        },
        log: log.child({ kind: resource.kind, controller: name }),
      }),
  );
}

/** The objects that looked up each of `keys`, read as they are queued. */
function* readers(keys: Iterable<string>, objects: (key: string) => Iterable<string>): Generator<string> {
  for (const key of keys) yield* objects(key);
}
