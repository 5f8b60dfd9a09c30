// Keeping one object's labels and annotations right. The desired ones are rendered from the
// config; if the object already carries them and labeller owns no key it no longer wants, nothing
// is sent. Otherwise one server-side apply sends the whole desired set of both: keys labeller
// owned and left out are removed by the API server where no other manager also owns them. A key
// whose template reads a related object that cannot be read now is held: kept as it is when
// labeller owns it, not added otherwise. Of the annotations it writes the cache keeps digests,
// not values (see object.ts): enough to tell whether one needs writing.
//
// Over 300 lines: rendering, planning both maps and the one apply that follows are a single
// decision about an object, read together.
import type { Logger } from '../util/log.ts';
import {
  ANNOTATIONS_MAX_BYTES,
  byteLength,
  type ConflictPolicy,
  type MetadataField,
  type Protection,
} from '../config/model.ts';
import { digest } from './digest.ts';
import { type Before, before, type MetadataOperation, metadataPatch } from './patch.ts';
import { validateLabelValue } from '../apimachinery/labelsyntax.ts';
import { BEFORE_FIRST_APPLY, type LabelledObject, writtenOrder } from './object.ts';
import { DEFAULT_YIELD_TO, type FightTracker } from './fights.ts';
import { type LookupIndex, lookupKey } from './lookupindex.ts';
import {
  type AppliedMetadata,
  type ApplyTarget,
  LabelConflict,
  type MetadataClient,
  ObjectChanged,
  ObjectGone,
  type RelatedView,
  type SourceLookups,
} from './ports.ts';
import { relationName, type Template, type TemplateContext } from '../config/template.ts';
import { type Input, type KeyTrace, type Rendering, tracing } from './trace.ts';

/** The kind being reconciled, for apply bodies and templates. */
export interface KindInfo {
  readonly apiVersion: string;
  readonly kind: string;
  readonly resource: string;
  readonly group: string;
}

/**
 * `waiting`: a related object its labels read is not in its cache yet; `changed`: the object
 * changed before a write guarded by its version. The cache's change brings the object back.
 */
export type Outcome = 'unchanged' | 'patched' | 'conflict' | 'invalid' | 'gone' | 'waiting' | 'changed';

/** Reconcile outcomes of every controller, counted for the `--once` summary and the final log line. */
export type OutcomeCounts = Record<Outcome | 'failed', number>;

export const noOutcomes = (): OutcomeCounts => ({
  unchanged: 0,
  patched: 0,
  conflict: 0,
  invalid: 0,
  gone: 0,
  waiting: 0,
  changed: 0,
  failed: 0,
});

export interface ReconcilerOptions {
  readonly kind: KindInfo;
  readonly labels: ReadonlyMap<string, Template>;
  /** The annotations; their keys in the order the cache keeps digests of them (see projector). */
  readonly annotations?: ReadonlyMap<string, Template> | undefined;
  readonly conflicts: ConflictPolicy;
  /** Keys only labeller may set (config/protect.ts): taken over whatever `conflicts` says. */
  readonly protect?: Pick<Protection, MetadataField> | undefined;
  readonly dryRun: boolean;
  readonly client: MetadataClient;
  readonly log: Logger;
  /** The related objects templates read, from their caches (see related.ts). */
  readonly related?: ((object: LabelledObject) => RelatedView) | undefined;
  /** The sources templates look values up in, and where each object's lookups are recorded. */
  readonly sources?: { readonly lookups: SourceLookups; readonly index: LookupIndex } | undefined;
  /** Keys labeller takes over and another manager set since: retaken, yielded for a while, or left to wait (fights.ts). */
  readonly fights?: FightTracker | undefined;
  /** The field managers a fight is yielded to (fights.yieldTo); DEFAULT_YIELD_TO when not given. */
  readonly yieldTo?: ReadonlySet<string> | undefined;
}

/** A key labeller put back after a manager it does not yield to changed it (fights.ts). */
export interface Retaken {
  readonly field: MetadataField;
  readonly key: string;
  /** The field manager that changed it, when the API server said. */
  readonly manager?: string;
}

/** A key another manager takes back every time labeller retakes it: yielded to it for a while (fights.ts). */
export interface LabelFight {
  readonly field: MetadataField;
  readonly key: string;
  /** The field manager that keeps taking it, when the API server said. */
  readonly manager?: string;
  /** Retakes counted before labeller yielded. */
  readonly retakes: number;
  /** How long labeller leaves it alone now. */
  readonly backoffMs: number;
}

/** A label or annotation left to another field manager (conflicts: skip). */
export interface Contested {
  readonly field: MetadataField;
  readonly key: string;
  readonly wanted: string;
  /** Its value on the object, when the cache knows it (labels). */
  readonly value?: string;
  /** The field manager that owns it, when the API server said. */
  readonly manager?: string;
}

/**
 * Why a value cannot be written on this object, and whether a label or an annotation: one key's
 * (a rendered label value that is not one; that key is held, the rest goes on), or the whole
 * map's (annotations over the API server's size limit; nothing is written).
 */
export interface Problem {
  readonly field: MetadataField;
  /** The key whose value is invalid; absent when the whole map is. */
  readonly key?: string;
  readonly problem: string;
}

