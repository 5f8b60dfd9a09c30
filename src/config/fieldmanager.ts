// How labeller's own objects (the guard's Leases, the admission policies it renders) say which
// field manager they belong to: a label, so that a selector finds them. A field manager is any
// text and a label value is not, so one that is no label value is hashed.
import { createHash } from 'node:crypto';

export const FIELD_MANAGER_LABEL = 'labeller/field-manager';

/** `fieldManager` as a label value: itself when it is one, else a hash of it. */
export function fieldManagerLabelValue(fieldManager: string): string {
  return /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$/.test(fieldManager)
    ? fieldManager
    : `sha256-${createHash('sha256').update(fieldManager).digest('hex').slice(0, 56)}`;
}

/** The label selector of the objects that belong to `fieldManager`. */
export function fieldManagerSelector(fieldManager: string): string {
  return `${FIELD_MANAGER_LABEL}=${fieldManagerLabelValue(fieldManager)}`;
}
