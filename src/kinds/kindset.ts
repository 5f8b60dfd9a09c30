// The kinds labeller runs, kept equal to the config in force. One path for every way a config
// comes: from flags (applied once), from a followed file (applied at each change), and again when
// discovery changes (a kind served later starts, a CRD removed stops its kind). Each application
// resolves the config's kinds through the discovery cache (two names of one resource are an
// error), has the field-manager guard claim it, and diffs it against what runs: added kinds start,
// removed ones stop, kinds whose labels or conflict policy changed re-check their cached objects
// without a relist, and only kinds whose list or reads changed restart. When the templates need
// what the caches of related objects do not keep, those are made again and every kind restarts
// onto them. The config's sources of truth load beside them (sources/sourceset.ts), and their
// changes queue the objects that looked up what changed. A config that cannot run changes nothing.
// The every-kind entry is expanded against discovery at each application (everykind.ts), so CRDs
// served later start and CRDs removed stop; its kinds are asked about before they start
// (access.ts), again every minute or so while some are skipped (a grant starts them) and when a
// running one is refused (a revoked grant skips it rather than failing for ever), and discovery
// is refreshed periodically while it is in force.
import type { DiscoveryCache } from '../kube/discoverycache.ts';
import { groupResource } from '../apimachinery/resource.ts';
import type { Config } from '../config/model.ts';
import { kindChange } from '../config/change.ts';
import type { LabelledObject } from '../labelling/object.ts';
import type { Manager } from '../runtime/manager.ts';
import type { Logger } from '../util/log.ts';
import { controllerName, type ResolvedKind } from './resolve.ts';
import { type LabelledKind, labelledKind, type Wiring } from './controller.ts';
import { EveryKind } from './everykind.ts';
import { type AccessCheck, KindAccess, type SkippedKind } from './access.ts';
import { checkAliases, type Resolved, resolveKinds } from './resolve.ts';
import { Relations } from '../related/relations.ts';
import { SourceSet } from '../sources/sourceset.ts';
import type { SourceMemory } from '../sources/memory.ts';

export interface KindSetOptions {
  readonly manager: Manager<LabelledObject>;
  readonly discovery: DiscoveryCache;
  readonly wiring: Omit<Wiring, 'informers'>;
  /**
   * Claims each config, resolved, before it takes effect, rejecting when it may not (the
   * field-manager guard: guard/; none with --dry-run and the one-off commands).
   */
  readonly claim?: ((config: Config, kinds: Resolved, signal?: AbortSignal) => Promise<void>) | undefined;
  /** Asks whether the every-kind entry's kinds may be used before they start (none: they all start). */
  readonly access?: AccessCheck | undefined;
  /** Each source's last good key set across restarts (sources/memory.ts). */
  readonly sourceMemory?: SourceMemory | undefined;
  /** How long kinds skipped for want of rights wait before they are asked about again (default one minute). */
  readonly accessRecheckMs?: number | undefined;
  readonly log: Logger;
}

/** What an application changed: the kinds as the config names them. */
export type KindSetChange = {
  readonly added: readonly string[];
  readonly removed: readonly string[];
  readonly relabelled: readonly string[];
  readonly restarted: readonly string[];
  /** What the caches of related objects lacked, when they were made again. */
  readonly relatedCachesRebuilt: readonly string[];
};

export class KindSet {
  readonly #options: KindSetOptions;
  readonly #running = new Map<string, LabelledKind>();
  #config: Config | undefined;
  #relations: Relations | undefined;
  #unknown: Resolved['unknown'] = [];
  /** The resources served at the last application (group/resource), to say which kinds come and go. */
  #served: ReadonlySet<string> | undefined;
  readonly #everyKind: EveryKind;
  readonly #access: KindAccess | undefined;
  /** Periodic discovery while some kind is not served, or an every-kind entry is in force. */
  #stopDemand: (() => void) | undefined;
  /** The next re-check of the kinds skipped for want of rights, while some are. */
  #recheck: ReturnType<typeof setTimeout> | undefined;
  #released = false;
  readonly #stopListening: () => void;
  readonly sources: SourceSet;
  /** One application at a time, in the order asked for. */
  #queue: Promise<unknown> = Promise.resolve();

