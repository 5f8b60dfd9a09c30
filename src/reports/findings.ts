// What is wrong with one cached object, key by key, as a PolicyReport result says it: the labels
// the config wants that the object does not carry and labeller cannot set by itself. Told from
// the plan the controller acts on and in `labeller explain`'s words (labelling/explain.ts), from
// the cache alone: no API call. A key the next apply sets (pending) is no finding: labeller is
// about to fix it, and reporting it would rewrite the report for every object labeller labels.
import { apiVersion } from '../apimachinery/resource.ts';
import type { LabelledKind } from '../kinds/controller.ts';
import { keyStates } from '../labelling/coverage.ts';
import { explain, type KeyExplanation, type ReportedFight } from '../labelling/explain.ts';
import type { KeyOwner, LabelledObject } from '../labelling/object.ts';
import type { Plan } from '../labelling/reconcile.ts';

/**
 * Why a key is not as the config wants, in a report's terms: another manager's value kept
 * (`conflict`, conflicts: skip), a key yielded in a `fight`, a value that is not one
 * (`invalid`), a key the config wants that has no value on this object (`shortfall`: a variable
 * it reads is absent), or a key `held` because what it reads cannot be read.
 */
export type FindingState = 'conflict' | 'fight' | 'invalid' | 'shortfall' | 'held';

/** One object and one key not as the config wants. */
export interface Finding {
  /** `fail` but for a held key (`warn`): it is kept as it was, and comes right once what it reads can be read. */
  readonly result: 'fail' | 'warn';
  readonly state: FindingState;
  /** The config entry that sets the key: 'kinds.yaml: kinds[0]'. */
  readonly policy: string;
  /** The label key; 'annotations' when the object's annotations as a whole cannot be written. */
  readonly rule: string;
  /** Why, as `labeller explain` says it. */
  readonly message: string;
  readonly object: {
    readonly apiVersion: string;
    readonly kind: string;
    readonly name: string;
    /** Empty for cluster-scoped objects. */
    readonly namespace: string;
    readonly uid: string;
  };
}

/** What findings need of a labelled kind. */
export type ReportedKind = Pick<LabelledKind, 'resolved' | 'plan' | 'explain'>;

const STATES: Readonly<Partial<Record<KeyExplanation['state'], FindingState>>> = {
  contested: 'conflict',
  fight: 'fight',
  invalid: 'invalid',
  unwanted: 'shortfall',
  held: 'held',
};

/**
 * The findings of `object` of `kind` (its labels; annotations only when all of them cannot be
 * written), and whether they may change without the object changing: a key held only until a
 * cache of related objects has listed, which is no finding yet.
 */
export function findingsOf(
  kind: ReportedKind,
  object: LabelledObject,
  fieldManager: string,
): { readonly findings: readonly Finding[]; readonly waiting: boolean } {
  if (object.deleting) return { findings: [], waiting: false };
  const { kind: config, resource } = kind.resolved;
  const reference = {
    apiVersion: apiVersion(resource),
    kind: resource.kind,
    name: object.name,
    namespace: object.namespace,
    uid: object.uid,
  };
  const finding = (state: FindingState, rule: string, message: string): Finding => ({
    result: state === 'held' ? 'warn' : 'fail',
    state,
    policy: policyOf(config.where),
    rule,
    message,
    object: reference,
  });
  const plan = kind.plan(object);
  if ('problem' in plan) return { findings: [finding('invalid', plan.field, plan.problem)], waiting: false };
  const keys = [...config.labels.keys()];
  const states = keyStates(plan, object, keys);
  // Only an object with a key neither covered nor pending is traced, as status does: tracing costs
  // more than planning. (A key yielded in a fight is `contested`.)
  if (!states.some((state) => state !== 'covered' && state !== 'pending')) {
    return { findings: [], waiting: plan.waiting };
  }
  const yielded = fightsOf(plan);
  const { traces } = kind.explain(object);
  const owned = (keys: readonly string[]) =>
    new Map(keys.map((key): [string, readonly KeyOwner[]] => [key, [{ manager: fieldManager, operation: 'Apply' }]]));
  const explained = explain({
    traces: traces.filter((trace) => trace.field === 'labels'),
    plan,
    values: { labels: object.labels, annotations: object.annotations },
    // The cache keeps which keys labeller owns, not who else does: the others are 'another field manager'.
    owners: { labels: owned(object.ownedLabels), annotations: owned(object.ownedAnnotations) },
    admitted: object.admitted,
    fieldManager,
    conflicts: config.conflicts,
    fights: new Map([...yielded].map((key): [string, ReportedFight] => [`labels/${key}`, { atMs: 0 }])),
    protect: config.protect,
  });
  // Taken over by the next apply (conflicts: force, or a protected key): pending, whatever explain
  // says of it under `skip` (it does not tell protected keys apart).
  const retaken = new Set(plan.labels.taken.filter((key) => !yielded.has(key)));
  const findings = explained.keys.flatMap((key) => {
    const state = retaken.has(key.key) ? undefined : STATES[key.state];
    // Held only until a cache lists: not a finding yet, looked at again (`waiting`).
    if (state === undefined || (state === 'held' && plan.waiting)) return [];
    return [finding(state, key.key, key.why ?? key.state)];
  });
  return { findings, waiting: plan.waiting };
}

/**
 * The policy a result names: where the config entry is written, the file by its name alone
 * ('/etc/labeller/kinds.yaml: kinds[0]' → 'kinds.yaml: kinds[0]'). Policy Reporter groups results
 * by policy, and where a pod mounts the file is the same in every install and says nothing.
 */
export function policyOf(where: string): string {
  return where.replace(/^[^\s:]*\/([^/\s:]+: )/, '$1');
}

/**
 * The labels yielded in a fight: keys another manager holds that labeller takes over, but that
 * the plan does not apply now (reconcile.ts leaves a yielded key out of `missing` until its
 * backoff ends).
 */
function fightsOf(plan: Exclude<Plan, { problem: string }>): Set<string> {
  const { taken, missing } = plan.labels;
  return new Set(taken.filter((key) => !missing.includes(key)));
}
