import assert from 'node:assert/strict';
import { test } from 'node:test';
import { annotationBytesCel, keptEntriesCel, markerCel, markerEntryCel } from './marker.ts';

test("the CEL of an entry escapes annotation values as formatMarker does, labels not at all, and marks a value forced over the request's", () => {
  assert.equal(
    markerEntryCel('labels', 'team', 'string(v)'),
    'object.metadata.?labels[?"team"].optMap(o, o == string(v) ? "" : "!").orValue("") + "team=" + string(v)',
  );
  assert.equal(
    markerEntryCel('annotations', 'note', 'string(v)'),
    'object.metadata.?annotations[?"note"].optMap(o, o == string(v) ? "" : "!").orValue("") + ' +
      '"note=" + string(v).replace("%", "%25").replace(",", "%2C").replace("=", "%3D")',
  );
});

test("the CEL of the marker keeps only other policies' entries of what the object carries, and is none when there is nothing to say", () => {
  assert.equal(keptEntriesCel('m', []), undefined);
  assert.equal(
    keptEntriesCel('m', ['b', 'a']),
    'object.metadata.?annotations[?"m"].orValue("").split(",").filter(e, (e.startsWith("!") ? e.substring(1) : e).split("=")[0] in ["a","b"])',
  );
  assert.equal(
    markerCel('m', 'variables.entries'),
    'size(variables.entries) > 0 || object.metadata.?annotations[?"m"].hasValue() ? optional.of(variables.entries.join(",")) : optional.none()',
  );
});

test('an annotation counts its key in UTF-8 bytes, as the API server does, and its value at most so: 4 bytes for each character beyond ASCII', () => {
  assert.equal(
    annotationBytesCel('équipe', 'v'),
    '7 + size(string(v)) + 3 * size(string(v).findAll("[^\\\\x00-\\\\x7f]"))',
  );
});