  constructor(options: KindSetOptions) {
    this.#options = options;
    const { manager, discovery, wiring } = options;
    this.#everyKind = new EveryKind(options.log);
    this.#access = options.access && new KindAccess(options.access, options.log);
    this.sources = new SourceSet({
      apis: wiring.apis,
      discovery,
      once: manager.listsOnce,
      events: wiring.events,
      memory: options.sourceMemory,
      log: wiring.log,
    });
    const stopSources = this.sources.onChange((name, change) => {
      for (const kind of this.#running.values()) kind.sourceChanged(name, change);
    });
    const stopDiscovery = discovery.onChange(() => this.#reapply());
    this.#stopListening = () => {
      stopSources();
      stopDiscovery();
    };
  }

  /** The config in force: the last one applied. */
  get config(): Config | undefined {
    return this.#config;
  }

  /** The kinds running now. */
  get kinds(): LabelledKind[] {
    return [...this.#running.values()];
  }

  /** Configured kinds the API server does not serve (yet). */
  get unknown(): Resolved['unknown'] {
    return this.#unknown;
  }

  get relations(): Relations | undefined {
    return this.#relations;
  }

  /** Kinds of the every-kind entry skipped because labeller may not use them. */
  get skipped(): SkippedKind[] {
    return this.#access?.skipped ?? [];
  }

  /**
   * Makes `config` the config in force. Rejects, changing nothing, when it cannot run: a
   * UsageError (a kind that is a mistake, two names of one resource, another config holding the
   * field manager) or a failure to reach the API server for the guard's check (worth retrying).
   */
  apply(config: Config, signal?: AbortSignal): Promise<KindSetChange> {
    const applied = this.#queue.then(() => this.#apply(config, signal));
    this.#queue = applied.catch(() => {});
    return applied;
  }

  /** Why labels may be held or kinds missing: reported by /readyz, not keeping it from being ready. */
  notes(): string[] {
    return [
      ...this.#unknown.map(({ kind }) => `${kind.resource}: not served by the API server (yet); started once it is`),
      ...(this.#access?.notes() ?? []),
      ...(this.#relations?.notes() ?? []),
      ...this.sources.notes(),
    ];
  }

  /** Lets every kind and related cache go, once the manager has stopped them all. */
  async release(): Promise<void> {
    this.#released = true;
    clearTimeout(this.#recheck);
    this.#stopListening();
    this.#stopDemand?.();
    await Promise.all([...this.#running.values()].map((kind) => kind.release()));
    this.#running.clear();
    this.#relations?.release();
    await this.sources.stop();
  }

  async #apply(config: Config, signal?: AbortSignal): Promise<KindSetChange> {
    const { manager, discovery, wiring, claim, log } = this.#options;
    const explicit = resolveKinds(config.kinds, discovery, config.references);
    const every = config.everyKind
      ? this.#everyKind.expand(config.everyKind, explicit.resolved, discovery.resources).kinds
      : [];
    checkAliases([...explicit.resolved, ...every]);
    const allowed = this.#access ? await this.#access.admit(every, (name) => this.#running.has(name), signal) : every;
    const kinds: Resolved = { ...explicit, resolved: [...explicit.resolved, ...allowed] };
    await claim?.(config, kinds, signal);

    // Sources first: a kind that reads one waits for its first load.
    this.sources.apply(config.sources);
    const lacked = this.#relations ? this.#relations.lacks(config) : [];
    const rebuild = !this.#relations || lacked.length > 0;
    const next = new Map(kinds.resolved.map((resolved) => [controllerName(resolved), resolved]));
    const removed = [...this.#running.keys()].filter((name) => !next.has(name));
    const added: string[] = [];
    const relabelled: string[] = [];
    const restarted: string[] = [];
    for (const [name, resolved] of next) {
      const running = this.#running.get(name);
      if (!running) added.push(name);
      else if (rebuild || changed(running.resolved, resolved) === 'restart') restarted.push(name);
      else if (changed(running.resolved, resolved) === 'relabel') relabelled.push(name);
    }

    const before = new Map([...this.#running].map(([name, kind]) => [name, kind.resolved]));
    const served = new Set(discovery.resources.map(groupResource));
    const gone = removed.filter((name) => !served.has(groupResource(this.#running.get(name)!.resolved.resource)));
    // The old stop (their reconciles finish) and let their caches go before the new start: a
    // restarted kind lists again.
    await Promise.all([...removed, ...restarted].map(async (name) => {
      await manager.remove(name);
      await this.#running.get(name)?.release();
      this.#running.delete(name);
      if (!next.has(name)) wiring.metrics?.forget(name);
    }));
    if (rebuild) {
      this.#relations?.release();
      this.#relations = new Relations(config, { ...wiring, informers: manager.informers }, discovery);
    }
    for (const name of relabelled) this.#running.get(name)!.relabel(next.get(name)!.kind);
    for (const name of [...added, ...restarted]) {
      const kind = labelledKind(next.get(name)!, this.#relations!, {
        ...wiring,
        informers: manager.informers,
        sources: this.sources,
        refused: (controller) => this.#refused(controller),
      });
      this.#running.set(name, kind);
      manager.add(kind.controller);
    }

    for (const { kind, error } of kinds.unknown) {
      if (!this.#unknown.some((u) => u.kind.resource === kind.resource)) {
        log.error(error.message, { kind: kind.resource });
      }
    }
    for (const name of added) {
      const { kind, resource } = next.get(name)!;
      if (this.#served && !this.#served.has(groupResource(resource))) {
        log.info('kind is served now; watching it', { kind: resource.kind, resource: kind.resource });
      }
    }
    for (const name of gone) log.warn('kind no longer served; stopped until it is again', { controller: name });
    const spelled = (names: readonly string[], kinds: ReadonlyMap<string, ResolvedKind>) =>
      names.map((name) => kinds.get(name)?.kind.resource ?? name);
    this.#unknown = kinds.unknown;
    this.#served = served;
    this.#config = config;
    // While a kind is not served, or kinds may come and go (every-kind), discovery is asked again now and then.
    if (kinds.unknown.length > 0 || config.everyKind) this.#stopDemand ??= discovery.demand();
    else {
      this.#stopDemand?.();
      this.#stopDemand = undefined;
    }
    this.#scheduleRecheck();
    return {
      added: spelled(added, next),
      removed: spelled(removed, before),
      relabelled: spelled(relabelled, next),
      restarted: spelled(restarted, next),
      relatedCachesRebuilt: lacked,
    };
  }

  /**
   * Applies the config in force again: after a discovery change (kinds served now start, kinds
   * gone stop), or to ask about kinds skipped for want of rights. The config in force when that
   * application runs, not now: a reload queued before it must not be undone by the config it
   * replaced.
   */
  #reapply(): void {
    if (!this.#config || this.#released) return;
    const applied = this.#queue.then(() => (this.#config && !this.#released ? this.#apply(this.#config) : undefined));
    this.#queue = applied.catch(() => {});
    applied.catch((error: unknown) =>
      this.#options.log.error('config cannot be applied to what the API server serves now', { error })
    );
  }

  /** A running kind's list or watch was refused: an every-kind kind is asked about again, and skipped if denied. */
  #refused(controller: string): void {
    if (this.#access?.forget(controller)) this.#reapply();
  }

  /** While kinds are skipped for want of rights, they are asked about again now and then: a grant starts them. */
  #scheduleRecheck(): void {
    if (!this.#access?.skipped.length) {
      clearTimeout(this.#recheck);
      this.#recheck = undefined;
      return;
    }
    if (this.#recheck) return;
    const ms = (this.#options.accessRecheckMs ?? 60_000) * (0.9 + Math.random() * 0.2);
    this.#recheck = setTimeout(() => {
      this.#recheck = undefined;
      this.#reapply();
    }, ms);
    // Pending work of its own must not keep a stopping process alive.
    (this.#recheck as { unref?: () => void }).unref?.();
  }
}

/** How a running kind differs from its next config: its resource's version, or what kindChange says. */
function changed(running: ResolvedKind, next: ResolvedKind): ReturnType<typeof kindChange> {
  if (running.resource.version !== next.resource.version) return 'restart';
  return kindChange(running.kind, next.kind);
}
