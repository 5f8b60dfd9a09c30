import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { test } from 'node:test';
import { createLogger } from '../util/log.ts';
import type { Discovery } from './discovery.ts';
import { DiscoveryCache } from './discoverycache.ts';
import { ApiError, ConnectionError, KubeConfigError } from '../apimachinery/errors.ts';
import { ResolveError } from '../apimachinery/resolve.ts';
import { BUILTINS, WIDGETS } from '../apimachinery/testing/resources.ts';

const log = createLogger({ level: 'error', format: 'json', write: () => {} });

/** A cache over `answers`, one per discovery (the last one repeated); `reads` counts them. */
function cache(...answers: (Discovery | Error)[]) {
  let reads = 0;
  const discovery = new DiscoveryCache(
    async () => {
      const answer = answers[Math.min(reads++, answers.length - 1)]!;
      if (answer instanceof Error) throw answer;
      return answer;
    },
    log,
    { server: 'https://cluster', context: 'ctx', minIntervalMs: 1, maxIntervalMs: 4 },
  );
  return { discovery, reads: () => reads };
}

const served = (...extra: Discovery['resources']): Discovery => ({
  resources: [...BUILTINS, ...extra],
  failedGroups: [],
});

test('kinds and owner kinds resolve against one discovery; a miss asks for a refresh, which tells the listeners of the change', async () => {
  const { discovery, reads } = cache(served(), served(WIDGETS));
  const stop = new AbortController();
  await discovery.load(stop.signal);
  assert.equal(discovery.resolve('deploy').resource, 'deployments');
  assert.equal(discovery.forKind('apps/v1', 'ReplicaSet')?.resource, 'replicasets');
  assert.equal(discovery.forKind('v1', 'Node')?.resource, 'nodes');
  const changes: number[] = [];
  discovery.onChange((d) => changes.push(d.resources.length));
  const running = discovery.run(stop.signal);
  assert.equal(reads(), 1, 'nothing missed, nobody waits: no refresh');
  assert.throws(() => discovery.resolve('widgets'), ResolveError);
  while (changes.length === 0) await new Promise((resolve) => setTimeout(resolve, 2));
  assert.deepEqual(changes, [BUILTINS.length + 1]);
  assert.equal(discovery.resolve('widgets').group, 'example.com');
  assert.equal(discovery.forKind('example.com/v1', 'Widget')?.resource, 'widgets');
  stop.abort();
  await running;
});

test('a standing demand refreshes periodically until released; an unchanged answer tells nobody', async () => {
  const { discovery, reads } = cache(served());
  const stop = new AbortController();
  await discovery.load(stop.signal);
  let changed = 0;
  discovery.onChange(() => changed++);
  const running = discovery.run(stop.signal);
  const release = discovery.demand();
  while (reads() < 4) await new Promise((resolve) => setTimeout(resolve, 2));
  release();
  await new Promise((resolve) => setTimeout(resolve, 20));
  const after = reads();
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.ok(reads() <= after + 1, 'at most the refresh under way once released');
  assert.equal(changed, 0);
  stop.abort();
  await running;
});

test('the first discovery retries an unreachable server a few times; rejected credentials are a kubeconfig problem', async () => {
  const down = new ConnectionError('https://cluster', new Error('ECONNREFUSED'));
  const { discovery, reads } = cache(down, served());
  await discovery.load(new AbortController().signal);
  assert.equal(reads(), 2);
  const rejected = cache(new ApiError('GET', '/api', 401, { message: 'Unauthorized' })).discovery;
  await assert.rejects(
    rejected.load(new AbortController().signal),
    (error: unknown) => error instanceof KubeConfigError && /context "ctx" \(401 Unauthorized\)/.test(error.message),
  );
});

test('idle and woken 200 times, the refresh loop holds no more abort listeners than once', async () => {
  const { discovery, reads } = cache(served());
  const stop = new AbortController();
  await discovery.load(stop.signal);
  const running = discovery.run(stop.signal);
  const listeners = (): number => getEventListeners(stop.signal, 'abort').length;
  const idle = listeners();
  for (let miss = 1; miss <= 200; miss++) {
    assert.throws(() => discovery.resolve('widgets'), ResolveError);
    while (reads() < 1 + miss) await new Promise((resolve) => setTimeout(resolve, 1));
    // Back to waiting for the next miss.
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  assert.ok(listeners() <= idle, `${listeners()} abort listeners after 200 misses, ${idle} when idle at first`);
  stop.abort();
  await running;
});
