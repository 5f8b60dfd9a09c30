/**
 * DNS-1123 name syntax as Kubernetes applies it: namespaces are DNS-1123
 * labels, label-key prefixes are DNS-1123 subdomains.
 */

export const DNS1123_LABEL_MAX_LENGTH = 63;
export const DNS1123_SUBDOMAIN_MAX_LENGTH = 253;

const LABEL = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const LABEL_PATTERN = new RegExp(`^${LABEL}$`);
const SUBDOMAIN_PATTERN = new RegExp(`^${LABEL}(\\.${LABEL})*$`);

// Length is checked first: it is the rule, and it bounds the regex's work.
export function isDns1123Label(name: string): boolean {
  return name.length <= DNS1123_LABEL_MAX_LENGTH && LABEL_PATTERN.test(name);
}

export function isDns1123Subdomain(name: string): boolean {
  return name.length <= DNS1123_SUBDOMAIN_MAX_LENGTH && SUBDOMAIN_PATTERN.test(name);
}

/** `text` as a lowercase DNS-1123 fragment of at most `max` characters, for a generated object name ('' when none of it fits). */
export function nameSlug(text: string, max: number): string {
  return text.toLowerCase().replace(/[^a-z0-9-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, max);
}
