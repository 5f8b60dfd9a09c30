// The manager on scripted APIs: controllers added before and while it runs, removed while it runs
// (their running reconcile finishing first), the drain within the grace period, a crash, tasks
// that run while leading, and leader election on a fake clock and an in-memory Lease.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PartialObjectMetadata } from '../apimachinery/objects.ts';
import { createLogger } from '../util/log.ts';
import { Controller } from './controller.ts';
import { Informer } from './informer.ts';
import { LeaderElector } from './leader.ts';
import { Manager } from './manager.ts';
import { Shutdown } from './shutdown.ts';
import { FakeClock, FakeLeases, settle } from '../lease/testing/fakes.ts';
import { metadataOf, page, pod, ScriptedApi } from './testing/scripted.ts';

type Meta = PartialObjectMetadata['metadata'];
const log = createLogger({ level: 'error', format: 'json', write: () => {} });

async function until(condition: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 500 && !condition(); i++) await settle();
  assert.ok(condition(), `never happened: ${what}`);
}

/** A manager whose shutdown no process signal reaches, and a way to add a controller of `name` listing `names`. */
function setup(options: { gracePeriodMs?: number; elector?: LeaderElector } = {}) {
  const shutdown = new Shutdown({ signals: [] });
  const manager = new Manager<Meta>(
    { once: false, gracePeriodMs: options.gracePeriodMs ?? 5_000, log, ...options },
    shutdown,
  );
  const calls: string[] = [];
  const controller = (name: string, objects: string[], reconcile = async (): Promise<void> => {}) => {
    const acquired = manager.informers.acquire(
      name,
      () =>
        new Informer<Meta>({
          name,
          api: new ScriptedApi([page('5', objects.map((o) => pod(o)))]),
          project: metadataOf,
          log,
        }),
    );
    return new Controller<Meta>({
      name,
      informers: [acquired.informer],
      reconcile: async (_, key) => {
        calls.push(`${name} ${key}`);
        await reconcile();
      },
      concurrency: 1,
      requeueAfterMs: 0,
      log,
    });
  };
  return { shutdown, manager, calls, controller };
}

test('controllers added before it runs start with it; one added while it runs starts at once', async () => {
  const { shutdown, manager, calls, controller } = setup();
  manager.add(controller('pods', ['a']));
  const running = manager.run();
  await until(() => calls.length === 1, 'the first controller reconciles');
  manager.add(controller('configmaps', ['b']));
  await until(() => calls.length === 2, 'the controller added later reconciles');
  assert.deepEqual(calls, ['pods ns/a', 'configmaps ns/b']);
  assert.throws(() => manager.add(controller('pods', [])), /pods is running already/);
  shutdown.stop();
  assert.equal(await running, 'stopped');
});

test('a controller removed while it runs finishes its running reconcile, then stops; the others go on', async () => {
  const { shutdown, manager, calls, controller } = setup();
  const release = Promise.withResolvers<void>();
  manager.add(controller('pods', ['a', 'b'], () => release.promise));
  manager.add(controller('configmaps', ['c']));
  const running = manager.run();
  await until(() => calls.includes('pods ns/a') && calls.includes('configmaps ns/c'), 'both reconcile');
  let removed = false;
  const removal = manager.remove('pods').then(() => (removed = true));
  await settle();
  assert.equal(removed, false, 'waits for the running reconcile');
  release.resolve();
  await removal;
  assert.deepEqual(manager.controllers.map((c) => c.name), ['configmaps']);
  assert.ok(!calls.includes('pods ns/b'), 'no new work once removed');
  shutdown.stop();
  assert.equal(await running, 'stopped');
});

test('shutdown drains running reconciles within the grace period; past it the run says so', async () => {
  const { shutdown, manager, calls, controller } = setup({ gracePeriodMs: 50 });
  manager.add(controller('pods', ['a'], () => new Promise<void>(() => {})));
  const running = manager.run();
  await until(() => calls.length === 1, 'a reconcile that never ends');
  shutdown.stop();
  assert.equal(await running, 'grace period over');
});

test('a controller that crashes stops the run', async () => {
  const { shutdown, manager } = setup();
  const acquired = manager.informers.acquire(
    'pods',
    () => new Informer<Meta>({ name: 'pods', api: new ScriptedApi([page('5', [])]), project: metadataOf, log }),
  );
  manager.add(
    new Controller<Meta>({
      name: 'pods',
      informers: [acquired.informer],
      dependencies: () => Promise.reject(new Error('a bug')),
      reconcile: async () => {},
      concurrency: 1,
      requeueAfterMs: 0,
      log,
    }),
  );
  assert.equal(await manager.run(), 'controller crashed');
  assert.ok(shutdown.intake.aborted);
});

