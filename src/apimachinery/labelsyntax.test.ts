import assert from 'node:assert/strict';
import { test } from 'node:test';
import { validateLabelKey, validateLabelValue } from './labelsyntax.ts';

const NAME_RULE =
  'name part must consist of alphanumeric characters, \'-\', \'_\' or \'.\', and must start and end with an alphanumeric character (e.g. "MyName", "my.name", "123-abc")';

test('validateLabelKey accepts names with and without a prefix', () => {
  for (
    const key of [
      'app',
      'App_1.x-y',
      'a',
      'app.kubernetes.io/managed-by',
      'example.com/Name',
      'x'.repeat(63),
      `${'p'.repeat(253)}/n`,
    ]
  ) {
    assert.equal(validateLabelKey(key), undefined, key);
  }
});

test('validateLabelKey explains what is wrong with the name part', () => {
  assert.equal(validateLabelKey(''), 'key must not be empty (e.g. "tier" or "example.com/tier")');
  assert.equal(validateLabelKey('x'.repeat(70)), 'name part must be 63 characters or less (got 70)');
  assert.equal(validateLabelKey(`example.com/${'x'.repeat(64)}`), 'name part must be 63 characters or less (got 64)');
  assert.equal(validateLabelKey('example.com/'), 'name part must not be empty (e.g. "example.com/tier")');
  for (const key of ['bad key', '-app', 'app-', 'app.', '_app', 'example.com/-x', 'ä']) {
    assert.equal(validateLabelKey(key), NAME_RULE, key);
  }
});

test('validateLabelKey explains what is wrong with the prefix', () => {
  assert.equal(
    validateLabelKey('Foo_bar/app'),
    'prefix "Foo_bar" must be a lowercase DNS-1123 subdomain (e.g. "example.com")',
  );
  assert.equal(validateLabelKey('/app'), 'prefix before "/" must not be empty (e.g. "example.com/tier")');
  assert.equal(validateLabelKey(`${'p'.repeat(254)}/app`), 'prefix must be 253 characters or less (got 254)');
  assert.equal(
    validateLabelKey('a/b/c'),
    'key "a/b/c" must contain at most one "/", between the prefix and the name (e.g. "example.com/tier")',
  );
});

test('validateLabelValue accepts empty values and names up to 63 characters', () => {
  for (const value of ['', 'web', 'v1.2.3', 'My_Value', '0', 'x'.repeat(63)]) {
    assert.equal(validateLabelValue(value), undefined, value);
  }
});

test('validateLabelValue names the bad value and the rule', () => {
  assert.equal(validateLabelValue('x'.repeat(70)), 'value must be 63 characters or less (got 70)');
  assert.equal(
    validateLabelValue('a b'),
    'value "a b" must be empty or consist of alphanumeric characters, \'-\', \'_\' or \'.\', and must start and end with an alphanumeric character (e.g. "MyValue", "my_value", "12345")',
  );
  for (const value of ['-web', 'web-', 'a/b', '{{name}}', 'web\n']) {
    assert.match(validateLabelValue(value) ?? '', /^value ".*" must be empty or consist of/, value);
  }
});
