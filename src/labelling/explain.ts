// Why an object carries a label, or why not: `labeller explain`. Each key the config sets on the
// object is told from the same plan the controller acts on and `status` counts (reconcile.ts),
// the template's trace (trace.ts), the object's managedFields, and the fights labeller reported
// as Events: its rule and template, what it read, the value wanted and the value there, who owns
// it, its state, and what the next apply would do with it.
import type { ConflictPolicy, MetadataField, Protection } from '../config/model.ts';
import type { ProtectMode } from '../config/protect.ts';
import type { KeyOwner } from './object.ts';
import type { Plan } from './reconcile.ts';
import { absences, type Input, type KeyTrace } from './trace.ts';

/**
 * - `applied`: the object carries the value wanted;
 * - `pending`: the next apply sets it (or takes it over, under `force`);
 * - `held`: what it reads cannot be read now, so it is neither written nor removed;
 * - `contested`: another manager set another value; under `skip` it stays theirs;
 * - `fight`: another manager took it back each time; left to it for a while;
 * - `invalid`: the rendered value is not a valid label value; held;
 * - `unwanted`: a variable it reads has no value on this object, so the key is not wanted.
 */
export type KeyState = 'applied' | 'pending' | 'held' | 'contested' | 'fight' | 'invalid' | 'unwanted';

export interface KeyExplanation {
  readonly field: MetadataField;
  readonly key: string;
  /** Where the rule was written: 'kinds.yaml: kinds[0].labels.team'. */
  readonly rule: string;
  readonly template: string;
  readonly inputs: readonly Input[];
  /** The value wanted; absent when held, invalid or unwanted. */
  readonly desired?: string;
  /** The value on the object; absent when it has none. */
  readonly value?: string;
  readonly owners: readonly KeyOwner[];
  readonly state: KeyState;
  /** Why, for every state but `applied` and `pending`. */
  readonly why?: string;
  /** What the next apply would do with this key. */
  readonly next: string;
  /** Only labeller (and the config's allow) may change it: what the API server does with anyone else's change. */
  readonly protection?: ProtectMode;
}

/** A key labeller owns that the config no longer wants on this object. */
export interface StaleKey {
  readonly field: MetadataField;
  readonly key: string;
  readonly value?: string;
  readonly owners: readonly KeyOwner[];
  readonly next: string;
}

export interface Explanation {
  readonly keys: readonly KeyExplanation[];
  readonly stale: readonly StaleKey[];
  /** Whether the next reconcile applies anything: what `status` counts as pending. */
  readonly pending: boolean;
  /** Why nothing can be written to the object at all (its annotations over the size limit). */
  readonly problem?: string;
}

/** A fight labeller reported on this object (a LabelFight Event), by `${field}/${key}`. */
export interface ReportedFight {
  readonly manager?: string;
  /** When the Event was last seen, ms since the epoch. */
  readonly atMs: number;
}

export interface ExplainInput {
  readonly traces: readonly KeyTrace[];
  readonly plan: Plan;
  /** The object's labels and annotations as the API server has them now. */
  readonly values: Readonly<Record<MetadataField, Readonly<Record<string, string>>>>;
  readonly owners: Readonly<Record<MetadataField, ReadonlyMap<string, readonly KeyOwner[]>>>;
  /**
   * Keys labeller's admission policies set, which no manager owns (the cached object's
   * `admitted`): shown as owned by labeller's field manager, operation `Admission`.
   */
  readonly admitted: Readonly<Record<MetadataField, readonly string[]>>;
  readonly fieldManager: string;
  readonly conflicts: ConflictPolicy;
  readonly fights: ReadonlyMap<string, ReportedFight>;
  /** The entry's protected keys, if it protects any. */
  readonly protect?: Protection | undefined;
}