/** A candidate for the Lease `lease` (held by nobody yet), and a manager around it. */
function leading(gracePeriodMs = 5_000) {
  const clock = new FakeClock();
  const server = new FakeLeases(clock);
  const elector = new LeaderElector(server.as('me'), {
    namespace: 'test',
    name: 'lease',
    identity: 'me',
    leaseDurationMs: 4000,
    renewDeadlineMs: 2500,
    retryPeriodMs: 500,
    log,
  }, clock);
  return { clock, server, ...setup({ elector, gracePeriodMs }) };
}

test('under leader election nothing is reconciled before leading, tasks run while leading, and the lease is released last', async () => {
  const { clock, server, shutdown, manager, calls, controller } = leading();
  // Another holder's live lease: this candidate waits.
  await server.as('other').create({
    metadata: { name: 'lease', namespace: 'test' },
    spec: { holderIdentity: 'other', leaseDurationSeconds: 4, renewTime: 'x', acquireTime: 'x' },
  });
  manager.add(controller('pods', ['a']));
  const task: string[] = [];
  manager.whileLeading(async (stop) => {
    task.push('start');
    await new Promise((resolve) => stop.addEventListener('abort', resolve, { once: true }));
    task.push('end');
  });
  const running = manager.run();
  await clock.advance(3000);
  assert.deepEqual([calls, task], [[], []], 'a standby reconciles nothing');
  await clock.advance(5000);
  await until(() => calls.length === 1, 'the leader reconciles');
  assert.deepEqual(task, ['start']);
  shutdown.stop();
  await clock.advance(1000);
  assert.equal(await running, 'stopped');
  assert.deepEqual(task, ['start', 'end']);
  assert.equal(server.lease('lease')?.spec.holderIdentity, null, 'released');
});

/** A task that sends one write at shutdown and records how it ended. */
function writingAtShutdown(events: string[]) {
  const write = Promise.withResolvers<void>();
  const task = async (stop: AbortSignal, writes: AbortSignal): Promise<void | 'cut short'> => {
    await new Promise((resolve) => stop.addEventListener('abort', resolve, { once: true }));
    events.push('stop');
    const aborted = new Promise<'aborted'>((resolve) =>
      writes.addEventListener('abort', () => resolve('aborted'), { once: true })
    );
    const how = await Promise.race([write.promise.then(() => 'written' as const), aborted]);
    events.push(how);
    return how === 'aborted' ? 'cut short' : undefined;
  };
  return { task, write };
}

test("at shutdown a task's write under way finishes before the holds end, and the lease is released", async () => {
  const { clock, server, shutdown, manager, calls, controller } = leading();
  manager.add(controller('pods', ['a']));
  const events: string[] = [];
  const { task, write } = writingAtShutdown(events);
  manager.whileLeading(task);
  manager.whileWriting(async (writes) => {
    await new Promise((resolve) => writes.addEventListener('abort', resolve, { once: true }));
    events.push('hold ended');
  });
  const running = manager.run();
  await until(() => calls.length === 1, 'the leader reconciles');
  shutdown.stop();
  await until(() => events.length === 1, 'the task told to stop');
  await clock.advance(1000);
  assert.deepEqual(events, ['stop'], 'its write is not aborted, and the holds wait for it');
  write.resolve();
  assert.equal(await running, 'stopped');
  assert.deepEqual(events, ['stop', 'written', 'hold ended']);
  assert.equal(server.lease('lease')?.spec.holderIdentity, null, 'released');
});

test("a task's write still under way when the grace period is over is aborted, and the lease is left to expire", async () => {
  const { clock, server, shutdown, manager } = leading(200);
  const events: string[] = [];
  manager.whileLeading(writingAtShutdown(events).task);
  const running = manager.run();
  await until(() => server.lease('lease')?.spec.holderIdentity === 'me', 'leading');
  shutdown.stop();
  await until(() => events.length === 1, 'the task told to stop');
  await clock.advance(3000);
  assert.equal(await running, 'grace period over');
  assert.deepEqual(events, ['stop', 'aborted']);
  assert.equal(server.lease('lease')?.spec.holderIdentity, 'me', 'a write cut short may still land: not released');
});
