// What labeller owns and what it would change, counted from cached objects alone (no API call):
// the basis of `labeller status` and of the labeller_objects_managed/pending gauges.
import type { LabelledObject } from './object.ts';
import { needsApply, type Plan } from './reconcile.ts';

export interface ObjectCounts {
  /** Objects listed. */
  seen: number;
  /** Objects carrying at least one label or annotation that labeller's field manager owns. */
  managed: number;
  /** Objects an apply would change: a label or annotation to add, change, or drop from labeller's ownership. */
  pending: number;
  /** Objects with a label another manager set to another value (`force` takes it over, `skip` leaves it). */
  conflicts: number;
  /** Objects with a value that cannot be written (that key held; the whole object when its annotations are too large). */
  invalid: number;
  /** Objects with labels held because a related object they read cannot be read (a kind not followed or refused). */
  held: number;
}

export const noObjects = (): ObjectCounts => ({ seen: 0, managed: 0, pending: 0, conflicts: 0, invalid: 0, held: 0 });

const PENDING = 1;
const CONFLICT = 2;
const INVALID = 4;
const HELD = 8;

/**
 * What a plan says about an object, as bits (cheap to remember per cached object). A label held
 * only until a cache lists counts as pending: it may well change then.
 */
function verdict(plan: Plan): number {
  if ('problem' in plan) return INVALID;
  const pending = needsApply(plan) || plan.waiting;
  const some = (list: 'contested' | 'held') => plan.labels[list].length + plan.annotations[list].length > 0;
  return (pending ? PENDING : 0) | (some('contested') ? CONFLICT : 0) | (some('held') && !plan.waiting ? HELD : 0) |
    (plan.problems.length > 0 ? INVALID : 0);
}

/** Adds one object to `counts`, given what converging it takes. */
export function countObject(counts: ObjectCounts, object: LabelledObject, plan: Plan): void {
  tally(counts, object, verdict(plan));
}

function tally(counts: ObjectCounts, object: LabelledObject, bits: number): void {
  counts.seen++;
  // On its way out: nothing will be written to it.
  if (object.deleting) return;
  if (object.ownedLabels.length > 0 || object.ownedAnnotations.length > 0) counts.managed++;
  if (bits & PENDING) counts.pending++;
  if (bits & CONFLICT) counts.conflicts++;
  if (bits & INVALID) counts.invalid++;
  if (bits & HELD) counts.held++;
}

/**
 * OutcomeCounts a cache again and again (a metrics scrape): cached objects are immutable and replaced
 * when they change, so each one is planned once and its verdict kept for as long as it is cached;
 * but for a verdict that waits on a cache of related objects, which is planned again until it
 * no longer does.
 */
export function objectCounter(
  plan: (object: LabelledObject) => Plan,
): (objects: Iterable<LabelledObject>) => ObjectCounts {
  const verdicts = new WeakMap<LabelledObject, number>();
  return (objects) => {
    const counts = noObjects();
    for (const object of objects) {
      let bits = verdicts.get(object);
      if (bits === undefined) {
        const planned = plan(object);
        bits = verdict(planned);
        if ('problem' in planned || !planned.waiting) verdicts.set(object, bits);
      }
      tally(counts, object, bits);
    }
    return counts;
  };
}
