import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { formatMarker, markerKeys, parseMarker } from './admitted.ts';

test('the marker annotations are labeller.io/admitted-labels.<field manager> and …-annotations.<field manager>', () => {
  assert.deepEqual(markerKeys('labeller'), {
    labels: 'labeller.io/admitted-labels.labeller',
    annotations: 'labeller.io/admitted-annotations.labeller',
  });
});

test('a field manager that is no annotation name, or too long for one, is hashed, the same in both markers', () => {
  const name = /^labeller\.io\/([-A-Za-z0-9_.]{1,63})$/;
  for (const fieldManager of ['kubectl apply', 'a'.repeat(43), 'é', '-x']) {
    const keys = markerKeys(fieldManager);
    assert.match(keys.labels, /^labeller\.io\/admitted-labels\.sha256-[0-9a-f]{35}$/, fieldManager);
    assert.equal(keys.annotations.split('.').at(-1), keys.labels.split('.').at(-1));
    assert.match(keys.annotations, name, fieldManager);
  }
  assert.equal(markerKeys('a'.repeat(42)).annotations, `labeller.io/admitted-annotations.${'a'.repeat(42)}`);
  assert.notEqual(markerKeys('kubectl apply').labels, markerKeys('kubectl  apply').labels);
});

/** Entries not forced, for formatMarker. */
const plain = (entries: readonly (readonly [string, string])[]) =>
  entries.map(([key, value]) => [key, { value, forced: false }] as const);
/** What parseMarker read: keys and values, forced ones marked with "!". */
const read = (field: 'labels' | 'annotations', text: string) =>
  [...parseMarker(field, text)].map(([key, { value, forced }]) => [`${forced ? '!' : ''}${key}`, value]);

test('labels: key=value entries joined by ","; values as they are; "!" before a key the policy forced', () => {
  const text = formatMarker('labels', [...plain([['example.com/team', 'payments'], ['tier', '']]), [
    'a',
    { value: 'b.c_d-e', forced: true },
  ]]);
  assert.equal(text, 'example.com/team=payments,tier=,!a=b.c_d-e');
  assert.deepEqual(read('labels', text), [['example.com/team', 'payments'], ['tier', ''], ['!a', 'b.c_d-e']]);
});

test('annotations: %, "," and "=" in values are percent-escaped, and read back', () => {
  const awkward: [string, string][] = [
    ['example.com/runbook', 'https://x.example.com/a?b=c,d=e'],
    ['note', '100%,=%2C%3D%25'],
    ['empty', ''],
    ['multi', 'line one\nline two, with "quotes"'],
    ['unicode', 'équipe = ☃'],
  ];
  const text = formatMarker('annotations', plain(awkward));
  assert.equal(text.split(',').length, awkward.length, 'one "," per entry: none from the values');
  assert.match(text, /^example\.com\/runbook=https:\/\/x\.example\.com\/a\?b%3Dc%2Cd%3De,/);
  assert.match(text, /,note=100%25%2C%3D%252C%253D%2525,/);
  assert.deepEqual(read('annotations', text), awkward);
});

test('any annotation values round-trip', () => {
  const key = fc.stringMatching(
    /^[a-z0-9]([-a-z0-9.]{0,20}[a-z0-9])?(\/[A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?)?$/,
  );
  const value = fc.string({ unit: fc.constantFrom('%', ',', '=', '2', 'C', '3', 'D', '5', 'a', ' ', '\n', 'é') });
  fc.assert(
    fc.property(fc.uniqueArray(fc.tuple(key, value), { selector: ([k]) => k, maxLength: 6 }), (entries) => {
      assert.deepEqual(read('annotations', formatMarker('annotations', plain(entries))), entries);
    }),
  );
});

test('parsing skips what labeller did not write, and an entry listed twice keeps its last value', () => {
  assert.deepEqual(read('labels', ''), []);
  assert.deepEqual(read('labels', ',a=1,,junk,=x,!=y,b=2'), [['a', '1'], ['b', '2']]);
  assert.deepEqual(read('labels', 'a=1,b=2,!a=3'), [['!a', '3'], ['b', '2']]);
  // A value holding "=" is a label's only by mistake; the first "=" ends the key.
  assert.deepEqual(read('labels', 'a=b=c'), [['a', 'b=c']]);
});
