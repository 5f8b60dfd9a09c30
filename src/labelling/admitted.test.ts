import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { ADMITTED, formatMarker, parseMarker } from './admitted.ts';

test('the marker annotations are labeller.io/admitted-labels and labeller.io/admitted-annotations', () => {
  assert.deepEqual(ADMITTED, {
    labels: 'labeller.io/admitted-labels',
    annotations: 'labeller.io/admitted-annotations',
  });
});

test('labels: key=value entries joined by ","; values as they are', () => {
  const text = formatMarker('labels', [['example.com/team', 'payments'], ['tier', ''], ['a', 'b.c_d-e']]);
  assert.equal(text, 'example.com/team=payments,tier=,a=b.c_d-e');
  assert.deepEqual([...parseMarker('labels', text)], [['example.com/team', 'payments'], ['tier', ''], [
    'a',
    'b.c_d-e',
  ]]);
});

test('annotations: %, "," and "=" in values are percent-escaped, and read back', () => {
  const awkward: [string, string][] = [
    ['example.com/runbook', 'https://x.example.com/a?b=c,d=e'],
    ['note', '100%,=%2C%3D%25'],
    ['empty', ''],
    ['multi', 'line one\nline two, with "quotes"'],
    ['unicode', 'équipe = ☃'],
  ];
  const text = formatMarker('annotations', awkward);
  assert.equal(text.split(',').length, awkward.length, 'one "," per entry: none from the values');
  assert.match(text, /^example\.com\/runbook=https:\/\/x\.example\.com\/a\?b%3Dc%2Cd%3De,/);
  assert.match(text, /,note=100%25%2C%3D%252C%253D%2525,/);
  assert.deepEqual([...parseMarker('annotations', text)], awkward);
});

test('any annotation values round-trip', () => {
  const key = fc.stringMatching(
    /^[a-z0-9]([-a-z0-9.]{0,20}[a-z0-9])?(\/[A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?)?$/,
  );
  const value = fc.string({ unit: fc.constantFrom('%', ',', '=', '2', 'C', '3', 'D', '5', 'a', ' ', '\n', 'é') });
  fc.assert(
    fc.property(fc.uniqueArray(fc.tuple(key, value), { selector: ([k]) => k, maxLength: 6 }), (entries) => {
      assert.deepEqual([...parseMarker('annotations', formatMarker('annotations', entries))], entries);
    }),
  );
});

test('parsing skips what labeller did not write, and an entry listed twice keeps its last value', () => {
  assert.deepEqual([...parseMarker('labels', '')], []);
  assert.deepEqual([...parseMarker('labels', ',a=1,,junk,=x,b=2')], [['a', '1'], ['b', '2']]);
  assert.deepEqual([...parseMarker('labels', 'a=1,b=2,a=3')], [['a', '3'], ['b', '2']]);
  // A value holding "=" is a label's only by mistake; the first "=" ends the key.
  assert.deepEqual([...parseMarker('labels', 'a=b=c')], [['a', 'b=c']]);
});
