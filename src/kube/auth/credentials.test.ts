import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KeyPair } from './credentialfiles.ts';
import { CredentialsProvider } from './credentials.ts';
import { Refreshing } from './refreshing.ts';

/** A Refreshing whose next value the test sets; it loads whenever asked (freshUntil 0). */
function settable<T>(first: T) {
  let next = first;
  let loads = 0;
  const source = new Refreshing<T>(async () => {
    loads++;
    return { value: next, freshUntil: 0 };
  }, () => 1);
  return { source, set: (value: T) => (next = value), loads: () => loads };
}

test('the same credential and pool while nothing changes; a new token keeps the pool', async () => {
  const token = settable('t1');
  const id = new CredentialsProvider({ token: token.source, ca: 'CA' }, 'https://cluster.test');
  const first = await id.current();
  assert.equal(first.headers['authorization'], 'Bearer t1');
  assert.equal(await id.current(), first);
  token.set('t2');
  const second = await id.current();
  assert.equal(second.headers['authorization'], 'Bearer t2');
  assert.equal(second.transport, first.transport);
});

test('a new client certificate means a new pool; the same contents keep it', async () => {
  const pair = settable<KeyPair>({ cert: 'c1', key: 'k1' });
  const id = new CredentialsProvider({ pair: pair.source }, 'https://cluster.test');
  const first = await id.current();
  pair.set({ cert: 'c1', key: 'k1' });
  assert.equal((await id.current()).transport, first.transport);
  pair.set({ cert: 'c2', key: 'k2' });
  assert.notEqual((await id.current()).transport, first.transport);
});

test('refresh after a 401: one reload for many rejected requests; static credentials give the same object back (no retry)', async () => {
  const token = new Refreshing<string>(async () => ({ value: `t${++loads}`, freshUntil: Infinity }));
  let loads = 0;
  const id = new CredentialsProvider({ token }, 'https://cluster.test');
  const rejected = await id.current();
  const fresh = await Promise.all(Array.from({ length: 20 }, () => id.refresh(rejected)));
  assert.equal(loads, 2);
  assert.ok(fresh.every((c) => c === fresh[0] && c !== rejected));
  assert.equal(fresh[0]?.headers['authorization'], 'Bearer t2');

  const fixed = new CredentialsProvider(
    { token: 'static', headers: { 'impersonate-user': 'jane' } },
    'https://cluster.test',
  );
  const credential = await fixed.current();
  assert.deepEqual(credential.headers, { 'impersonate-user': 'jane', authorization: 'Bearer static' });
  assert.equal(await fixed.refresh(credential), credential);
});

test('basic auth when there is no token', async () => {
  const credential = await new CredentialsProvider({ basic: { username: 'u', password: 'p' } }, 'https://cluster.test')
    .current();
  assert.equal(credential.headers['authorization'], `Basic ${Buffer.from('u:p').toString('base64')}`);
});

test('ready(): the credential while every part is fresh, with no load; undefined once one is stale, which current() reloads', async () => {
  let now = 0;
  let loads = 0;
  const token = new Refreshing<string>(async () => ({ value: `t${++loads}`, freshUntil: now + 100 }), () => now);
  const id = new CredentialsProvider({ token, ca: 'CA' }, 'https://cluster.test');
  assert.equal(id.ready(), undefined);
  const first = await id.current();
  assert.equal(id.ready(), first);
  assert.equal(loads, 1);
  now = 100;
  assert.equal(id.ready(), undefined);
  const second = await id.current();
  assert.equal(second.headers['authorization'], 'Bearer t2');
  assert.equal(id.ready(), second);
  assert.equal(
    new CredentialsProvider({ token: 'static' }, 'https://cluster.test').ready()?.headers['authorization'],
    'Bearer static',
  );
});
