// A related resource's changes mapped to the objects that depend on them, which are queued on
// their own controllers (controller-runtime's Watches with a mapping handler, kube-rs's
// Controller::watches with a mapper). Nothing here knows what the controllers do.
import type { Informer } from './informer.ts';
import type { StoreChange } from './store.ts';

/** Where a mapper sends objects to be reconciled again (a Controller). */
export interface Enqueue {
  /** Queues the keys; many (a namespace's objects) are queued a slice at a time. */
  enqueueAll(keys: Iterable<string>): void;
}

/** Queues, on their controllers, the objects `mapper` finds affected by each change of `informer`; returns the unsubscribe function. */
export function watches<T>(
  informer: Informer<T>,
  mapper: (change: StoreChange<T>) => Iterable<readonly [Enqueue, string]>,
): () => void {
  return informer.subscribe((change) => {
    // Mapped at once, while the change and the caches it reads are current; queued by target.
    const byTarget = new Map<Enqueue, string[]>();
    for (const [target, key] of mapper(change)) {
      const keys = byTarget.get(target);
      if (keys) keys.push(key);
      else byTarget.set(target, [key]);
    }
    for (const [target, keys] of byTarget) target.enqueueAll(keys);
  });
}
