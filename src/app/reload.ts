// Live config reload, in controller mode with --config: the file is followed (a mounted
// ConfigMap's symlink swap included), each new content is built as at start (flags still win
// over it) and applied kind by kind: added kinds start their controllers, removed ones stop
// theirs, kinds whose labels or conflict policy changed re-check their cached objects without a
// relist, and only kinds whose list changed (namespaces, selector, annotations templates read) or
// whose templates read other fields of related objects list again. When the new templates need
// what the caches of related objects, shared by every kind, do not keep (a first owner.* or
// root.* read, a related annotation), those caches are made again and every kind restarts onto
// them. An invalid change is logged, counted and reported as an Event on labeller's Pod, and the
// last good config stays in force.
import type { KubeClient } from '../kube/client.ts';
import { discover } from '../kube/discovery.ts';
import type { ApiResource } from '../kube/resource.ts';
import type { Config, KindConfig } from '../labeller/config.ts';
import { configChange } from '../labeller/configchange.ts';
import type { Logger } from '../util/log.ts';
import type { Metrics } from '../metrics/metrics.ts';
import { watchFile } from '../runtime/filewatch.ts';
import type { KindControllers } from './controllers.ts';
import type { LabellerEvents } from './events.ts';
import { type Resolved, resolveKinds, startWhenServed } from './kinds.ts';
import type { RunController } from './lifecycle.ts';

export interface ConfigSource {
  readonly path: string;
  /** The content the config in force was built from. */
  readonly text: string;
  /** Builds a config from new content, as at start; throws (ConfigError) when it is invalid. */
  build(text: string): Config;
}

export interface Reloading {
  readonly client: KubeClient;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** Where a rejected change is also reported (an Event on labeller's Pod). */
  readonly events?: LabellerEvents | undefined;
  /** Wires a kind's controllers (not started). */
  wire(kind: KindConfig, resource: ApiResource): KindControllers;
  /** Its controllers have stopped: they leave readiness and metrics. */
  unwire(wired: KindControllers): void;
  /**
   * Makes the caches of related objects serve `kinds` (the new config's) for the kinds wired from
   * now on: when the running ones lack something, new ones replace them and every running kind
   * must restart onto them. Answers what was lacking, in words; empty when nothing.
   */
  relate(kinds: readonly KindConfig[]): string[];
}

interface Running {
  kind: KindConfig;
  /** Undefined while the kind is not served yet. */
  resource: ApiResource | undefined;
  wired: KindControllers | undefined;
  readonly stop: AbortController;
}

/** Runs `kinds` (the config in force at start) and every change of the file until `signal` aborts; resolves once all have stopped. */
export async function runReloading(
  source: ConfigSource,
  config: Config,
  kinds: Resolved,
  reloading: Reloading,
  run: RunController,
  signal: AbortSignal,
): Promise<void> {
  const { client, log, metrics } = reloading;
  const running = new Map<string, Running>();
  const stopped: Promise<void>[] = [];

  const start = (kind: KindConfig, resource: ApiResource | undefined): void => {
    const entry: Running = { kind, resource, wired: undefined, stop: new AbortController() };
    const launch = async (served: ApiResource): Promise<void> => {
      entry.resource = served;
      const wired = (entry.wired = reloading.wire(entry.kind, served));
      await Promise.all(wired.controllers.map((c) => run(c, entry.stop.signal)));
      reloading.unwire(wired);
    };
    running.set(kind.resource, entry);
    stopped.push(
      resource
        ? launch(resource)
        : startWhenServed([kind], client, log, AbortSignal.any([signal, entry.stop.signal]), (_, served) =>
          launch(served)),
    );
  };
  const stop = (kind: KindConfig): Running | undefined => {
    const entry = running.get(kind.resource);
    entry?.stop.abort();
    // Before its successor is wired, which shares its cache in its place.
    entry?.wired?.detach();
    running.delete(kind.resource);
    return entry;
  };

  for (const { kind, resource } of kinds.resolved) start(kind, resource);
  for (const { kind } of kinds.unknown) start(kind, undefined);

  let current = { config, text: source.text };
  const apply = async (content: string | Error): Promise<void> => {
    try {
      if (content instanceof Error) throw new Error(`${source.path}: cannot read the config file (${content.message})`);
      const next = source.build(content);
      const change = configChange(current.config.kinds, next.kinds);
      // Only added kinds need discovery; a kind that is a mistake rejects the whole change.
      const added = change.added.length > 0
        ? resolveKinds(change.added, (await discover(client, signal)).resources)
        : { resolved: [], unknown: [] };
      const lacked = reloading.relate(next.kinds);
      const restarted = lacked.length > 0
        ? next.kinds.filter((kind) => !change.added.includes(kind))
        : change.restarted;
      const relabelled = lacked.length > 0 ? [] : change.relabelled;
      for (const kind of change.removed) stop(kind);
      for (const kind of restarted) start(kind, stop(kind)?.resource);
      for (const kind of relabelled) {
        const entry = running.get(kind.resource);
        if (!entry) continue;
        entry.kind = kind;
        entry.wired?.relabel(kind);
      }
      for (const { kind, resource } of added.resolved) start(kind, resource);
      for (const { kind, error } of added.unknown) {
        log.error(error.message, { kind: kind.resource });
        start(kind, undefined);
      }
      current = { config: next, text: content };
      metrics.configReloaded(true);
      const names = (list: readonly KindConfig[]) => (list.length > 0 ? list.map((k) => k.resource) : undefined);
      log.info('config reloaded', {
        file: source.path,
        added: names(change.added),
        removed: names(change.removed),
        relabelled: names(relabelled),
        restarted: names(restarted),
        relatedCachesRebuilt: lacked.length > 0 ? lacked : undefined,
      });
    } catch (error) {
      if (signal.aborted) return;
      metrics.configReloaded(false);
      const message = error instanceof Error ? error.message : String(error);
      log.error('config change rejected; the last good config stays in force', { file: source.path, error: message });
      reloading.events?.configRejected(`${message}; the last good config stays in force`);
    }
  };
  // One change at a time, in the order they were seen.
  let applying = Promise.resolve();
  watchFile(source.path, source.text, (content) => {
    applying = applying.then(() => apply(content));
  }, { signal });

  await new Promise<void>((
    resolve,
  ) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));
  await applying;
  await Promise.all(stopped);
}
