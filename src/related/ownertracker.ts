// Which owner caches a labelled kind's objects lead to: each object's controller reference is
// noted as it appears, and the cache of its owner kind made; for root.* (deep), the owners' own
// owners too, up the chains. A kind's reconciles wait for the caches found so far (and found
// meanwhile) to list or fail.
import type { LabelledObject } from '../labelling/object.ts';
import type { Informer } from '../runtime/informer.ts';

interface Tracked {
  /** The ids of the owner caches its objects point into. */
  readonly ids: Set<string>;
  /** Their owners' owners too, up the chains (root.*). */
  deep: boolean;
  readonly note: (object: LabelledObject | undefined) => void;
  readonly unsubscribe: () => void;
}

/** Finds (and makes) the cache an object's owner lives in, and answers caches by id. */
export interface OwnerCaches {
  forOwnerOf(object: LabelledObject): { readonly id: string; readonly informer: Informer<LabelledObject> } | undefined;
  get(id: string): Informer<LabelledObject> | undefined;
}

export class OwnerTracker {
  readonly #caches: OwnerCaches;
  readonly #tracked = new Map<Informer<LabelledObject>, Tracked>();

  constructor(caches: OwnerCaches) {
    this.#caches = caches;
  }

  /**
   * Follows the owners of `informer`'s objects from now on, and of those it holds; `deep`, up the
   * chains. An owner kind read only by `owner.*` is not followed up: its own owners may be kinds
   * labeller is not allowed to read.
   */
  track(informer: Informer<LabelledObject>, deep: boolean): void {
    const known = this.#tracked.get(informer);
    if (known) {
      if (deep && !known.deep) {
        known.deep = true;
        for (const id of known.ids) this.track(this.#caches.get(id)!, true);
      }
      return;
    }
    const note = (object: LabelledObject | undefined): void => {
      const found = object?.owner && this.#caches.forOwnerOf(object);
      if (!found || tracked.ids.has(found.id)) return;
      tracked.ids.add(found.id);
      if (tracked.deep) this.track(found.informer, true);
    };
    const unsubscribe = informer.subscribe((change) => {
      if (change.type === 'upsert') note(change.object);
      else if (change.type === 'resync') { for (const key of change.changed) note(informer.store.get(key)); }
    });
    const tracked: Tracked = { ids: new Set<string>(), deep, note, unsubscribe };
    this.#tracked.set(informer, tracked);
    for (const key of informer.store.keys()) note(informer.store.get(key));
  }

  /** Looks at every tracked object again (an owner kind may be served, or followed, now). */
  renote(): void {
    for (const [informer, { note }] of this.#tracked) {
      for (const key of informer.store.keys()) note(informer.store.get(key));
    }
  }

  /** The owner caches `informer`'s objects lead to; `deep`, up their chains. */
  ids(informer: Informer<LabelledObject>, deep: boolean, into = new Set<string>()): Set<string> {
    const pending = [...(this.#tracked.get(informer)?.ids ?? [])];
    for (let id = pending.pop(); id !== undefined; id = pending.pop()) {
      if (into.has(id)) continue;
      into.add(id);
      const owner = this.#caches.get(id);
      if (deep && owner) pending.push(...(this.#tracked.get(owner)?.ids ?? []));
    }
    return into;
  }

  /** Stops following `informer`'s objects (its kind stopped), or every informer's. */
  forget(informer?: Informer<LabelledObject>): void {
    for (const [tracked, { unsubscribe }] of this.#tracked) {
      if (informer && tracked !== informer) continue;
      unsubscribe();
      this.#tracked.delete(tracked);
    }
  }
}
