// The marker an admission policy leaves on each object it labels: which keys it set, and to what.
// managedFields do not say: the API server records no owner for what admission adds at a create,
// and labeller's field manager owns none of it. So the marker is how the controller knows those
// keys for labeller's: to remove one dropped from the config, to update one whose value changed,
// and to leave alone the keys other managers set on purpose. One annotation per map and field
// manager, so that a labeller never takes for its own what another one's policies set:
//
//   labeller.io/admitted-labels.labeller:      team=payments,tier=web
//   labeller.io/admitted-annotations.labeller: example.com/runbook=https://x/a%2Cb%3Dc
//
// `key=value` entries joined by `,`. Label keys and values hold neither `,` nor `=`; annotation
// values may hold anything, so `%`, `,` and `=` in them are percent-escaped. Several policies may
// label one object (one per source they read): each appends to what the policies before it wrote.
// The format and its reading live here, with what labeller keeps of each object (object.ts): the
// admission policies' CEL that writes it is admission/marker.ts.
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

/** The marker's text for `entries` (keys set, with their values), as the admission policies write it. */
export function formatMarker(field: MetadataField, entries: Iterable<readonly [key: string, value: string]>): string {
  return [...entries].map(([key, value]) => `${key}=${field === 'annotations' ? escape(value) : value}`).join(',');
}

/**
 * The keys and values a marker lists. Empty entries (a marker one policy left empty, then
 * appended to) and entries without `=` (not written by labeller) are skipped; a key listed twice
 * keeps its last value, the one written last.
 */
export function parseMarker(field: MetadataField, text: string): Map<string, string> {
  const entries = new Map<string, string>();
  for (const entry of text.split(',')) {
    const at = entry.indexOf('=');
    if (at < 1) continue;
    const value = entry.slice(at + 1);
    entries.set(entry.slice(0, at), field === 'annotations' ? unescape(value) : value);
  }
  return entries;
}

function escape(value: string): string {
  return ESCAPES.reduce((text, [char, escaped]) => text.replaceAll(char, escaped), value);
}

function unescape(value: string): string {
  return value.replace(/%(25|2C|3D)/g, (escaped) => ESCAPES.find(([, e]) => e === escaped)![0]);
}
