import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isDns1123Label, isDns1123Subdomain } from './names.ts';

test('isDns1123Label accepts lowercase alphanumerics and inner dashes up to 63 characters', () => {
  for (const name of ['a', 'default', 'kube-system', '0abc', 'a'.repeat(63)]) {
    assert.equal(isDns1123Label(name), true, name);
  }
  for (const name of ['', 'Default', '-a', 'a-', 'a.b', 'a_b', 'a'.repeat(64), 'default\n']) {
    assert.equal(isDns1123Label(name), false, name);
  }
});

test('isDns1123Subdomain accepts dot-separated labels up to 253 characters', () => {
  const longest = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`;
  for (const name of ['example.com', 'app.kubernetes.io', 'a', longest]) {
    assert.equal(isDns1123Subdomain(name), true, name);
  }
  for (const name of ['', 'Example.com', 'example..com', '.example.com', 'example.com.', 'foo_bar', `${longest}x`]) {
    assert.equal(isDns1123Subdomain(name), false, name);
  }
});
