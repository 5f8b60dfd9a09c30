// What the admission policies are called and labelled: names derived from the field manager and
// the kind, so that rendering twice gives the same objects; labels that say they are labeller's
// and whose field manager's, so that the controller can find, and prune, the ones it rendered.
import { createHash } from 'node:crypto';
import { FIELD_MANAGER_LABEL, fieldManagerLabelValue } from '../config/fieldmanager.ts';
import { DNS1123_SUBDOMAIN_MAX_LENGTH, isDns1123Label, nameSlug } from '../kube/names.ts';

/** The labels of every policy and binding rendered for `fieldManager`. */
export function policyLabels(fieldManager: string): Record<string, string> {
  return { 'app.kubernetes.io/managed-by': 'labeller', [FIELD_MANAGER_LABEL]: fieldManagerLabelValue(fieldManager) };
}

/** The label selector of the policies and bindings rendered for `fieldManager`: those it keeps, and prunes. */
export function policySelector(fieldManager: string): string {
  return Object.entries(policyLabels(fieldManager)).map(([key, value]) => `${key}=${value}`).join(',');
}

/**
 * A policy's name: the field manager (its slug and a hash when it is no DNS label, so that two
 * field managers never share names), then `parts` (the kind as `deployments.apps`, a source),
 * joined by `-`. A DNS subdomain: one too long keeps its start and a hash of the whole.
 */
export function policyName(fieldManager: string, ...parts: readonly string[]): string {
  const prefix = isDns1123Label(fieldManager)
    ? fieldManager
    : `${nameSlug(fieldManager, 40) || 'labeller'}-${hash(fieldManager)}`;
  const name = [prefix, ...parts].join('-');
  if (name.length <= DNS1123_SUBDOMAIN_MAX_LENGTH) return name;
  return `${name.slice(0, DNS1123_SUBDOMAIN_MAX_LENGTH - 11).replace(/[-.]+$/, '')}-${hash(name)}`;
}

function hash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 10);
}
