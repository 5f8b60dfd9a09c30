// What labeller owns and what it would change, counted from cached objects alone (no API call):
// the basis of `labeller status` and of the labeller_objects_managed/pending and
// labeller_coverage_ratio gauges.
import { setImmediate } from 'node:timers/promises';
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
const MANAGED = 16;
const DELETING = 32;
/** Where the flags of the keys covered begin, past the verdict's bits. */
const KEYS_BASE = 64;
/** The flags of this many keys fit beside the verdict's bits in one exact number (2^53). */
const PACKED_KEYS = 47;

/**
 * What a plan says about an object, as bits (cheap to remember per cached object). A label held
 * only until a cache lists counts as pending: it may well change then.
 */
function verdict(plan: Plan, object: LabelledObject): number {
  if (object.deleting) return DELETING;
  // Keys set at admission by labeller's policies are labeller's, though no manager owns them.
  const { admitted } = object;
  const ours = object.ownedLabels.length + object.ownedAnnotations.length + admitted.labels.length +
    admitted.annotations.length;
  const managed = ours > 0 ? MANAGED : 0;
  if ('problem' in plan) return managed | INVALID;
  const pending = needsApply(plan) || plan.waiting;
  const some = (list: 'contested' | 'held') => plan.labels[list].length + plan.annotations[list].length > 0;
  return managed | (pending ? PENDING : 0) | (some('contested') ? CONFLICT : 0) |
    (some('held') && !plan.waiting ? HELD : 0) | (plan.problems.length > 0 ? INVALID : 0);
}

/** One pass over a cache: what labeller owns and would change, and each configured label's coverage. */
export interface CacheCounts {
  readonly counts: ObjectCounts;
  readonly coverage: readonly KeyCoverage[];
}

/**
 * An object's verdict and the keys it carries as wanted: one number (the keys' flags above
 * KEYS_BASE) up to PACKED_KEYS keys, else the bits followed by the indexes of the keys covered.
 */
type Packed = number | readonly number[];

/** What the counter reads a cache through. */
export interface CountedCache {
  get(key: string): LabelledObject | undefined;
  keys(): Iterable<string>;
}

/**
 * Counts a cache as it changes (the metrics gauges, `status`): each object's verdict is kept by
 * key with what it adds to the counts, and a read plans again only the objects marked changed
 * since the last one, so that a scrape costs what changed, not the size of the cache. A key is
 * marked when the cache replaces or drops its object and when the controller queues it again
 * (what it should carry may have changed: a namespace, an owner or a source did); a verdict that
 * waits on a cache of related objects is planned again at each read until it no longer does.
 */
export class CacheCounter {
  readonly #plan: (object: LabelledObject) => Plan;
  readonly #keys: readonly string[];
  readonly #cache: CountedCache;
  readonly #verdicts = new Map<string, Packed>();
  readonly #changed = new Set<string>();
  readonly #waiting = new Set<string>();
  /** Every cached key still to plan: at first, and when told every object changed. */
  #sweep: Iterator<string> | undefined;
  /** A sweep to begin at the next read. */
  #sweepDue = false;
  readonly #counts = noObjects();
  readonly #covered: number[];
  /** Objects counted for coverage: cached, less those being deleted. */
  #total = 0;

  constructor(plan: (object: LabelledObject) => Plan, keys: readonly string[], cache: CountedCache) {
    this.#plan = plan;
    this.#keys = keys;
    this.#cache = cache;
    this.#covered = keys.map(() => 0);
    this.changedAll();
  }

