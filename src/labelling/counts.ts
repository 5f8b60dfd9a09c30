// What labeller owns and what it would change, counted from cached objects alone (no API call):
// the basis of `labeller status` and of the labeller_objects_managed/pending and
// labeller_coverage_ratio gauges.
import type { LabelledObject } from './object.ts';
import { type KeyCoverage, keyStates } from './coverage.ts';
import { needsApply, type Plan } from './reconcile.ts';

export interface ObjectCounts {
  /** Objects listed. */
  seen: number;
  /** Objects carrying at least one label or annotation that labeller's field manager owns, or its admission policies set. */
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
  // Keys set at admission by labeller's policies are labeller's, though no manager owns them.
  const { admitted } = object;
  const ours = object.ownedLabels.length + object.ownedAnnotations.length + admitted.labels.length +
    admitted.annotations.length;
  if (ours > 0) counts.managed++;
  if (bits & PENDING) counts.pending++;
  if (bits & CONFLICT) counts.conflicts++;
  if (bits & INVALID) counts.invalid++;
  if (bits & HELD) counts.held++;
}

/** One pass over a cache: what labeller owns and would change, and each configured label's coverage. */
export interface CacheCounts {
  readonly counts: ObjectCounts;
  readonly coverage: readonly KeyCoverage[];
}

/** Coverage flags fit beside the verdict bits in one exact number up to this many keys. */
const PACKED_KEYS = 49;

/**
 * Counts a cache again and again (a metrics scrape): cached objects are immutable and replaced
 * when they change, so each one is planned once and its verdict and the labels it carries as
 * wanted (`keys`) kept, as one number, for as long as it is cached; but for a verdict that waits
 * on a cache of related objects, which is planned again until it no longer does (as is any
 * object of a kind with more labels than fit in the number).
 */
export function objectCounter(
  plan: (object: LabelledObject) => Plan,
  keys: readonly string[] = [],
): (objects: Iterable<LabelledObject>) => CacheCounts {
  const verdicts = new WeakMap<LabelledObject, number>();
  return (objects) => {
    const counts = noObjects();
    const covered = keys.map(() => 0);
    let total = 0;
    for (const object of objects) {
      let packed = verdicts.get(object);
      if (packed === undefined) {
        const planned = plan(object);
        // Verdict in the low 4 bits, then one bit per key: arithmetic, not bitwise, past 31 bits.
        packed = keyStates(planned, object, keys).reduceRight(
              (mask, state) => mask * 2 + (state === 'covered' ? 1 : 0),
              0,
            ) * 16 + verdict(planned);
        if (('problem' in planned || !planned.waiting) && keys.length <= PACKED_KEYS) verdicts.set(object, packed);
      }
      tally(counts, object, packed % 16);
      if (object.deleting) continue;
      total++;
      let mask = Math.floor(packed / 16);
      for (let i = 0; mask > 0; i++, mask = Math.floor(mask / 2)) if (mask % 2 === 1) covered[i]!++;
    }
    return { counts, coverage: keys.map((key, i) => ({ key, objects: total, covered: covered[i]! })) };
  };
}
