import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseSelector, SelectorError } from './selector.ts';

test('toString gives the canonical form: sorted by key, "==" as "=", set values sorted and unique', () => {
  const cases: Array<[string, string]> = [
    ['', ''],
    ['   ', ''],
    ['app', 'app'],
    ['!app', '!app'],
    ['  !  app ', '!app'],
    ['app=web', 'app=web'],
    ['app == web', 'app=web'],
    ['app != web', 'app!=web'],
    ['app=', 'app='],
    ['tier in (b, a,b)', 'tier in (a,b)'],
    ['tier notin(a)', 'tier notin (a)'],
    ['tier in (a,)', 'tier in (,a)'],
    ['zone=eu , app in (web) ,!legacy, example.com/team', 'app in (web),example.com/team,!legacy,zone=eu'],
  ];
  for (const [input, canonical] of cases) {
    assert.equal(parseSelector(input).toString(), canonical, input);
    assert.equal(String(parseSelector(canonical)), canonical, `round trip of ${canonical}`);
  }
});

test('matches follows the API server semantics', () => {
  const labels = { app: 'web', tier: 'frontend', empty: '' };
  const cases: Array<[string, boolean]> = [
    ['', true],
    ['app', true],
    ['missing', false],
    ['!missing', true],
    ['!app', false],
    ['app=web', true],
    ['app==api', false],
    ['missing=web', false],
    ['empty=', true],
    ['app!=api', true],
    ['app!=web', false],
    ['missing!=web', true],
    ['tier in (frontend, backend)', true],
    ['tier in (backend)', false],
    ['missing in (a)', false],
    ['tier notin (backend)', true],
    ['tier notin (frontend)', false],
    ['missing notin (a)', true],
    ['app=web,tier in (frontend)', true],
    ['app=web,tier in (backend)', false],
  ];
  for (const [selector, expected] of cases) {
    assert.equal(parseSelector(selector).matches(labels), expected, selector);
  }
});

test('matches ignores inherited properties such as "constructor"', () => {
  assert.equal(parseSelector('constructor').matches({}), false);
  assert.equal(parseSelector('!constructor').matches({}), true);
  assert.equal(parseSelector('toString notin (x)').matches({}), true);
});

test('parseSelector names the bad term and how to write it', () => {
  const forms = 'write key, !key, key=value, key!=value, key in (v1,v2) or key notin (v1,v2)';
  const cases: Array<[string, string]> = [
    ['app,,tier', 'empty term: remove the extra ","'],
    ['app,', 'empty term: remove the extra ","'],
    ['=web', `term "=web": expected a label key; ${forms}`],
    ['replicas > 1', `term "replicas > 1": unsupported operator after "replicas"; ${forms}`],
    ['app web', `term "app web": unsupported operator after "app"; ${forms}`],
    ['!app=web', 'term "!app=web": "!" takes a key alone, e.g. "!app"'],
    ['tier in a', 'term "tier in a": "in" needs a value list in parentheses, e.g. "tier in (a, b)"'],
    ['app=web, tier in (a, b', 'term "tier in (a, b": missing ")" at the end of the value list, e.g. "tier in (a, b)"'],
    ['tier notin ()', 'term "tier notin ()": "notin" needs at least one value, e.g. "tier notin (a, b)"'],
    [
      'Foo_bar/app=web',
      'term "Foo_bar/app=web": prefix "Foo_bar" must be a lowercase DNS-1123 subdomain (e.g. "example.com")',
    ],
  ];
  for (const [selector, message] of cases) {
    assert.throws(() => parseSelector(selector), { name: 'SelectorError', message }, selector);
  }
});

test('parseSelector validates values with the label value rules', () => {
  assert.throws(() => parseSelector('app=web)'), (error: unknown) => {
    assert.ok(error instanceof SelectorError);
    assert.match(error.message, /^term "app=web\)": value "web\)" must be empty or consist of/);
    return true;
  });
  assert.throws(() => parseSelector('tier in (a b)'), {
    message: /^term "tier in \(a b\)": value "a b" must be empty/,
  });
  assert.throws(() => parseSelector(`app=${'x'.repeat(64)}`), {
    message: `term "app=${'x'.repeat(64)}": value must be 63 characters or less (got 64)`,
  });
});

test('toLabelSelector gives the same requirements as LabelSelector expressions, in the canonical order', () => {
  assert.deepEqual(parseSelector('tier notin (b,a), app=web, !legacy, zone, x!=y').toLabelSelector(), {
    matchExpressions: [
      { key: 'app', operator: 'In', values: ['web'] },
      { key: 'legacy', operator: 'DoesNotExist' },
      { key: 'tier', operator: 'NotIn', values: ['a', 'b'] },
      { key: 'x', operator: 'NotIn', values: ['y'] },
      { key: 'zone', operator: 'Exists' },
    ],
  });
  assert.deepEqual(parseSelector('').toLabelSelector(), { matchExpressions: [] });
});
