// How much of a kind carries each configured label with its desired value: the basis of
// `labeller status --coverage` and of the labeller_coverage_ratio gauge. Cost tools allocate by
// these keys, so the share of objects that carry them is what their owners watch. Counted from
// the same plan the controller acts on, from cached objects alone (counts.ts counts a cache).
import type { LabelledObject } from './object.ts';
import type { Plan } from './reconcile.ts';
import { absences, type KeyTrace } from './trace.ts';

/**
 * Why an object does not carry a key with its desired value: the next apply sets it (`pending`),
 * another manager holds another value (`contested`), what it reads cannot be read (`held`), its
 * rendered value is invalid (`invalid`), or a variable it reads has no value on this object, so
 * it is not wanted there (`unwanted`).
 */
export type Shortfall = 'pending' | 'contested' | 'held' | 'invalid' | 'unwanted';

/** Each of `keys` on `object`: covered, or why not. */
export function keyStates(plan: Plan, object: LabelledObject, keys: readonly string[]): (Shortfall | 'covered')[] {
  return keys.map((key) => {
    if ('problem' in plan) return 'invalid';
    const { labels } = plan;
    const desired = labels.rendered.get(key);
    if (desired !== undefined) {
      if (object.labels[key] === desired) return 'covered';
      return labels.contested.includes(key) ? 'contested' : 'pending';
    }
    if (labels.held.includes(key)) return 'held';
    if (labels.invalid.includes(key)) return 'invalid';
    return 'unwanted';
  });
}

export interface KeyCoverage {
  readonly key: string;
  /** Objects counted: those cached, less those being deleted. */
  readonly objects: number;
  /** Those carrying the key with its desired value. */
  readonly covered: number;
}

/** Why one object falls short of one key, as a line shared by many objects (no object names). */
export function shortfallReason(state: Shortfall, trace: KeyTrace | undefined): string {
  const rendering = trace?.rendering;
  if (state === 'held' && rendering?.state === 'held') {
    return rendering.reading.startsWith('source ')
      ? `held: ${rendering.reading} has not loaded`
      : `held: its ${rendering.reading} cannot be read`;
  }
  if (state === 'unwanted' && trace) {
    return `unwanted: ${absences(trace.inputs).join(', ') || 'a variable it reads has no value'}`;
  }
  return state;
}

/**
 * The configured `keys` a cost tool that imports only the first `maxLabels` labels of an object,
 * in alphabetical order (AWS split cost allocation: 50), would not import from an object carrying
 * `labels`, once the plan's values are applied; undefined while it would carry `maxLabels` or fewer.
 */
export function keysCut(
  plan: Plan,
  object: LabelledObject,
  keys: readonly string[],
  maxLabels: number,
): string[] | undefined {
  const carried = new Set(Object.keys(object.labels));
  if (!('problem' in plan)) {
    for (const key of plan.labels.rendered.keys()) carried.add(key);
    for (const key of plan.labels.stale) carried.delete(key);
  }
  if (carried.size <= maxLabels) return undefined;
  // Code-unit order ('/' and '.' before letters): label keys are lowercase but for rare names.
  const imported = new Set([...carried].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).slice(0, maxLabels));
  return keys.filter((key) => carried.has(key) && !imported.has(key));
}
