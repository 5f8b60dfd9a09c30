// A related resource's changes mapped to the objects that depend on them, which are queued on
// their own controllers (controller-runtime's Watches with a mapping handler, kube-rs's
// Controller::watches with a mapper). Nothing here knows what the controllers do.
import type { Informer } from './informer.ts';
import { Sliced } from './slices.ts';
import type { StoreChange } from './store.ts';

/** Where a mapper sends an object to be reconciled again (a Controller). */
export interface Enqueue {
  enqueue(key: string): void;
}

/**
 * Queues, on their controllers, the objects `mapper` finds affected by each change of `informer`,
 * a slice at a time (a namespace's change finds every object in it); returns the unsubscribe function.
 */
export function watches<T>(
  informer: Informer<T>,
  mapper: (change: StoreChange<T>) => Iterable<readonly [Enqueue, string]>,
): () => void {
  const requeues = new Sliced<readonly [Enqueue, string]>(([target, key]) => target.enqueue(key));
  const unsubscribe = informer.subscribe((change) => requeues.pushAll(mapper(change)));
  return () => {
    unsubscribe();
    requeues.clear();
  };
}
