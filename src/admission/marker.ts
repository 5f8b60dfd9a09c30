// The marker (labelling/admitted.ts) as the admission policies write it, in CEL. Each entry is
// `key=value` (annotation values escaped as the format says), `!key=value` when the policy forced
// its value over another the request carried. A policy never trusts the marker the object carries
// when it runs: that may be the request's own, a forgery or a copy (a restore, `kubectl get -o
// yaml | kubectl create`). It keeps only the entries of keys that other policies of its entry set
// (several policies label one object, one per source they read, in whichever order the API
// server runs them) and adds its own, so that once they have all run the marker lists exactly
// what they set.
import { ESCAPES, FORCED } from '../labelling/admitted.ts';
import type { MetadataField } from '../config/model.ts';
import { celString } from './cel.ts';

/**
 * CEL: the marker entry for the string `value` of `key` (escaped for annotations), `!`-prefixed
 * when the request carries the key at another value (the policy forced its own over it).
 */
export function markerEntryCel(field: MetadataField, key: string, value: string): string {
  const escaped = field === 'annotations'
    ? ESCAPES.reduce((text, [char, e]) => `${text}.replace(${celString(char)}, ${celString(e)})`, value)
    : value;
  const forced = `object.metadata.?${field}[?${celString(key)}].optMap(o, o == ${value} ? "" : ${
    celString(FORCED)
  }).orValue("")`;
  return `${forced} + ${celString(`${key}=`)} + ${escaped}`;
}

/**
 * CEL: the entries of the marker annotation `marker` on the object that other policies of the
 * same entry wrote (their keys are `others`), a list of strings; the rest (the request's, a
 * forgery's, keys no policy of this entry sets) is dropped. Undefined when there are no others.
 */
export function keptEntriesCel(marker: string, others: readonly string[]): string | undefined {
  if (others.length === 0) return undefined;
  const key = `(e.startsWith(${celString(FORCED)}) ? e.substring(1) : e).split("=")[0]`;
  return `object.metadata.?annotations[?${celString(marker)}].orValue("").split(",").filter(e, ${key} in ${
    JSON.stringify([...others].sort())
  })`;
}

/**
 * CEL: the new value of the marker annotation `marker`, optional: `entries` (a CEL list of
 * strings) joined; none when there are none and the object carries no marker, so that a policy
 * that set nothing leaves none; empty when the object carried one that vouched for nothing of
 * this entry's.
 */
export function markerCel(marker: string, entries: string): string {
  return `size(${entries}) > 0 || object.metadata.?annotations[?${
    celString(marker)
  }].hasValue() ? optional.of(${entries}.join(",")) : optional.none()`;
}

/**
 * CEL: the bytes an annotation `key` with the string value `value` counts for toward the API
 * server's limit, at most: the API server's CEL has no bytes(string), so each character beyond
 * ASCII counts as 4 bytes, UTF-8's most.
 */
export function annotationBytesCel(key: string, value: string): string {
  return `${new TextEncoder().encode(key).length} + ${utf8BytesCel(value)}`;
}

/**
 * CEL: the UTF-8 bytes of the string `value`, at most (see annotationBytesCel). string() first:
 * the checker takes a value of unknown type (dyn) that size() is applied to for bytes.
 */
export function utf8BytesCel(value: string): string {
  const text = value.startsWith('string(') ? value : `string(${value})`;
  return `size(${text}) + 3 * size(${text}.findAll(${celString('[^\\x00-\\x7f]')}))`;
}
