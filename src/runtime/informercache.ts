// The informers of a process, shared by id (client-go's SharedInformerFactory, controller-runtime's
// cache): whoever reads a resource acquires its informer, which is started on the first
// acquisition and stopped when the last holder releases it, so a resource is listed and watched
// once however many controllers and lookups read it, and a cache nobody reads any more (a kind
// dropped by a reload, an owner kind no template reads) stops watching and leaves readiness.
import type { Informer } from './informer.ts';

/** One holder's claim on a shared informer. */
export interface InformerHandle<T> {
  readonly informer: Informer<T>;
  /** Gives the claim up; the informer stops when it was the last one, and the promise resolves once it has. Idempotent. */
  release(): Promise<void>;
}

interface Entry<T> {
  readonly informer: Informer<T>;
  readonly stop: AbortController;
  /** Resolves once it has stopped. */
  readonly running: Promise<void>;
  holders: number;
}

export class InformerCache<T> {
  readonly #entries = new Map<string, Entry<T>>();
  readonly #run: (informer: Informer<T>, signal: AbortSignal) => Promise<void>;
  readonly #signal: AbortSignal;
  readonly #running = new Set<Promise<void>>();

  /**
   * `run` runs an informer until its signal aborts (watching) or once (listing once); `signal`
   * stops every informer (shutdown).
   */
  constructor(run: (informer: Informer<T>, signal: AbortSignal) => Promise<void>, signal: AbortSignal) {
    this.#run = run;
    this.#signal = signal;
  }

  /** The informer of `id`, made by `create` and started when nobody holds it yet. */
  acquire(id: string, create: () => Informer<T>): InformerHandle<T> {
    let entry = this.#entries.get(id);
    if (!entry) {
      const informer = create();
      const stop = new AbortController();
      const running = this.#run(informer, AbortSignal.any([this.#signal, stop.signal])).catch(() => {});
      entry = { informer, stop, running, holders: 0 };
      this.#entries.set(id, entry);
      this.#running.add(running);
      void running.then(() => this.#running.delete(running));
    }
    entry.holders++;
    const held = entry;
    let released = false;
    return {
      informer: held.informer,
      release: () => {
        if (released || --held.holders > 0) {
          released = true;
          return Promise.resolve();
        }
        released = true;
        held.stop.abort();
        if (this.#entries.get(id) === held) this.#entries.delete(id);
        return held.running;
      },
    };
  }

  /** The informer of `id`, if somebody holds it. */
  get(id: string): Informer<T> | undefined {
    return this.#entries.get(id)?.informer;
  }

  /** Every informer held now. */
  get informers(): Informer<T>[] {
    return [...this.#entries.values()].map((entry) => entry.informer);
  }

  /** Resolves once every informer started so far has stopped (after `signal` aborted). */
  async stopped(): Promise<void> {
    while (this.#running.size > 0) await Promise.all(this.#running);
  }
}
