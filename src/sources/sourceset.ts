// The sources of truth of the config in force, loading: each keeps its last good content, so a
// source that cannot be read (unreachable, refused, too large, malformed) changes nothing; before
// its first good read, the labels that read it are held. Content that looks like an outage (empty,
// or dropping most keys at once) is a failure too, checked at the first read against the key set
// remembered before a restart (memory.ts). Each change is told to the kinds with
// the keys whose entries changed, so exactly the objects that looked those keys up are queued.
// Content that drops most keys but is not empty is held, not refused for ever: once it has stayed
// the same, every read in between succeeding, for the source's acceptSmallerAfter (10 minutes by
// default), it is taken, and remembered, so a catalogue that really shrank, while labeller ran or
// while it was down, is taken after a bounded time, and a restart never wedges on the key set
// remembered before it.
// A failing source is a log line, a Warning Event on labeller's Pod, the labeller_source_*
// metrics and a line in /readyz (which it keeps from ready only when it is `required` and has
// never loaded).
import type { ResourceApis } from '../kube/api.ts';
import type { DiscoveryCache } from '../kube/discoverycache.ts';
import { changedKeys, lookUp, massRemoval, type SourceContent } from './content.ts';
import { type SourceLookups } from '../labelling/ports.ts';
import { type SourceSpec } from '../config/sources.ts';
import type { SourceGauges } from '../metrics/metrics.ts';
import type { Logger } from '../util/log.ts';
import { formatDuration } from '../util/duration.ts';
import type { LabellerEvents } from '../events/labellerevents.ts';
import { configMapLoader } from './configmap.ts';
import { fileLoader } from './file.ts';
import { httpLoader } from './http.ts';
import type { Loaded, Loader } from './loader.ts';
import { originOf, type Remembered, type SourceMemory } from './memory.ts';

export interface SourceSetOptions {
  readonly apis: ResourceApis;
  readonly discovery: DiscoveryCache;
  /** Read each source once (`--once`, status). */
  readonly once: boolean;
  readonly events?: Pick<LabellerEvents, 'sourceFailed'> | undefined;
  /** Each source's last good key set across restarts (none: a restart forgets it). */
  readonly memory?: SourceMemory | undefined;
  readonly log: Logger;
}

/** The keys of a source whose entries changed, or `all` at its first load (nobody could read it before). */
export type SourceChange = readonly string[] | 'all';

/** A source's state, for metrics. */
interface Running {
  readonly spec: SourceSpec;
  readonly key: string;
  /** Where its content comes from, for the memory (originOf). */
  readonly origin: string;
  content: SourceContent | undefined;
  /** Its key set before this process started, until its first good read here. */
  remembered: Remembered | undefined;
  bytes: number;
  lastSuccessMs: number | undefined;
  failure: Error | undefined;
  /** Content refused as dropping most keys, taken once it has stayed the same long enough (its timer). */
  holding: { readonly loaded: Loaded; readonly timer: ReturnType<typeof setTimeout> } | undefined;
  readonly settled: Promise<void>;
  readonly settle: () => void;
  readonly stop: AbortController;
  done?: Promise<void>;
}

export class SourceSet implements SourceLookups {
  readonly #options: SourceSetOptions;
  readonly #running = new Map<string, Running>();
  readonly #listeners = new Set<(name: string, change: SourceChange) => void>();

  constructor(options: SourceSetOptions) {
    this.#options = options;
  }

