import assert from 'node:assert/strict';
import { test } from 'node:test';
import { redactUrl } from './url.ts';

test('a URL is shown without userinfo, query or fragment; what is left says they were there', () => {
  assert.equal(redactUrl('https://catalog.example.com/teams.json'), 'https://catalog.example.com/teams.json');
  assert.equal(
    redactUrl('https://catalog.example.com/teams.json?token=s3cret&a=b'),
    'https://catalog.example.com/teams.json?…',
  );
  assert.equal(
    redactUrl('https://u:s3cret@catalog.example.com:8443/t.json#s3cret'),
    'https://catalog.example.com:8443/t.json#…',
  );
  assert.equal(
    redactUrl('https://catalog.example.com/a@b?x=s3cret'),
    'https://catalog.example.com/a@b?…',
    'an @ in the path stays',
  );
  assert.equal(
    redactUrl('catalog.example.com/t.json?token=s3cret'),
    'catalog.example.com/t.json?…',
    'not a URL: cut too',
  );
});
