// The marker an admission policy leaves on each object it labels: which keys it set, and to what.
// managedFields do not say: the API server computes them before admission, so a key a policy
// added at a create has no owner, and a key it forced over the request's value is owned by the
// creator. So the marker is how the controller knows those keys for labeller's: to remove one
// dropped from the config, to update one whose value changed, and to leave alone the keys other
// managers set on purpose. One annotation per map and field manager, so that a labeller never
// takes for its own what another one's policies set:
//
//   labeller.io/admitted-labels.labeller:      team=payments,!tier=web
//   labeller.io/admitted-annotations.labeller: example.com/runbook=https://x/a%2Cb%3Dc
//
// `key=value` entries joined by `,`; `!key=value` where the policy forced its value over another
// the request carried (FORCED). Label keys and values hold neither `,` nor `=` nor start with `!`;
// annotation values may hold anything, so `%`, `,` and `=` in them are percent-escaped. Several
// policies may label one object (one per source they read): each keeps the entries of the others
// and replaces the rest (admission/marker.ts). The format and its reading live here, with what
// the controller believes of it (object.ts).
import { createHash } from 'node:crypto';
import type { MetadataField } from '../config/model.ts';

/**
 * The marker annotations of `fieldManager`'s policies. A field manager is any text and the name
 * of an annotation is not (63 characters of `[-A-Za-z0-9_.]`), so one that does not fit is hashed.
 */
export function markerKeys(fieldManager: string): Readonly<Record<MetadataField, string>> {
  const longest = 'admitted-annotations.'.length;
  const suffix = fieldManager.length <= 63 - longest && /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(fieldManager)
    ? fieldManager
    : `sha256-${createHash('sha256').update(fieldManager).digest('hex').slice(0, 63 - longest - 7)}`;
  return { labels: `labeller.io/admitted-labels.${suffix}`, annotations: `labeller.io/admitted-annotations.${suffix}` };
}

/** What `%`, `,` and `=` become in an annotation value; `%` first, so an escape is never escaped again. */
export const ESCAPES = [['%', '%25'], [',', '%2C'], ['=', '%3D']] as const;

/** Marks an entry whose value the policy forced over another the request carried. */
export const FORCED = '!';

/** One key a marker lists. */
export interface MarkerEntry {
  readonly value: string;
  /** The policy forced it over another value the request carried: the creator owns it in managedFields. */
  readonly forced: boolean;
}

/** The marker's text for `entries`, as the admission policies write it. */
export function formatMarker(
  field: MetadataField,
  entries: Iterable<readonly [key: string, entry: MarkerEntry]>,
): string {
  return [...entries].map(([key, { value, forced }]) =>
    `${forced ? FORCED : ''}${key}=${field === 'annotations' ? escape(value) : value}`
  ).join(',');
}

/**
 * The keys and entries a marker lists. Empty entries and entries without a key before `=` (not
 * written by labeller) are skipped; a key listed twice keeps its last entry, the one written last.
 */
export function parseMarker(field: MetadataField, text: string): Map<string, MarkerEntry> {
  const entries = new Map<string, MarkerEntry>();
  for (const entry of text.split(',')) {
    const forced = entry.startsWith(FORCED);
    const at = entry.indexOf('=');
    const start = forced ? 1 : 0;
    if (at <= start) continue;
    const value = entry.slice(at + 1);
    entries.set(entry.slice(start, at), { value: field === 'annotations' ? unescape(value) : value, forced });
  }
  return entries;
}

/** The keys a marker lists, with their values: what it says was set, whoever forced what. */
export function markerValues(field: MetadataField, text: string): Record<string, string> {
  return Object.fromEntries([...parseMarker(field, text)].map(([key, { value }]) => [key, value]));
}

function escape(value: string): string {
  return ESCAPES.reduce((text, [char, escaped]) => text.replaceAll(char, escaped), value);
}

function unescape(value: string): string {
  return value.replace(/%(25|2C|3D)/g, (escaped) => ESCAPES.find(([, e]) => e === escaped)![0]);
}
