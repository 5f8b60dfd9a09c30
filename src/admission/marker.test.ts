import assert from 'node:assert/strict';
import { test } from 'node:test';
import { markerCel, markerEntryCel } from './marker.ts';

test('the CEL of an entry escapes annotation values as formatMarker does, labels not at all', () => {
  assert.equal(markerEntryCel('labels', 'team', 'string(v)'), '"team=" + string(v)');
  assert.equal(
    markerEntryCel('annotations', 'note', 'string(v)'),
    '"note=" + string(v).replace("%", "%25").replace(",", "%2C").replace("=", "%3D")',
  );
});

test('the CEL of the marker appends to the one the object carries, and is none for no entries', () => {
  assert.equal(
    markerCel('labeller.io/admitted-labels.labeller', 'variables.admittedLabels'),
    'size(variables.admittedLabels) == 0 ? optional.none() : optional.of(string(' +
      'object.metadata.?annotations[?"labeller.io/admitted-labels.labeller"].optMap(m, m == "" ? "" : m + ",").orValue("")' +
      ' + variables.admittedLabels.join(",")))',
  );
});
