// The marker (labelling/admitted.ts) as the admission policies write it: CEL that lists the keys a
// policy set, each `key=value` (annotation values escaped as the format says), appended to what the
// policies before it wrote.
import { ESCAPES } from '../labelling/admitted.ts';
import type { MetadataField } from '../config/model.ts';
import { celString } from './cel.ts';

/** CEL: the marker entry `key=value` for the string `value` (escaped for annotations). */
export function markerEntryCel(field: MetadataField, key: string, value: string): string {
  const escaped = field === 'annotations'
    ? ESCAPES.reduce((text, [char, e]) => `${text}.replace(${celString(char)}, ${celString(e)})`, value)
    : value;
  return `${celString(`${key}=`)} + ${escaped}`;
}

/**
 * CEL: the new value of the marker annotation `marker`, optional: the list of entries `entries`
 * (a CEL list of strings) appended to the marker the object carries already; none when the list
 * is empty, so that a policy that set nothing leaves no marker.
 */
export function markerCel(marker: string, entries: string): string {
  const before = `object.metadata.?annotations[?${celString(marker)}]`;
  return `size(${entries}) == 0 ? optional.none() : optional.of(string(${before}.optMap(m, m == "" ? "" : m + ",").orValue("") + ${entries}.join(",")))`;
}