export interface Result {
  readonly outcome: Outcome;
  /**
   * The change as JSON Patch operations on the object: empty when unchanged; for a write, worked
   * out from its answer when printed (a dry run, at debug) or when it removed keys, else absent.
   */
  readonly patch?: readonly MetadataOperation[];
  /** Keys left alone under `skip` (also when others were patched); absent when none. */
  readonly contested?: readonly Contested[];
  /** Why values cannot be written (outcome `invalid`, with the other keys applied unless the whole map is invalid). */
  readonly problems?: readonly Problem[];
  /** The object's resourceVersion after labeller's own write (outcome `patched`, not in a dry run). */
  readonly written?: string;
  /**
   * How many keys of each map the write set and removed (outcome `patched`): the patch's count
   * where the write removed keys, else the plan's (keys added, changed or taken over).
   */
  readonly changed?: Readonly<Record<MetadataField, KeyChanges>>;
  /** Keys that became fights in this reconcile (each yielded to the other manager for a while). */
  readonly fights?: readonly LabelFight[];
  /** Keys put back after a manager labeller does not yield to changed them. */
  readonly retaken?: readonly Retaken[];
  /** Look at the object again after this long: a yielded key's backoff ends then. */
  readonly requeueAfterMs?: number;
}

/** Keys of one map a write set and removed. */
export interface KeyChanges {
  readonly set: number;
  readonly removed: number;
}

/** What converging one of the object's maps (labels or annotations) takes. */
export interface FieldPlan {
  /** Every configured key, rendered for this object. */
  readonly rendered: ReadonlyMap<string, string>;
  /** What an apply would send: `rendered` less the contested keys under `skip`, and held keys labeller owns at their values. */
  readonly desired: ReadonlyMap<string, string>;
  readonly contested: readonly string[];
  /** The contested keys labeller takes over: all of them under `force`, the protected ones under `skip` too. */
  readonly taken: readonly string[];
  /** Keys labeller owns, or was admitted (object.ts), that it no longer wants. */
  readonly stale: readonly string[];
  readonly missing: readonly string[];
  /** Keys held because a related object they read cannot be read now. */
  readonly held: readonly string[];
  /** Keys held because their value rendered for this object is invalid (see the plan's problems). */
  readonly invalid: readonly string[];
  /** Held keys labeller owns whose values the cache does not keep (annotations): read before an apply, to keep them. */
  readonly unknown: readonly string[];
}

/** See Reconciler.plan. */
export type Plan =
  | Problem
  | (Readonly<Record<MetadataField, FieldPlan>> & {
    /** Some keys are held only until a cache has listed (not for good: a kind not followed or refused). */
    readonly waiting: boolean;
    /** Keys whose values cannot be written, each held; the rest is planned as usual. */
    readonly problems: readonly Problem[];
    /**
     * The admission markers (admitted.ts) the next write removes: each whose keys all leave now,
     * and, when the config sets no key at all (prune), each that vouches for none.
     */
    readonly markers: readonly MetadataField[];
  });

/** Whether an apply would change anything. */
export function needsApply(plan: Exclude<Plan, Problem>): boolean {
  return plan.markers.length > 0 ||
    FIELDS.some((field) => plan[field].stale.length > 0 || plan[field].missing.length > 0);
}

const FIELDS: readonly MetadataField[] = ['labels', 'annotations'];

/** One map of an object as the cache keeps it: which keys labeller owns, which hold a value. */
interface Carried extends Before {
  readonly owned: readonly string[];
  /** Keys its admission policies set that no manager owns: labeller's too, but removed by a JSON Patch. */
  readonly admitted: readonly string[];
  /**
   * Its marker was written since the create, so it vouches for nothing: keys carried at the value
   * labeller wants that it does not own are taken over by the next apply (the policies may have
   * set them), so that they go when the config drops them.
   */
  readonly distrusted: boolean;
  has(key: string): boolean;
  /** The value, when the cache keeps it (labels, not annotations). */
  value(key: string): string | undefined;
}

/**
 * The labels as the cache keeps them, values and all. (Made at every plan, twice: an object with
 * methods, not closures, is one small allocation.)
 */
class CarriedLabels implements Carried {
  readonly #labels: Readonly<Record<string, string>>;
  readonly owned: readonly string[];
  readonly admitted: readonly string[];
  readonly distrusted: boolean;

  constructor(object: LabelledObject) {
    this.#labels = object.labels;
    this.owned = object.ownedLabels;
    this.admitted = object.admitted.labels;
    this.distrusted = object.admitted.distrusted?.includes('labels') ?? false;
  }

