// What the admission policies are called and labelled: names derived from the field manager and
// the kind, so that rendering twice gives the same objects; labels that say they are labeller's
// and whose field manager's, so that the controller can find, and prune, the ones it rendered.
import { createHash } from 'node:crypto';
import { FIELD_MANAGER_LABEL, fieldManagerLabelValue } from '../config/fieldmanager.ts';
import { DNS1123_SUBDOMAIN_MAX_LENGTH, isDns1123Label, nameSlug } from '../apimachinery/names.ts';

/** The labels of every policy and binding rendered for `fieldManager`. */
export function policyLabels(fieldManager: string): Record<string, string> {
  return { 'app.kubernetes.io/managed-by': 'labeller', [FIELD_MANAGER_LABEL]: fieldManagerLabelValue(fieldManager) };
}

/** The label selector of the policies and bindings rendered for `fieldManager`: those it keeps, and prunes. */
export function policySelector(fieldManager: string): string {
  return Object.entries(policyLabels(fieldManager)).map(([key, value]) => `${key}=${value}`).join(',');
}

/**
 * A policy's name: the field manager (its slug when it is no DNS label), then `parts` (the kind as
 * `deployments.apps`, a namespace, a source), joined by `-` for people to read, then a hash of the
 * field manager and the parts as a list. The readable part alone is ambiguous (field manager
 * `labeller` with parts `pods`, `services` and field manager `labeller-pods` with part `services`
 * both read `labeller-pods-services`); the hash tells them apart, so that two field managers, or
 * two entries of one, never apply over each other's policy. A DNS subdomain: a readable part too
 * long keeps its start.
 */
export function policyName(fieldManager: string, ...parts: readonly string[]): string {
  const prefix = isDns1123Label(fieldManager) ? fieldManager : nameSlug(fieldManager, 40) || 'labeller';
  const suffix = `-${hash(JSON.stringify([fieldManager, ...parts]))}`;
  const readable = [prefix, ...parts].join('-');
  const room = DNS1123_SUBDOMAIN_MAX_LENGTH - suffix.length;
  return `${readable.length <= room ? readable : readable.slice(0, room).replace(/[-.]+$/, '')}${suffix}`;
}

function hash(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 8);
}
