// The write proxy against an HTTPS server on loopback (the test catalogue, which answers anything):
// requests pass through whichever place sends them, a place's PATCHes are held until released and
// recorded, and a held PATCH sent on after another place's of the same object is a late write.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { test } from 'node:test';
import { Catalog } from './catalog.ts';
import { labelsOf, lateWrites, serverName, type Write, WriteProxy } from './writeproxy.ts';

function send(
  proxy: WriteProxy,
  place: string,
  method: string,
  path: string,
  body?: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const { port } = new URL(proxy.url);
    const sent = request({
      host: '127.0.0.1',
      port,
      method,
      path,
      ca: readFileSync(proxy.caFile),
      servername: serverName(place),
      headers: body ? { 'content-type': 'application/apply-patch+yaml' } : {},
    }, (answer) => {
      let text = '';
      answer.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      answer.on('end', () => resolve({ status: answer.statusCode ?? 0, body: text }));
    });
    sent.on('error', reject);
    sent.end(body);
  });
}

test('a place named in TLS gets through; its PATCHes held are sent on at release, late after another place', async () => {
  const catalog = new Catalog('token');
  catalog.body = '{"red":"site-1"}';
  await catalog.up();
  const proxy = await WriteProxy.start(new URL(catalog.url).origin, readFileSync(catalog.caFile), [
    'place-0',
    'place-1',
  ]);
  try {
    assert.deepEqual(await send(proxy, 'place-0', 'GET', '/teams.json'), { status: 200, body: '{"red":"site-1"}' });
    const path = '/api/v1/namespaces/a/configmaps/cm-0';
    proxy.hold('place-1');
    let answered = false;
    const held = send(proxy, 'place-1', 'PATCH', `${path}?fieldManager=labeller`, '{"metadata":{"labels":{"k":"old"}}}')
      .then((answer) => ((answered = true), answer));
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal((await send(proxy, 'place-0', 'PATCH', path, '{"metadata":{"labels":{"k":"new"}}}')).status, 200);
    assert.equal(answered, false);
    proxy.release('place-1');
    assert.equal((await held).status, 200);
    const [first, second] = proxy.writes;
    assert.deepEqual(
      [first?.place, first?.labels, first?.heldSince !== undefined, second?.place, second?.heldSince],
      ['place-1', { k: 'old' }, true, 'place-0', undefined],
    );
    const late = lateWrites(proxy.writes);
    assert.equal(late.length, 1);
    assert.equal(late[0]!.held, first);
    assert.equal(late[0]!.overtaken, second);
  } finally {
    await proxy.close();
    await catalog.close();
  }
});

test('a held PATCH sent on before another place wrote is not late; one of another object neither', () => {
  const write = (over: Partial<Write>): Write => ({
    place: 'place-0',
    path: '/x',
    labels: {},
    receivedAt: 10,
    heldSince: undefined,
    sentAt: 10,
    answeredAt: 11,
    status: 200,
    ...over,
  });
  const held = write({ place: 'place-1', heldSince: 5, receivedAt: 6, sentAt: 20, answeredAt: 21 });
  assert.equal(lateWrites([held, write({ answeredAt: 25, sentAt: 24, receivedAt: 24 })]).length, 0);
  assert.equal(lateWrites([held, write({ path: '/y' })]).length, 0);
  // Refused (a conflict): nothing was written.
  assert.equal(lateWrites([{ ...held, status: 409 }, write({})]).length, 0);
  assert.equal(lateWrites([held, write({ status: 409 })]).length, 0);
  assert.equal(lateWrites([held, write({})]).length, 1);
  // Answered with the version the other's write left: it changed nothing.
  assert.equal(lateWrites([{ ...held, resourceVersion: '7' }, write({ resourceVersion: '7' })]).length, 0);
  assert.equal(lateWrites([{ ...held, resourceVersion: '8' }, write({ resourceVersion: '7' })]).length, 1);
});

test('the labels a PATCH body sets: an apply, a merge patch, a JSON patch', () => {
  assert.deepEqual(labelsOf(Buffer.from('{"metadata":{"labels":{"a":"1"}}}')), { a: '1' });
  assert.deepEqual(labelsOf(Buffer.from('{"metadata":{"name":"x"}}')), {});
  assert.deepEqual(
    labelsOf(Buffer.from(JSON.stringify([
      { op: 'test', path: '/metadata/resourceVersion', value: '5' },
      { op: 'remove', path: '/metadata/labels/chaos.example.com~1team' },
      { op: 'add', path: '/metadata/labels/b', value: '2' },
    ]))),
    { 'chaos.example.com/team': null, b: '2' },
  );
  assert.equal(labelsOf(Buffer.from('kind: X')), undefined);
});