  // Keys are listed only for a patch, after an apply: not on the path every object takes.
  get keys(): readonly string[] {
    return Object.keys(this.#labels);
  }

  holds(key: string, value: string): boolean {
    return this.#labels[key] === value;
  }

  has(key: string): boolean {
    return Object.hasOwn(this.#labels, key);
  }

  value(key: string): string | undefined {
    return this.#labels[key];
  }
}

/** The annotations as the cache keeps them: digests of the values labeller writes, in `index`'s order. */
class CarriedAnnotations implements Carried {
  readonly #index: ReadonlyMap<string, number>;
  readonly #digests: readonly number[];
  readonly owned: readonly string[];
  readonly admitted: readonly string[];
  readonly distrusted: boolean;

  constructor(object: LabelledObject, index: ReadonlyMap<string, number>) {
    this.#index = index;
    this.#digests = object.written?.digests ?? [];
    this.owned = object.ownedAnnotations;
    this.admitted = object.admitted.annotations;
    this.distrusted = object.admitted.distrusted?.includes('annotations') ?? false;
  }

  get keys(): readonly string[] {
    return [...new Set([...this.#index.keys(), ...this.owned, ...this.admitted])].filter((key) => this.has(key));
  }

  has(key: string): boolean {
    return this.#index.has(key)
      ? !Number.isNaN(this.#at(key))
      : this.owned.includes(key) || this.admitted.includes(key);
  }

  // A key labeller does not write (owned from an earlier config) is not changed by its apply:
  // kept when co-owned, else removed.
  holds(key: string, value: string): boolean {
    return !this.#index.has(key) || this.#at(key) === digest(value);
  }

  value(): string | undefined {
    return undefined;
  }

  #at(key: string): number {
    const i = this.#index.get(key);
    return i === undefined ? NaN : this.#digests[i] ?? NaN;
  }
}

export class Reconciler {
  readonly #options: ReconcilerOptions;
  /** Where each written annotation's digest is in the cached object (see projector). */
  readonly #digestIndex: ReadonlyMap<string, number>;

  constructor(options: ReconcilerOptions) {
    this.#options = options;
    this.#digestIndex = new Map(writtenOrder(options.annotations?.keys() ?? []).map((key, i) => [key, i]));
  }

  /**
   * What converging `object` takes, from the cache alone: per map, the keys to apply, the keys
   * another manager set to another value, labeller's keys to drop and the keys to add or change.
   * The object needs an apply exactly when needsApply(plan).
   */
  plan(object: LabelledObject): Plan {
    const render = this.#render(object);
    // A map with no key configured and none of labeller's on the object (most objects' annotations)
    // has nothing to plan: the plan of every such map is one and the same.
    const planField = (field: MetadataField): FieldPlan =>
      render[field] === NOTHING_RENDERED && ownsNone(object, field)
        ? NOTHING_PLANNED
        : this.#planField(field, this.#carried(object, field), render[field]);
    const plans = { labels: planField('labels'), annotations: planField('annotations') };
    const bytes = annotationBytes(object, plans.annotations.desired);
    if (bytes > ANNOTATIONS_MAX_BYTES) {
      return {
        field: 'annotations',
        problem:
          `the object's annotations would come to ${bytes} bytes, more than the ${ANNOTATIONS_MAX_BYTES} the API server allows`,
      };
    }
    const planned = {
      ...plans,
      waiting: render.waiting,
      problems: render.labels.invalid.length + render.annotations.invalid.length === 0
        ? NO_PROBLEMS
        : [...render.labels.invalid, ...render.annotations.invalid],
      markers: leavingMarkers(object, plans, FIELDS.every((field) => this.#templates(field).size === 0)),
    };
    // A key yielded in a fight is not the next apply's (nor pending in status and the gauges) until its backoff ends.
    const { fights, dryRun } = this.#options;
    if (!fights || dryRun) return planned;
    let yielded: Map<MetadataField, Set<string>> | undefined;
    for (const field of FIELDS) {
      if (planned[field].taken.length === 0) continue;
      const keys = planned[field].taken.filter((key) => fights.yielded(object.uid, `${field}/${key}`));
      if (keys.length > 0) (yielded ??= new Map()).set(field, new Set(keys));
    }
    return yielded === undefined ? planned : without(planned, yielded);
  }

  /**
   * Converges one object; throws only for failures worth retrying (API errors, outages).
   * `signal` aborts the write (this process may no longer write).
   */
  async reconcile(object: LabelledObject, signal?: AbortSignal): Promise<Result> {
    const { client, conflicts, dryRun } = this.#options;
    const { log } = this.#options;
    // The object's fields on each line, rather than a child logger per reconcile: most reconciles log nothing.
    const at = { namespace: object.namespace || undefined, name: object.name };

    // Being deleted: a label written now would be pointless, and may race the deletion.
    if (object.deleting) return { outcome: 'gone', patch: NO_PATCH };
    const plan = this.plan(object);
    if ('problem' in plan) {
      log.error('annotations invalid for this object; not labelling it', { ...at, problem: plan.problem });
      return { outcome: 'invalid', patch: NO_PATCH, problems: [plan] };
    }
    const { problems } = plan;
    if (problems.length > 0) {
      log.error('value invalid for this object; that key is held, the rest applied', {
        ...at,
        problems: problems.map((p) => p.problem),
      });
    }
    // A key would be held only until a cache lists, or an owner shows up in its cache (created a
    // moment ago, or deleted with its dependents): applying the rest now would take a second apply
    // then, or write to an object the garbage collector is about to delete.
    if (plan.waiting) {
      log.debug('waiting for a related object before labelling', at);
      return { outcome: 'waiting', patch: NO_PATCH };
    }
    // Under `skip`, a key another manager set to another value stays theirs (unless it is protected).
    const left = plan.labels.contested.length + plan.annotations.contested.length === 0
      ? NO_CONTESTED
      : FIELDS.flatMap((field) =>
        plan[field].contested.filter((key) => !plan[field].taken.includes(key)).map((key): Contested => {
          const value = this.#carried(object, field).value(key);
          return { field, key, wanted: plan[field].rendered.get(key) ?? '', ...(value === undefined ? {} : { value }) };
        })
      );
    const reported = left.length + problems.length === 0
      ? NOTHING
      : { ...(left.length > 0 ? { contested: left } : {}), ...(problems.length > 0 ? { problems } : {}) };
    const settled: Outcome = problems.length > 0 ? 'invalid' : left.length > 0 ? 'conflict' : 'unchanged';
    for (const field of left.length === 0 ? NO_FIELDS : FIELDS) {
      const theirs = left.filter((c) => c.field === field);
      if (theirs.length === 0) continue;
      log.warn(`${field === 'labels' ? 'label' : 'annotation'} set by another manager; left alone (conflicts: skip)`, {
        ...at,
        [field]: theirs.map((c) => (c.value === undefined ? c.key : `${c.key}=${c.value}`)),
      });
    }
    // Under `force`, a key another manager takes back every time is yielded to it for a while.
    const contest = dryRun || !this.#contested(plan) ? undefined : await this.#contest(object, plan, signal);
    const applying = contest ? contest.plan : plan;
    const requeue = contest?.requeueAfterMs === undefined ? NOTHING : { requeueAfterMs: contest.requeueAfterMs };
    const fought = contest === undefined ? NOTHING : {
      ...(contest.started.length > 0 ? { fights: contest.started } : {}),
      ...(contest.retaken.length > 0 ? { retaken: contest.retaken } : {}),
    };
    if (!needsApply(applying)) {
      const outcome = contest?.requeueAfterMs !== undefined ? 'conflict' : settled;
      // Most objects, at every re-check: nothing to report, nothing to copy.
      if (reported === NOTHING && fought === NOTHING && requeue === NOTHING) return { outcome, patch: NO_PATCH };
      return { outcome, patch: NO_PATCH, ...reported, ...fought, ...requeue };
    }

    const target = this.#target(object);
    const annotationKeys =
      this.#digestIndex.size + object.ownedAnnotations.length + object.admitted.annotations.length === 0
        ? NO_KEYS
        : [...new Set([...this.#digestIndex.keys(), ...object.ownedAnnotations, ...object.admitted.annotations])];
    // Admitted keys no longer wanted: no manager owns them, so the apply cannot remove them.
    const { admitted } = object;
    const unowned = admitted.labels.length + admitted.annotations.length === 0 ? NONE_UNOWNED : {
      labels: applying.labels.stale.filter((key) => admitted.labels.includes(key)),
      annotations: applying.annotations.stale.filter((key) => admitted.annotations.includes(key)),
    };
    const removing = applying.markers.length > 0 || unowned.labels.length + unowned.annotations.length > 0;
    const applies = applying.labels.missing.length + applying.annotations.missing.length > 0 ||
      applying.labels.stale.length > unowned.labels.length ||
      applying.annotations.stale.length > unowned.annotations.length;
    let after: AppliedMetadata | undefined;
    /** The plan the write carried out: `applying`, less keys yielded to a co-owner. */
    let applied = applying;
    /** Keys labeller shared with another manager and left to it under `skip` (see #shared). */
    let yieldedToCoOwners: readonly Contested[] = NO_CONTESTED;
    try {
      if (removing) {
        after = await client.remove(target, object.resourceVersion, unowned, {
          markers: applying.markers,
          dryRun,
          annotationKeys,
          signal,
        });
      }
      // needsApply: a removal, an apply, or both.
      if (applies || after === undefined) {
        // Held annotations labeller owns are sent at their values, which the cache does not keep.
        const kept = applying.annotations.unknown.length > 0
          ? await client.annotations(target, applying.annotations.unknown, signal)
          : undefined;
        const apply = (plan: Exclude<Plan, Problem>, force: boolean) => {
          const annotations = entries(plan.annotations.desired);
          return client.apply(
            target,
            {
              labels: entries(plan.labels.desired),
              annotations: kept ? { ...kept, ...annotations } : annotations,
            },
            { force, dryRun, annotationKeys, signal },
          );
        };
        // An admitted key may be held by the API server's before-first-apply placeholder (object.ts):
        // taking a new value of it over is taking back labeller's own.
        const force = conflicts === 'force' || takes(applying) || changesAdmitted(object, applying);
        try {
          after = await apply(applying, force);
        } catch (error) {
          const shared = force ? undefined : this.#shared(applying, error, at);
          if (!shared) throw error;
          after = await apply(shared.plan, true);
          applied = shared.plan;
          yieldedToCoOwners = shared.yielded;
        }
      }
    } catch (error) {
      if (error instanceof ObjectGone) {
        log.debug('object gone before its labels were applied', at);
        return { outcome: 'gone', patch: NO_PATCH };
      }
      if (error instanceof ObjectChanged) {
        log.debug('object changed before its admitted keys were removed; looked at again in its new version', at);
        return { outcome: 'changed', patch: NO_PATCH };
      }
      if (error instanceof LabelConflict) {
        log.warn('conflict with another field manager; left alone (conflicts: skip)', { ...at, error });
        const owned = error.owners.map(({ field, key, manager }): Contested => ({
          field,
          key,
          wanted: plan[field].desired.get(key) ?? '',
          manager,
        }));
        return { outcome: 'conflict', patch: NO_PATCH, ...reported, contested: [...left, ...owned] };
      }
      throw error;
    }
    // What the write changed, from its answer: worked out only to print it (a dry run, at debug)
    // or to count what it removed (another manager may keep a key), as reading the answer's maps
    // is most of a write's cost after the request itself. Else the counts are the plan's.
    const removed = applied.labels.stale.length + applied.annotations.stale.length > 0;
    const patch = dryRun || removed || log.enabled('debug') ? this.#patch(object, after, unowned) : undefined;
    // A dry run's plan is its output; writes are logged per object at debug (the controller sums them up).
    if (dryRun) log.info('would apply labels (dry run)', { ...at, patch });
    else if (log.enabled('debug')) log.debug('labels applied', { ...at, patch });
    const outcome = problems.length > 0 ? 'invalid' : 'patched';
    const changed = patch && removed ? changesOf(patch) : {
      labels: setOnly(applied.labels.missing.length),
      annotations: setOnly(applied.annotations.missing.length),
    };
    // Most writes: the version written, nothing else to report.
    if (
      reported === NOTHING && yieldedToCoOwners.length === 0 && fought === NOTHING && requeue === NOTHING && !dryRun
    ) {
      return patch === undefined
        ? { outcome, written: after.resourceVersion, changed }
        : { outcome, patch, written: after.resourceVersion, changed };
    }
    const contested = [...(reported.contested ?? []), ...yieldedToCoOwners];
    return {
      outcome,
      ...(patch === undefined ? {} : { patch }),
      ...reported,
      ...(contested.length > 0 ? { contested } : {}),
      ...fought,
      ...requeue,
      ...(dryRun ? {} : { written: after.resourceVersion }),
      changed,
    };
  }

  /** What a write changed, as JSON Patch operations: `object` as the cache had it against the write's answer, less `unowned` (removed by it). */
  #patch(
    object: LabelledObject,
    after: AppliedMetadata,
    unowned: Readonly<Record<MetadataField, readonly string[]>>,
  ): readonly MetadataOperation[] {
    // Without what the removal took: a dry run's apply answers from the object as it is.
    const remaining = (field: MetadataField) =>
      unowned[field].length === 0
        ? after[field]
        : Object.fromEntries(Object.entries(after[field]).filter(([key]) => !unowned[field].includes(key)));
    const labelled = metadataPatch('labels', before(object.labels), remaining('labels'));
    const annotated = metadataPatch('annotations', this.#carried(object, 'annotations'), remaining('annotations'));
    return annotated.length === 0 ? labelled : [...labelled, ...annotated];
  }

  /**
   * After an apply without force refused (409) over keys labeller owns with another manager, whose
   * value the config changed (the cache does not say who else owns a key): the plan that keeps to
   * `skip`, to apply with force. Keys the placeholder before-first-apply shares (a policy set them:
   * labeller's own) and protected keys are taken; the others are left to their co-owner, out of the
   * apply, so the rest of it is written. Undefined when the refusal is no such conflict.
   */
  #shared(
    plan: Exclude<Plan, Problem>,
    error: unknown,
    at: { readonly namespace: string | undefined; readonly name: string },
  ): { readonly plan: Exclude<Plan, Problem>; readonly yielded: readonly Contested[] } | undefined {
    if (!(error instanceof LabelConflict) || error.owners.length === 0) return undefined;
    const { protect, log } = this.#options;
    const yielded = new Map<MetadataField, Set<string>>();
    const left: Contested[] = [];
    for (const { field, key, manager } of error.owners) {
      if (!plan[field].missing.includes(key)) return undefined;
      if (manager === BEFORE_FIRST_APPLY || protect?.[field].has(key)) continue;
      (yielded.get(field) ?? yielded.set(field, new Set()).get(field)!).add(key);
      left.push({ field, key, wanted: plan[field].desired.get(key) ?? '', manager });
    }
    if (left.length > 0) {
      log.info('a key labeller shares with another manager keeps its value; left to it (conflicts: skip)', {
        ...at,
        keys: left.map(({ key, manager }) => `${key} (${manager})`),
      });
    }
    return { plan: without(plan, yielded), yielded: left };
  }

  /** Whether `plan` takes keys over that fights may hold back (#contest's work; most plans take none). */
  #contested(plan: Exclude<Plan, Problem>): boolean {
    return this.#options.fights !== undefined && (plan.labels.taken.length > 0 || plan.annotations.taken.length > 0);
  }

  /**
   * The contested keys labeller takes over, each retaken, yielded or left to wait (fights.ts), by
   * who holds it (asked with a dry run); the plan without those not retaken now, those that have
   * just become fights, those retaken from managers not yielded to, and when to look again.
   */
  async #contest(
    object: LabelledObject,
    plan: Exclude<Plan, Problem>,
    signal: AbortSignal | undefined,
  ): Promise<Contests | undefined> {
    const { fights, log, yieldTo = DEFAULT_YIELD_TO_SET } = this.#options;
    if (!fights) return undefined;
    const now = Date.now();
    const yielded = new Map<MetadataField, Set<string>>();
    const left = (field: MetadataField, key: string, until: number) => {
      (yielded.get(field) ?? yielded.set(field, new Set()).get(field)!).add(key);
      untilMs = Math.min(untilMs, until);
    };
    let untilMs = Infinity;
    // Keys yielded, or whose object's retakes are spent this minute, wait without a request.
    const open = { labels: [] as string[], annotations: [] as string[] };
    for (const field of FIELDS) {
      for (const key of plan[field].taken) {
        const blocked = fights.blockedUntil(object.uid, `${field}/${key}`);
        if (blocked === undefined) open[field].push(key);
        else left(field, key, blocked);
      }
    }
    const owners = open.labels.length + open.annotations.length > 0
      ? await this.#holders(object, plan, open, signal)
      : [];
    const started: LabelFight[] = [];
    const retaken: Retaken[] = [];
    for (const field of FIELDS) {
      for (const key of open[field]) {
        const manager = owners.find((o) => o.field === field && o.key === key)?.manager;
        const who = manager === undefined ? {} : { manager };
        const contest = fights.contest(object.uid, `${field}/${key}`, manager !== undefined && yieldTo.has(manager));
        if (contest.verdict === 'retake') {
          if (manager === undefined || !yieldTo.has(manager)) retaken.push({ field, key, ...who });
          continue;
        }
        left(field, key, contest.untilMs);
        if (contest.verdict === 'yield' && contest.started) {
          started.push({ field, key, ...who, retakes: contest.retakes, backoffMs: contest.untilMs - now });
        }
      }
    }
    const at = { namespace: object.namespace || undefined, name: object.name };
    for (const fight of started) {
      log.warn(
        `${
          fight.field === 'labels' ? 'label' : 'annotation'
        } taken back by a manager labeller yields to (fights.yieldTo), again and again; left to it for a while`,
        { ...at, key: fight.key, manager: fight.manager, retakes: fight.retakes, backoffMs: fight.backoffMs },
      );
    }
    for (const { field, key, manager } of retaken) {
      log.warn(`${field === 'labels' ? 'label' : 'annotation'} changed by another manager; put back`, {
        ...at,
        key,
        manager,
      });
    }
    return {
      plan: yielded.size === 0 ? plan : without(plan, yielded),
      started,
      retaken,
      ...(yielded.size === 0 ? {} : { requeueAfterMs: Math.max(0, untilMs - now) }),
    };
  }

  /** Who holds the keys `keys`: a dry-run apply of them without force answers 409 naming their managers. */
  async #holders(
    object: LabelledObject,
    plan: Exclude<Plan, Problem>,
    keys: Readonly<Record<MetadataField, readonly string[]>>,
    signal: AbortSignal | undefined,
  ): Promise<LabelConflict['owners']> {
    const { client, log } = this.#options;
    const only = (field: MetadataField) =>
      Object.fromEntries(keys[field].map((key) => [key, plan[field].rendered.get(key) ?? '']));
    try {
      await client.apply(this.#target(object), { labels: only('labels'), annotations: only('annotations') }, {
        force: false,
        dryRun: true,
        annotationKeys: [],
        signal,
      });
    } catch (error) {
      if (error instanceof LabelConflict) return error.owners;
      if (!(error instanceof ObjectGone)) {
        log.debug('cannot tell who holds a contested key', { name: object.name, error });
      }
    }
    return [];
  }

  /** The apply target of `object`, guarded by its uid. */
  #target(object: LabelledObject): ApplyTarget {
    const { kind } = this.#options;
    return {
      apiVersion: kind.apiVersion,
      kind: kind.kind,
      name: object.name,
      namespace: object.namespace,
      uid: object.uid,
    };
  }

  /**
   * One map's plan: a key someone else set to another value is taken over under `force` (and
   * stays in `missing`), left theirs under `skip`, unless it is protected.
   */
  #planField(field: MetadataField, carried: Carried, render: Rendered): FieldPlan {
    // Every object takes this path at every reconcile, converged or not: loops over the maps, and
    // new collections only where a key is contested, held or invalid (rare), not copies each time.
    const { rendered, held } = render;
    const invalid = render.invalid.length === 0 ? NO_KEYS : render.invalid.map((problem) => problem.key!);
    const ours = (key: string) => carried.owned.includes(key) || carried.admitted.includes(key);
    let contested: string[] | undefined;
    // forEach rather than for-of: no entry array per key (this runs at every reconcile).
    rendered.forEach((value, key) => {
      if (carried.has(key) && !carried.holds(key, value) && !ours(key)) (contested ??= []).push(key);
    });
    const { conflicts, protect } = this.#options;
    const taken = contested === undefined
      ? NO_KEYS
      : conflicts === 'force'
      ? contested
      : contested.filter((key) => protect?.[field].has(key));
    let copy: Map<string, string> | undefined;
    const edit = (): Map<string, string> => (copy ??= new Map(rendered));
    for (const key of contested ?? NO_KEYS) if (!taken.includes(key)) edit().delete(key);
    // A held key labeller owns stays as it is: at its cached value, or read before an apply.
    let unknown: string[] | undefined;
    const keep = (key: string): void => {
      if (!ours(key)) return;
      const value = carried.value(key);
      if (value !== undefined) edit().set(key, value);
      else (unknown ??= []).push(key);
    };
    held.forEach(keep);
    invalid.forEach(keep);
    const desired = copy ?? rendered;
    const mine = carried.admitted.length === 0 ? carried.owned : new Set([...carried.owned, ...carried.admitted]);
    let stale: string[] | undefined;
    for (const key of mine) if (!desired.has(key) && !unknown?.includes(key)) (stale ??= []).push(key);
    let missing: string[] | undefined;
    desired.forEach((value, key) => {
      if (!carried.holds(key, value) || (carried.distrusted && !ours(key) && carried.has(key))) {
        (missing ??= []).push(key);
      }
    });
    return {
      rendered,
      desired,
      contested: contested ?? NO_KEYS,
      taken,
      stale: stale ?? NO_KEYS,
      missing: missing ?? NO_KEYS,
      held,
      invalid,
      unknown: unknown ?? NO_KEYS,
    };
  }

  /** One of the object's maps as the cache keeps it. */
  #carried(object: LabelledObject, field: MetadataField): Carried {
    return field === 'labels' ? new CarriedLabels(object) : new CarriedAnnotations(object, this.#digestIndex);
  }

  /**
   * How each configured key renders for `object`, with what its template read to get there: the
   * same rendering the plan is made of, for `labeller explain`.
   */
  trace(object: LabelledObject): KeyTrace[] {
    const view = this.#options.related?.(object);
    const traces: KeyTrace[] = [];
    for (const field of FIELDS) {
      for (const [key, template] of this.#templates(field)) {
        const inputs: Input[] = [];
        const context = tracing(this.#context(object, view, []), inputs);
        traces.push({
          field,
          key,
          template,
          inputs,
          rendering: this.#renderKey(field, key, template, () => context, view),
        });
      }
    }
    return traces;
  }

  #templates(field: MetadataField): ReadonlyMap<string, Template> {
    return (field === 'labels' ? this.#options.labels : this.#options.annotations) ?? NO_TEMPLATES;
  }

  /** What templates read of `object`; each source lookup's key is added to `looked`. */
  #context(object: LabelledObject, view: RelatedView | undefined, looked: string[]): TemplateContext {
    const { kind, sources } = this.#options;
    return {
      name: object.name,
      namespace: object.namespace,
      kind: kind.kind,
      resource: kind.resource,
      group: kind.group,
      apiVersion: kind.apiVersion,
      uid: object.uid,
      labels: object.labels,
      annotations: object.annotations,
      field: (path) => object.fields?.[path],
      related: view?.objects,
      lookup: sources && ((source, key, field) => {
        looked.push(lookupKey(source, key));
        return sources.lookups.lookup(source, key, field);
      }),
    };
  }

  /** One key of one map, rendered for an object: its value, or why it has none. */
  #renderKey(
    field: MetadataField,
    key: string,
    template: Template,
    context: () => TemplateContext,
    view: RelatedView | undefined,
  ): Rendering {
    const { sources } = this.#options;
    // A source that has never loaded is held as a related kind that cannot be read is: the rest goes on.
    const unloaded = template.lookups.find((lookup) => !sources?.lookups.loaded(lookup.source));
    if (unloaded) return { state: 'held', why: 'unavailable', reading: `source ${unloaded.source}` };
    if (view && view.held.size > 0) {
      for (const read of template.related) {
        const why = view.held.get(read.relation);
        if (why) return { state: 'held', why, reading: relationName(read.relation) };
      }
    }
    const value = template.constantValue ?? template.render(context());
    // A variable without a value (a missing label, no owner): the key is not wanted, and
    // removed if labeller owned it.
    if (value === undefined) return { state: 'absent' };
    const problem = field === 'labels' && template.constantValue === undefined ? validateLabelValue(value) : undefined;
    if (problem) {
      return { state: 'invalid', problem: `label ${key}: "${template.source}" rendered "${value}": ${problem}` };
    }
    return { state: 'rendered', value };
  }

  /**
   * The desired labels and annotations for this object, and the keys held; or why one of them
   * cannot be rendered.
   */
  #render(object: LabelledObject): Readonly<Record<MetadataField, Rendered>> & { waiting: boolean } {
    const { sources } = this.#options;
    const view = this.#options.related?.(object);
    const looked: string[] = [];
    // Made only for a template that reads the object: a constant's value needs none.
    let context: TemplateContext | undefined;
    const contextOf = () => (context ??= this.#context(object, view, looked));
    let waiting = false;
    const renderField = (field: MetadataField): Rendered => {
      const templates = this.#templates(field);
      if (templates.size === 0) return NOTHING_RENDERED;
      const rendered = new Map<string, string>();
      const held: string[] = [];
      const invalid: Problem[] = [];
      templates.forEach((template, key) => {
        const rendering = this.#renderKey(field, key, template, contextOf, view);
        if (rendering.state === 'held') {
          held.push(key);
          waiting ||= rendering.why === 'pending';
        } else if (rendering.state === 'invalid') invalid.push({ field, key, problem: rendering.problem });
        else if (rendering.state === 'rendered') rendered.set(key, rendering.value);
      });
      return { rendered, held, invalid };
    };
    const labels = renderField('labels');
    const annotations = renderField('annotations');
    // Recorded whatever was rendered: an entry fixed later must find this object again.
    sources?.index.record(object, looked);
    return { labels, annotations, waiting };
  }
}

/** Whether the apply of `plan` takes a key over from another manager. */
function takes(plan: Exclude<Plan, Problem>): boolean {
  if (plan.labels.taken.length + plan.annotations.taken.length === 0) return false;
  return FIELDS.some((field) => plan[field].taken.some((key) => plan[field].missing.includes(key)));
}

/** Whether the apply of `plan` changes a key labeller's admission policies set (a value the config changed). */
function changesAdmitted(object: LabelledObject, plan: Exclude<Plan, Problem>): boolean {
  if (object.admitted.labels.length + object.admitted.annotations.length === 0) return false;
  return FIELDS.some((field) => plan[field].missing.some((key) => object.admitted[field].includes(key)));
}

/** The markers of `object` that its next write removes (see Plan); `setsNothing`: the config sets no key (prune). */
function leavingMarkers(
  object: LabelledObject,
  plans: Readonly<Record<MetadataField, FieldPlan>>,
  setsNothing: boolean,
): MetadataField[] {
  const { admitted } = object;
  if (admitted.marked.length === 0) return [];
  return admitted.marked.filter((field) =>
    admitted[field].every((key) => plans[field].stale.includes(key)) && (admitted[field].length > 0 || setsNothing)
  );
}

/** `plan` with the keys of `yielded` left to the manager that holds them: neither desired nor missing. */
function without(
  plan: Exclude<Plan, Problem>,
  yielded: ReadonlyMap<MetadataField, ReadonlySet<string>>,
): Exclude<Plan, Problem> {
  const field = (name: MetadataField): FieldPlan => {
    const keys = yielded.get(name);
    const fieldPlan = plan[name];
    if (!keys) return fieldPlan;
    return {
      ...fieldPlan,
      desired: new Map([...fieldPlan.desired].filter(([key]) => !keys.has(key))),
      missing: fieldPlan.missing.filter((key) => !keys.has(key)),
    };
  };
  return { ...plan, labels: field('labels'), annotations: field('annotations') };
}

/** What fights leave of a plan. */
interface Contests {
  readonly plan: Exclude<Plan, Problem>;
  readonly started: readonly LabelFight[];
  readonly retaken: readonly Retaken[];
  readonly requeueAfterMs?: number;
}

const DEFAULT_YIELD_TO_SET: ReadonlySet<string> = new Set(DEFAULT_YIELD_TO);

/** One map's keys rendered for an object, those held, and those whose value is invalid. */
interface Rendered {
  readonly rendered: ReadonlyMap<string, string>;
  readonly held: readonly string[];
  readonly invalid: readonly Problem[];
}

const NO_TEMPLATES: ReadonlyMap<string, Template> = new Map();
const NO_KEYS: readonly string[] = Object.freeze([]);
const NO_FIELDS: readonly MetadataField[] = Object.freeze([]);
const NO_PROBLEMS: readonly Problem[] = Object.freeze([]);
const NO_VALUES: ReadonlyMap<string, string> = new Map();
/** What a map with no key configured renders. */
const NOTHING_RENDERED: Rendered = Object.freeze({ rendered: NO_VALUES, held: NO_KEYS, invalid: NO_PROBLEMS });
/** The plan of a map with no key configured and none of labeller's on the object. */
const NOTHING_PLANNED: FieldPlan = Object.freeze({
  rendered: NO_VALUES,
  desired: NO_VALUES,
  contested: NO_KEYS,
  taken: NO_KEYS,
  stale: NO_KEYS,
  missing: NO_KEYS,
  held: NO_KEYS,
  invalid: NO_KEYS,
  unknown: NO_KEYS,
});

/** No admitted key to remove. */
const NONE_UNOWNED: Readonly<Record<MetadataField, readonly string[]>> = Object.freeze({
  labels: NO_KEYS,
  annotations: NO_KEYS,
});
const NO_ENTRIES: Readonly<Record<string, string>> = Object.freeze({});

/** `map` as an object, one shared empty one for an empty map (most applies' annotations). */
function entries(map: ReadonlyMap<string, string>): Readonly<Record<string, string>> {
  if (map.size === 0) return NO_ENTRIES;
  // forEach, not Object.fromEntries: no iterator, nor an entry array per key.
  const object: Record<string, string> = {};
  map.forEach((value, key) => void (object[key] = value));
  return object;
}

/** Whether labeller owns none of the object's keys of `field`, and was admitted none. */
function ownsNone(object: LabelledObject, field: MetadataField): boolean {
  return field === 'labels'
    ? object.ownedLabels.length === 0 && object.admitted.labels.length === 0
    : object.ownedAnnotations.length === 0 && object.admitted.annotations.length === 0;
}
const NO_CONTESTED: readonly Contested[] = Object.freeze([]);
const NO_PATCH: readonly MetadataOperation[] = Object.freeze([]);
/** No optional part of a Result: spread into one, it adds nothing. */
const NOTHING: Readonly<Record<string, never>> = Object.freeze({});

/** The size of the object's annotations once `desired` is applied, as far as the cache can tell. */
function annotationBytes(object: LabelledObject, desired: ReadonlyMap<string, string>): number {
  let bytes = object.written?.otherBytes ?? 0;
  desired.forEach((value, key) => void (bytes += byteLength(key) + byteLength(value)));
  return bytes;
}

/** Keys set and none removed, as most writes change a map: shared values for the usual few. */
const SET_ONLY: readonly KeyChanges[] = Array.from({ length: 16 }, (_, set) => Object.freeze({ set, removed: 0 }));

function setOnly(set: number): KeyChanges {
  return SET_ONLY[set] ?? { set, removed: 0 };
}

/** How many keys of each map `patch` sets and removes. */
function changesOf(patch: readonly MetadataOperation[]): Record<MetadataField, KeyChanges> {
  const changes = { labels: { set: 0, removed: 0 }, annotations: { set: 0, removed: 0 } };
  for (const op of patch) {
    const field = changes[op.path.startsWith('/metadata/labels/') ? 'labels' : 'annotations'];
    if (op.op === 'remove') field.removed++;
    else field.set++;
  }
  return changes;
}
