// Plans for unit tests: a map's plan with nothing to do, but for what a test sets.
import type { FieldPlan } from '../reconcile.ts';

export function fieldPlan(fields: Partial<FieldPlan> = {}): FieldPlan {
  return {
    rendered: new Map(),
    desired: new Map(),
    contested: [],
    taken: [],
    stale: [],
    missing: [],
    held: [],
    invalid: [],
    unknown: [],
    ...fields,
  };
}