export function explain(input: ExplainInput): Explanation {
  const { traces, plan, values, owners, admitted, fieldManager, conflicts, fights, protect } = input;
  const ownersOf = (field: MetadataField, key: string): readonly KeyOwner[] =>
    admitted[field].includes(key) ? [{ manager: fieldManager, operation: 'Admission' }] : owners[field].get(key) ?? [];
  const keys = traces.map((trace): KeyExplanation => {
    const { field, key, template, inputs, rendering } = trace;
    const value = values[field][key];
    const keyOwners = ownersOf(field, key);
    const ours = keyOwners.some((o) =>
      o.manager === fieldManager && (o.operation === 'Apply' || o.operation === 'Admission')
    );
    const others = keyOwners.filter((o) => o.manager !== fieldManager).map((o) => o.manager);
    const base = {
      field,
      key,
      rule: template.where ?? 'the config',
      template: template.source,
      inputs,
      ...(value === undefined ? {} : { value }),
      owners: keyOwners,
      ...(protect?.[field].has(key) ? { protection: protect.mode } : {}),
    };
    const keep = ours ? 'kept as it is' : 'not added';
    if (rendering.state === 'held') {
      const reading = rendering.reading.startsWith('source ')
        ? `${rendering.reading} has not loaded`
        : `its ${rendering.reading} object cannot be read ${
          rendering.why === 'pending'
            ? 'yet (its cache has not listed)'
            : '(a kind not followed, not served or refused)'
        }`;
      return { ...base, state: 'held', why: reading, next: keep };
    }
    if (rendering.state === 'invalid') return { ...base, state: 'invalid', why: rendering.problem, next: keep };
    if (rendering.state === 'absent') {
      const stale = !('problem' in plan) && plan[field].stale.includes(key);
      return {
        ...base,
        state: 'unwanted',
        why: `${
          absences(inputs).join('; ') || 'a variable it reads has no value'
        }, so the key is not wanted on this object`,
        next: stale ? removal(others) : 'nothing',
      };
    }
    const desired = rendering.value;
    const wanted = { ...base, desired };
    if (value === desired) return { ...wanted, state: 'applied', next: 'nothing' };
    const holder = others.length > 0 ? others.join(', ') : 'another field manager';
    const fight = fights.get(`${field}/${key}`);
    if (!ours && value !== undefined) {
      if (conflicts === 'skip') {
        return {
          ...wanted,
          state: 'contested',
          why: `set to "${value}" by ${holder}`,
          next: 'left as it is (conflicts: skip)',
        };
      }
      if (fight) {
        return {
          ...wanted,
          state: 'fight',
          why: `${fight.manager ?? holder} took it back each time labeller set it`,
          next: `left to ${fight.manager ?? holder} until the backoff ends, then retaken once (conflicts: force)`,
        };
      }
      return {
        ...wanted,
        state: 'pending',
        why: `set to "${value}" by ${holder}`,
        next: `set to "${desired}", taken over from ${holder} (conflicts: force)`,
      };
    }
    return { ...wanted, state: 'pending', next: `set to "${desired}"` };
  });
  if ('problem' in plan) return { keys, stale: [], pending: false, problem: plan.problem };
  const wanted = new Set(traces.map((t) => `${t.field}/${t.key}`));
  const stale = (['labels', 'annotations'] as const).flatMap((field) =>
    plan[field].stale.filter((key) => !wanted.has(`${field}/${key}`)).map((key): StaleKey => {
      const value = values[field][key];
      const keyOwners = ownersOf(field, key);
      return {
        field,
        key,
        ...(value === undefined ? {} : { value }),
        owners: keyOwners,
        next: removal(keyOwners.filter((o) => o.manager !== fieldManager).map((o) => o.manager)),
      };
    })
  );
  // A key left to another manager in a fight is not the next apply's until its backoff ends.
  const fought = new Set(keys.filter((k) => k.state === 'fight').map((k) => `${k.field}/${k.key}`));
  const pending = plan.waiting || plan.markers.length > 0 ||
    (['labels', 'annotations'] as const).some((field) =>
      plan[field].stale.length > 0 || plan[field].missing.some((key) => !fought.has(`${field}/${key}`))
    );
  return { keys, stale, pending };
}

/** What dropping labeller's ownership of a key does: the API server removes it unless another manager owns it too. */
function removal(others: readonly string[]): string {
  return others.length > 0 ? `let go; kept, since ${others.join(', ')} owns it too` : 'removed';
}