  /** The object under `key` changed, went, or may be due other labels. */
  changed(key: string): void {
    // A sweep not yet begun will plan every object the cache holds then (a first list marks all).
    if (this.#sweepDue) return;
    this.#changed.add(key);
    // Never read (no scrape), a cache that churns would grow the set for good: past the objects
    // counted, planning every one again is no more work.
    if (this.#changed.size > Math.max(1024, this.#verdicts.size)) this.changedAll();
  }

  /** Every object may be due other labels. */
  changedAll(): void {
    Object.assign(this.#counts, noObjects());
    this.#total = 0;
    this.#covered.fill(0);
    this.#verdicts.clear();
    this.#changed.clear();
    this.#waiting.clear();
    this.#sweep = undefined;
    this.#sweepDue = true;
  }

  /** The counts, every marked object planned first. */
  read(): CacheCounts {
    this.#begin();
    while (this.#step(Infinity));
    return this.#current();
  }

  /**
   * The same as `read`, planning `sliceMs` at a time and yielding to the event loop in between,
   * so that a read after many changes (the first, a reload) stalls nothing else.
   */
  async settle(sliceMs: number): Promise<CacheCounts> {
    this.#begin();
    while (this.#step(performance.now() + sliceMs)) await setImmediate();
    return this.#current();
  }

  #begin(): void {
    if (this.#sweepDue) {
      // The cache's own iterator, live: an object it replaces or drops meanwhile is marked as
      // well, and planning one twice is harmless (its old verdict is taken out first).
      this.#sweep = this.#cache.keys()[Symbol.iterator]();
      this.#sweepDue = false;
    }
    for (const key of this.#waiting) this.#changed.add(key);
    this.#waiting.clear();
  }

  /** Plans marked objects until `deadline`; whether some are left. */
  #step(deadline: number): boolean {
    let planned = 0;
    const past = () => ++planned % 64 === 0 && performance.now() > deadline;
    if (this.#sweep) {
      for (let next = this.#sweep.next(); !next.done; next = this.#sweep.next()) {
        this.#count(next.value);
        if (past()) return true;
      }
      this.#sweep = undefined;
    }
    for (const key of this.#changed) {
      this.#changed.delete(key);
      this.#count(key);
      if (past()) return this.#changed.size > 0;
    }
    return false;
  }

  #current(): CacheCounts {
    const objects = this.#total;
    return {
      counts: { ...this.#counts },
      coverage: this.#keys.map((key, i) => ({ key, objects, covered: this.#covered[i]! })),
    };
  }

  /** Plans the object under `key` again, its old verdict taken out of the counts and the new one in. */
  #count(key: string): void {
    const old = this.#verdicts.get(key);
    if (old !== undefined) this.#add(old, -1);
    const object = this.#cache.get(key);
    if (object === undefined) {
      this.#verdicts.delete(key);
      this.#waiting.delete(key);
      return;
    }
    const plan = this.#plan(object);
    const bits = verdict(plan, object);
    const covered: number[] = [];
    if (!object.deleting) {
      keyStates(plan, object, this.#keys).forEach((state, i) => state === 'covered' && covered.push(i));
    }
    const packed = this.#keys.length <= PACKED_KEYS
      ? covered.reduce((sum, i) => sum + 2 ** i, 0) * KEYS_BASE + bits
      : Object.freeze([bits, ...covered]);
    this.#verdicts.set(key, packed);
    this.#add(packed, 1);
    if (!('problem' in plan) && plan.waiting) this.#waiting.add(key);
    else this.#waiting.delete(key);
  }

  #add(packed: Packed, sign: 1 | -1): void {
    const bits = typeof packed === 'number' ? packed % KEYS_BASE : packed[0]!;
    const counts = this.#counts;
    counts.seen += sign;
    // On its way out: nothing will be written to it.
    if (bits & DELETING) return;
    this.#total += sign;
    if (bits & MANAGED) counts.managed += sign;
    if (bits & PENDING) counts.pending += sign;
    if (bits & CONFLICT) counts.conflicts += sign;
    if (bits & INVALID) counts.invalid += sign;
    if (bits & HELD) counts.held += sign;
    if (typeof packed === 'number') {
      let mask = Math.floor(packed / KEYS_BASE);
      for (let i = 0; mask > 0; i++, mask = Math.floor(mask / 2)) if (mask % 2 === 1) this.#covered[i]! += sign;
    } else {
      for (const i of packed.slice(1)) this.#covered[i]! += sign;
    }
  }
}
