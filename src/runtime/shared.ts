// Informers shared by every controller that reads a resource, and `watches`: a related
// resource's changes mapped to the objects that depend on them, which are queued on their own
// controllers (controller-runtime's Watches with a mapping handler, kube-rs's
// Controller::watches with a mapper). Nothing here knows what the controllers do.
import type { Informer } from './informer.ts';
import type { StoreChange } from './store.ts';

/** Where a mapper sends an object to be reconciled again (a Controller). */
export interface Enqueue {
  enqueue(key: string): void;
}

export class SharedInformers<T> {
  readonly #informers = new Map<string, Informer<T>>();
  readonly #start: (informer: Informer<T>) => void;
  readonly #added: ((id: string, informer: Informer<T>) => void)[] = [];

  /** `start` runs an informer this registry created (watching, or listing once). */
  constructor(start: (informer: Informer<T>) => void) {
    this.#start = start;
  }

  get(id: string): Informer<T> | undefined {
    return this.#informers.get(id);
  }

  /** Every informer, shared or created here. */
  get all(): IterableIterator<Informer<T>> {
    return this.#informers.values();
  }

  /** Offers an informer that runs elsewhere (a controller's own) to readers of `id`; the first one stays. */
  share(id: string, informer: Informer<T>): void {
    if (this.#informers.has(id)) return;
    this.#informers.set(id, informer);
    for (const listener of this.#added) listener(id, informer);
  }

  /** Withdraws `informer` from `id` (it stops running): readers then get the next one shared, or one `ensure` makes. */
  unshare(id: string, informer: Informer<T>): void {
    if (this.#informers.get(id) === informer) this.#informers.delete(id);
  }

  /** The informer of `id`: the shared one, or one made by `create` and started now. */
  ensure(id: string, create: () => Informer<T>): Informer<T> {
    const known = this.#informers.get(id);
    if (known) return known;
    const informer = create();
    this.share(id, informer);
    this.#start(informer);
    return informer;
  }

  /** Calls `listener` for each informer added from now on. */
  onAdded(listener: (id: string, informer: Informer<T>) => void): void {
    this.#added.push(listener);
  }
}

/** Queues, on their controllers, the objects `mapper` finds affected by each change of `source`. */
export function watches<T>(
  source: Informer<T>,
  mapper: (change: StoreChange<T>) => Iterable<readonly [Enqueue, string]>,
): void {
  source.subscribe((change) => {
    for (const [target, key] of mapper(change)) target.enqueue(key);
  });
}
