import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PartialObjectMetadata } from '../apimachinery/objects.ts';
import { createLogger } from '../util/log.ts';
import { Informer } from './informer.ts';
import { InformerCache } from './informercache.ts';
import { metadataOf, page, pod, ScriptedApi } from './testing/scripted.ts';

type Meta = PartialObjectMetadata['metadata'];
const log = createLogger({ level: 'error', format: 'json', write: () => {} });
const informer = (name: string, api = new ScriptedApi([page('5', [pod('a')])])): Informer<Meta> =>
  new Informer({ name, api, project: metadataOf, log });

/** A cache whose informers list once, recording which start and which stop. */
function cache(signal = new AbortController().signal) {
  const started: string[] = [];
  const stopped: string[] = [];
  const informers = new InformerCache<Meta>(async (made, stop) => {
    started.push(made.name);
    await new Promise<void>((resolve) => stop.addEventListener('abort', () => resolve(), { once: true }));
    stopped.push(made.name);
  }, signal);
  return { informers, started, stopped };
}

test('an id is made and started once however many acquire it, and stops when the last holder releases it', async () => {
  const { informers, started, stopped } = cache();
  let made = 0;
  const create = () => (made++, informer('replicasets.apps'));
  const first = informers.acquire('rs', create);
  const second = informers.acquire('rs', create);
  assert.equal(first.informer, second.informer);
  assert.deepEqual([made, started], [1, ['replicasets.apps']]);
  first.release();
  first.release();
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(stopped, [], 'one holder left: a second release of the same handle changes nothing');
  assert.equal(informers.get('rs'), second.informer);
  second.release();
  await informers.stopped();
  assert.deepEqual(stopped, ['replicasets.apps']);
  assert.equal(informers.get('rs'), undefined, 'gone from the cache, and from readiness with it');
  assert.deepEqual(informers.informers, []);
  const again = informers.acquire('rs', create);
  assert.notEqual(again.informer, first.informer, 'acquired again: a new informer, listed anew');
  again.release();
});

test('the cache signal stops every informer (shutdown); stopped() waits for them', async () => {
  const shutdown = new AbortController();
  const { informers, stopped } = cache(shutdown.signal);
  informers.acquire('a', () => informer('a'));
  informers.acquire('b', () => informer('b'));
  shutdown.abort();
  await informers.stopped();
  assert.deepEqual(stopped.sort(), ['a', 'b']);
});
