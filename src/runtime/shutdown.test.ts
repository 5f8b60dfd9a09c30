import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { Shutdown, type ShutdownOptions } from './shutdown.ts';

// A signal nothing else in the test process listens to (the test runner may report on SIGUSR2,
// and SIGUSR1 starts the inspector), so emitting it only runs the coordinator's listener.
const SIGNAL = 'SIGWINCH';

const immediate = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function create(t: TestContext, options: Partial<ShutdownOptions> = {}) {
  const exits: number[] = [];
  const signals: Array<[NodeJS.Signals, boolean]> = [];
  const shutdown = new Shutdown({ signals: [SIGNAL], exit: (code) => exits.push(code), ...options });
  shutdown.onSignal((signal, first) => signals.push([signal, first]));
  t.after(() => shutdown.dispose());
  return { shutdown, exits, signals };
}

/** Whether `promise` has settled once pending callbacks ran; its value if so. */
async function peek<T>(promise: Promise<T>): Promise<{ settled: false } | { settled: true; value: T }> {
  let state: { settled: false } | { settled: true; value: T } = { settled: false };
  void promise.then((value) => (state = { settled: true, value }));
  await immediate();
  return state;
}

test('the first signal stops intake; the second exits with status 1', (t) => {
  const { shutdown, exits, signals } = create(t);
  assert.equal(shutdown.intake.aborted, false);

  process.emit(SIGNAL, SIGNAL);
  assert.equal(shutdown.intake.aborted, true);
  assert.equal(shutdown.intake.reason, SIGNAL);
  assert.deepEqual(exits, []);

  process.emit(SIGNAL, SIGNAL);
  assert.deepEqual(exits, [1]);
  assert.deepEqual(signals, [[SIGNAL, true], [SIGNAL, false]]);
});

test('stop() begins shutdown without a signal, once', (t) => {
  const { shutdown, exits } = create(t);
  shutdown.stop('once finished');
  shutdown.stop('again');
  assert.equal(shutdown.intake.aborted, true);
  assert.equal(shutdown.intake.reason, 'once finished');
  assert.deepEqual(exits, [], 'stop() is not a signal: it never exits the process');
});

test('drain waits for intake to stop before it resolves', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const { shutdown } = create(t);
  const drained = shutdown.drain(Promise.resolve(), 1000);
  assert.deepEqual(await peek(drained), { settled: false });
  shutdown.stop();
  assert.deepEqual(await peek(drained), { settled: true, value: true });
});

test('drain resolves true when the work finishes, even by failing', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  for (const work of [() => Promise.resolve('done'), () => Promise.reject(new Error('failed'))]) {
    const { shutdown } = create(t);
    shutdown.stop();
    assert.deepEqual(await peek(shutdown.drain(work(), 1000)), { settled: true, value: true });
  }
});

test('drain resolves false when the grace period ends before the work', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const { shutdown } = create(t);
  process.emit(SIGNAL, SIGNAL);
  const drained = shutdown.drain(new Promise(() => {}), 1000);
  await immediate();
  t.mock.timers.tick(999);
  assert.deepEqual(await peek(drained), { settled: false });
  t.mock.timers.tick(1);
  assert.deepEqual(await peek(drained), { settled: true, value: false });
});

test('work that finishes within the grace period wins over the timer', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const { shutdown } = create(t);
  let finish = (): void => {};
  const work = new Promise<void>((resolve) => (finish = resolve));
  shutdown.stop();
  const drained = shutdown.drain(work, 1000);
  await immediate();
  t.mock.timers.tick(500);
  finish();
  assert.deepEqual(await peek(drained), { settled: true, value: true });
  t.mock.timers.tick(1000);
  assert.equal(await drained, true);
});

test('a signal listener can unsubscribe', (t) => {
  const { shutdown, signals } = create(t);
  const seen: boolean[] = [];
  const unsubscribe = shutdown.onSignal((_, first) => seen.push(first));
  unsubscribe();
  process.emit(SIGNAL, SIGNAL);
  assert.deepEqual(seen, []);
  assert.deepEqual(signals, [[SIGNAL, true]], 'other listeners still hear it');
});

test('dispose removes the signal listeners', (t) => {
  const before = process.listenerCount(SIGNAL);
  const { shutdown } = create(t, { signals: [SIGNAL, 'SIGCONT'] });
  assert.equal(process.listenerCount(SIGNAL), before + 1);
  shutdown.dispose();
  assert.equal(process.listenerCount(SIGNAL), before);
  assert.equal(process.listenerCount('SIGCONT'), 0);
  process.emit(SIGNAL, SIGNAL);
  assert.equal(shutdown.intake.aborted, false, 'a disposed coordinator no longer reacts to signals');
});
