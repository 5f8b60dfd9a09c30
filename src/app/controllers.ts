// One configured kind → its controllers: the metadata API of the kind (per namespace), the cache
// projection the labelling needs, and the label reconciler as the controller's reconcile function.
import { MetadataApi } from '../kube/api.ts';
import type { KubeClient } from '../kube/client.ts';
import { type ApiResource, apiVersion, groupResource } from '../kube/resource.ts';
import type { KindConfig } from '../labeller/config.ts';
import { type LabelledObject, projector } from '../labeller/object.ts';
import { objectCounter } from '../labeller/objectcounts.ts';
import { type Outcome, Reconciler } from '../labeller/reconcile.ts';
import { labelClient } from './labelclient.ts';
import type { Logger } from '../util/log.ts';
import type { Metrics } from '../metrics/metrics.ts';
import { Controller } from '../runtime/controller.ts';
import type { LabellerEvents } from './events.ts';
import type { KindRelations, Relations } from './relations.ts';

/** What wiring a kind takes of the command-line options. */
export interface WiringOptions {
  readonly fieldManager: string;
  readonly concurrency: number;
  readonly requeueAfterMs: number;
  readonly dryRun: boolean;
  readonly once: boolean;
  readonly watchTimeoutSeconds: number;
}

/** Reconcile outcomes of every controller, counted for the `--once` summary and the final log line. */
export type Counts = Record<Outcome | 'failed', number>;

export const noCounts = (): Counts => ({ unchanged: 0, patched: 0, conflict: 0, invalid: 0, gone: 0, failed: 0 });

/** The namespaces a kind is watched in: its own, or all ('') when none are set or it is cluster-scoped. */
export function watchedNamespaces(kind: KindConfig, resource: ApiResource): readonly string[] {
  return resource.namespaced && kind.namespaces.length > 0 ? kind.namespaces : [''];
}

/**
 * What labelling one kind in one namespace takes: its metadata API, the cache projection and the
 * reconciler; with `relations`, the related objects its templates read come from their caches.
 */
export function labellingFor(
  client: KubeClient,
  kind: KindConfig,
  resource: ApiResource,
  namespace: string,
  options: Pick<WiringOptions, 'fieldManager' | 'dryRun'>,
  log: Logger,
  relations?: KindRelations,
) {
  const api = new MetadataApi(client, resource, namespace);
  const annotations = new Set([...kind.labels.values()].flatMap((t) => t.annotations));
  const reconciler = new Reconciler({
    kind: { apiVersion: apiVersion(resource), kind: resource.kind, resource: resource.resource, group: resource.group },
    labels: kind.labels,
    conflicts: kind.conflicts,
    dryRun: options.dryRun,
    client: labelClient(api, options.fieldManager),
    log,
    related: relations?.related,
  });
  return { api, project: relations?.project ?? projector(options.fieldManager, annotations), reconciler };
}

/** The controllers of one configured kind, and how to give them new labels (a live config reload). */
export interface KindControllers {
  readonly controllers: Controller<LabelledObject>[];
  /** Labels and conflict policy from `kind` (same namespaces, selector and annotations read); every cached object re-checked, no relist. */
  relabel(kind: KindConfig): void;
  /** Its controllers are stopping (a live reload): their caches stop serving and being served related objects. */
  detach(): void;
}

/** What wiring a kind's controllers takes besides the kind: the client, the options and what they report to. */
export interface Wiring {
  readonly client: KubeClient;
  readonly options: WiringOptions;
  readonly log: Logger;
  readonly counts: Counts;
  readonly metrics?: Metrics | undefined;
  readonly events?: LabellerEvents | undefined;
  readonly relations?: Relations | undefined;
}

/** The controllers of one configured kind: one per namespace, or one for all namespaces. */
export function kindControllers(kind: KindConfig, resource: ApiResource, wiring: Wiring): KindControllers {
  const { client, options, log, counts, metrics, events, relations } = wiring;
  const name = groupResource(resource);
  const kindLog = log.child({ kind: resource.kind });
  const wired = watchedNamespaces(kind, resource).map((namespace) => {
    const controller = namespace ? `${name}/${namespace}` : name;
    const labelMetrics = metrics?.labels(controller);
    const related = relations?.forKind(kind, resource, namespace);
    const labelling = labellingFor(client, kind, resource, namespace, options, kindLog, related);
    let { reconciler } = labelling;
    let count = objectCounter((object) => reconciler.plan(object));
    const kindEvents = events?.forKind(controller, { apiVersion: apiVersion(resource), kind: resource.kind });
    const wired = new Controller({
      name: controller,
      api: labelling.api,
      project: labelling.project,
      indexes: related?.indexes,
      dependencies: related?.dependencies,
      reconcile: async (object, _key, writes) => {
        try {
          const result = await reconciler.reconcile(object, writes);
          const { outcome, patch } = result;
          counts[outcome]++;
          kindEvents?.reconciled(object, result);
          if (outcome === 'conflict') labelMetrics?.conflict();
          if (!options.dryRun && patch.length > 0) {
            const removed = patch.filter((op) => op.op === 'remove').length;
            labelMetrics?.applied(patch.length - removed);
            labelMetrics?.removed(removed);
          }
        } catch (error) {
          counts.failed++;
          throw error;
        }
      },
      concurrency: options.concurrency,
      requeueAfterMs: options.once ? 0 : options.requeueAfterMs,
      watch: { labelSelector: kind.selector?.toString(), watchTimeoutSeconds: options.watchTimeoutSeconds },
      metrics: metrics?.controller(controller, options.concurrency),
      onWatchError: kindEvents?.watchFailed,
      log: kindLog.child({ controller }),
    });
    related?.attach(wired);
    metrics?.objects(controller, () => count(wired.store.values()));
    const relabel = (next: KindConfig): void => {
      reconciler = labellingFor(client, next, resource, namespace, options, kindLog, related).reconciler;
      count = objectCounter((object) => reconciler.plan(object));
      wired.requeueAll();
    };
    return { controller: wired, relabel, detach: () => related?.detach() };
  });
  return {
    controllers: wired.map((w) => w.controller),
    relabel: (next) => {
      for (const w of wired) w.relabel(next);
    },
    detach: () => {
      for (const w of wired) w.detach();
    },
  };
}
