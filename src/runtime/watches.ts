// A related resource's changes mapped to the objects that depend on them, which are queued on
// their own controllers (controller-runtime's Watches with a mapping handler, kube-rs's
// Controller::watches with a mapper). Nothing here knows what the controllers do.
import type { Informer } from './informer.ts';
import type { StoreChange } from './store.ts';

/** Where a mapper sends an object to be reconciled again (a Controller). */
export interface Enqueue {
  enqueue(key: string): void;
}

/** Queues, on their controllers, the objects `mapper` finds affected by each change of `informer`; returns the unsubscribe function. */
export function watches<T>(
  informer: Informer<T>,
  mapper: (change: StoreChange<T>) => Iterable<readonly [Enqueue, string]>,
): () => void {
  return informer.subscribe((change) => {
    for (const [target, key] of mapper(change)) target.enqueue(key);
  });
}