  /** Makes `specs` the sources loading: new and changed ones start, removed ones stop (and are forgotten). */
  apply(specs: ReadonlyMap<string, SourceSpec>): void {
    if (!this.#options.once) this.#options.memory?.retain(specs.keys());
    for (const [name, running] of this.#running) {
      if (specs.get(name) && JSON.stringify(specs.get(name)) === running.key) continue;
      running.stop.abort();
      this.#running.delete(name);
    }
    for (const [name, spec] of specs) if (!this.#running.has(name)) this.#start(spec);
  }

  loaded(name: string): boolean {
    return this.#running.get(name)?.content !== undefined;
  }

  lookup(name: string, key: string, field: string | undefined): string | undefined {
    const content = this.#running.get(name)?.content;
    return content === undefined ? undefined : lookUp(content, key, field);
  }

  /** Resolves once each of `names` has loaded or failed once (a kind reading them waits for that). */
  async settled(names: Iterable<string>): Promise<void> {
    await Promise.all([...names].map((name) => this.#running.get(name)?.settled));
  }

  /** Tells `listener` of each change of a source's content; returns the unsubscribe function. */
  onChange(listener: (name: string, change: SourceChange) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Required sources that have never loaded: they keep labeller from ready. */
  problems(): string[] {
    return [...this.#running.values()].flatMap(({ spec, content, failure }) =>
      spec.required && content === undefined
        ? [`source ${spec.name} has not loaded${failure ? `: ${failure.message}` : ''}`]
        : []
    );
  }

  /** Sources that have never loaded, or fail now: reported, not keeping labeller from ready. */
  notes(): string[] {
    return [...this.#running.values()].flatMap(({ spec, content, failure }) => {
      if (spec.required && content === undefined) return [];
      if (content === undefined) return [`source ${spec.name} has not loaded; labels that read it are held`];
      return failure ? [`source ${spec.name} cannot be read; its last good content stays: ${failure.message}`] : [];
    });
  }

  states(): SourceGauges[] {
    return [...this.#running.values()].map((running) => ({
      name: running.spec.name,
      up: running.content !== undefined && running.failure === undefined,
      lastSuccessMs: running.lastSuccessMs,
      bytes: running.bytes,
      keys: running.content?.size ?? 0,
    }));
  }

  /** Stops every source; resolves once they have. */
  async stop(): Promise<void> {
    for (const running of this.#running.values()) running.stop.abort();
    await Promise.all([...this.#running.values()].map((running) => running.done));
    this.#running.clear();
    await this.#options.memory?.close();
  }

  #start(spec: SourceSpec): void {
    let settle!: () => void;
    const settled = new Promise<void>((resolve) => (settle = resolve));
    const running: Running = {
      spec,
      key: JSON.stringify(spec),
      origin: originOf(spec.origin),
      content: undefined,
      remembered: undefined,
      bytes: 0,
      lastSuccessMs: undefined,
      failure: undefined,
      holding: undefined,
      settled,
      settle,
      stop: new AbortController(),
    };
    this.#running.set(spec.name, running);
    running.stop.signal.addEventListener('abort', () => clearTimeout(running.holding?.timer), { once: true });
    const loader = this.#loader(spec);
    const log = this.#options.log.child({ source: spec.name });
    const { memory, once } = this.#options;
    running.done = (async () => {
      running.remembered = await memory?.recall(spec.name, running.origin);
      await loader(
        (result) => {
          if (running.stop.signal.aborted) return;
          if (result instanceof Error) this.#unreadable(running, result, log);
          else this.#loaded(running, result, log);
          running.settle();
        },
        running.stop.signal,
        once,
      );
    })().catch((error: unknown) => {
      this.#unreadable(running, error instanceof Error ? error : new Error(String(error)), log);
      running.settle();
    });
  }

  #loader(spec: SourceSpec): Loader {
    const { origin } = spec;
    switch (origin.type) {
      case 'file':
        return fileLoader(origin.path);
      case 'url':
        return httpLoader(origin);
      case 'configMap':
        return configMapLoader(
          origin,
          this.#options.discovery.resolve('configmaps'),
          this.#options.apis,
          this.#options.log,
        );
    }
  }

  #loaded(running: Running, loaded: Loaded, log: Logger): void {
    const { content } = loaded;
    const before = running.content;
    // What looks like an outage is one: the labels that read the source stay as they are.
    // Checked against the key set before a restart too: an outage may outlast a process.
    const outage = running.spec.allowMassRemoval ? undefined : massRemoval(before, content) ??
      (before === undefined ? running.remembered?.outage(content) : undefined);
    if (outage === undefined) {
      this.#release(running);
      this.#take(running, loaded, log);
      return;
    }
    // Not empty, and smaller: a catalogue that shrank, if it stays so.
    const { acceptSmallerAfterMs } = running.spec;
    const holds = content.size > 0 && acceptSmallerAfterMs > 0 && !this.#options.once;
    if (holds) this.#hold(running, loaded, log);
    else this.#release(running);
    this.#failed(
      running,
      new Error(
        `${outage}; refused as an outage (set allowMassRemoval: true on the source if such a change is meant)${
          holds ? `; taken if it stays the same for ${formatDuration(acceptSmallerAfterMs)}` : ''
        }`,
      ),
      log,
    );
  }

  /** Holds `loaded` (refused as dropping most keys): taken once it alone has been read, without a failed read, for acceptSmallerAfter. */
  #hold(running: Running, loaded: Loaded, log: Logger): void {
    const held = running.holding?.loaded.content;
    if (held && changedKeys(held, loaded.content).length === 0) return;
    this.#release(running);
    const timer = setTimeout(() => {
      if (running.holding?.loaded !== loaded || running.stop.signal.aborted) return;
      running.holding = undefined;
      const had = running.content?.size ?? running.remembered?.keys;
      log.warn("source content that drops most keys stayed the same; taken as the source's content now", {
        keys: loaded.content.size,
        ...(had === undefined ? {} : { before: had }),
        stayedMs: running.spec.acceptSmallerAfterMs,
      });
      this.#take(running, loaded, log);
    }, running.spec.acceptSmallerAfterMs);
    // A process stopping does not wait for it.
    timer.unref?.();
    running.holding = { loaded, timer };
  }

  #release(running: Running): void {
    clearTimeout(running.holding?.timer);
    running.holding = undefined;
  }

  /** Takes `loaded` as the source's content: told to the listeners, remembered across restarts. */
  #take(running: Running, { content, bytes }: Loaded, log: Logger): void {
    const before = running.content;
    const changed = changedKeys(before, content);
    running.content = content;
    running.bytes = bytes;
    running.lastSuccessMs = Date.now();
    if (running.failure) log.info('source can be read again', { keys: content.size });
    running.failure = undefined;
    if (before !== undefined && changed.length === 0) return;
    running.remembered = undefined;
    if (!this.#options.once) this.#options.memory?.remember(running.spec.name, running.origin, content);
    log.info(before === undefined ? 'source loaded' : 'source changed', {
      keys: content.size,
      bytes,
      ...(before === undefined ? {} : { changed: changed.length }),
    });
    const change: SourceChange = before === undefined ? 'all' : changed;
    for (const listener of this.#listeners) listener(running.spec.name, change);
  }

  /**
   * A read that failed: held content has not stayed the same through it (the source may be gone,
   * or say something else), so its wait ends; the next read of it begins a new one.
   */
  #unreadable(running: Running, error: Error, log: Logger): void {
    this.#release(running);
    this.#failed(running, error, log);
  }

  #failed(running: Running, error: Error, log: Logger): void {
    // Said once per distinct failure, not at each poll.
    if (running.failure?.message === error.message) return;
    running.failure = error;
    const kept = running.content === undefined
      ? 'it has not loaded yet, so labels that read it are held'
      : 'its last good content stays';
    log.warn(`source cannot be read; ${kept}`, { error: error.message });
    this.#options.events?.sourceFailed(`source ${running.spec.name}: ${error.message}; ${kept}`);
  }
}
