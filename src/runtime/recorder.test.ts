import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { EventContent } from '../apimachinery/objects.ts';
import { createLogger } from '../util/log.ts';
import { EventRecorder, type EventSink, type RecorderOptions, type Series, type WallClock } from './recorder.ts';

/** Time that moves only when told; sleepers wake in order as it passes them. */
class FakeClock implements WallClock {
  #now = 1_700_000_000_000;
  #sleepers: { at: number; wake: () => void }[] = [];

  now(): number {
    return this.#now;
  }

  sleep(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const sleeper = { at: this.#now + ms, wake: resolve };
      this.#sleepers.push(sleeper);
      signal.addEventListener('abort', () => resolve(), { once: true });
    });
  }

  /** Moves time on by `ms` in 100 ms steps, letting woken code run at each. */
  async advance(ms: number): Promise<void> {
    for (const end = this.#now + ms; this.#now < end;) {
      this.#now = Math.min(end, this.#now + 100);
      const due = this.#sleepers.filter((s) => s.at <= this.#now);
      this.#sleepers = this.#sleepers.filter((s) => s.at > this.#now);
      for (const s of due) s.wake();
      await settle();
    }
  }
}

/** Lets every pending promise reaction run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

interface Write {
  readonly op: 'create' | 'update';
  readonly name: string;
  readonly reason: string;
  readonly count: number;
  readonly at: number;
}

class FakeSink implements EventSink {
  readonly writes: Write[] = [];
  failing = false;
  readonly #clock: WallClock;
  readonly #events: EventContent[] = [];

  constructor(clock: WallClock) {
    this.#clock = clock;
  }

  async create(event: EventContent, series: Series): Promise<string> {
    this.#write('create', event, series);
    return String(this.#events.push(event) - 1);
  }

  async update(handle: string, series: Series): Promise<void> {
    const event = this.#events[Number(handle)];
    assert.ok(event, `no Event ${handle}`);
    this.#write('update', event, series);
  }

  #write(op: Write['op'], event: EventContent, series: Series): void {
    if (this.failing) throw new Error('403 Forbidden');
    this.writes.push({
      op,
      name: event.regarding.name,
      reason: event.reason,
      count: series.count,
      at: this.#clock.now(),
    });
  }
}

const conflict = (name: string, reason = 'LabelConflict'): EventContent => ({
  regarding: { apiVersion: 'v1', kind: 'ConfigMap', namespace: 'ns', name, uid: `uid-${name}` },
  type: 'Warning',
  reason,
  action: 'Labelling',
  note: `label team on ${name} is someone else's`,
});

function setUp(options: Partial<RecorderOptions> = {}) {
  const clock = new FakeClock();
  const sink = new FakeSink(clock);
  const lines: { level: string; msg: string }[] = [];
  const log = createLogger({
    level: 'debug',
    format: 'json',
    write: (line) => lines.push(JSON.parse(line) as { level: string; msg: string }),
  });
  const recorder = new EventRecorder({ sink, clock, log, ...options });
  const stop = new AbortController();
  const running = recorder.run(stop.signal);
  return { clock, sink, lines, recorder, stop, running };
}

test('one Event per object and reason; repeats are counted and written back once per flush interval', async () => {
  const { clock, sink, recorder, stop, running } = setUp({ flushIntervalMs: 10_000 });
  recorder.record(conflict('a'));
  recorder.record(conflict('a', 'InvalidLabelValue'));
  recorder.record(conflict('b'));
  await settle();
  for (let i = 0; i < 4; i++) recorder.record(conflict('a'));
  assert.deepEqual(sink.writes.map((w) => [w.op, w.name, w.reason, w.count]), [
    ['create', 'a', 'LabelConflict', 1],
    ['create', 'a', 'InvalidLabelValue', 1],
    ['create', 'b', 'LabelConflict', 1],
  ]);
  // 'a' seen 4 more times after its Event was written: its count goes out at the next flush.
  await clock.advance(10_000);
  assert.deepEqual(sink.writes.slice(3).map((w) => [w.op, w.name, w.count]), [['update', 'a', 5]]);
  // Seen every second for a minute: one update per flush interval, never a second Event.
  for (let s = 0; s < 60; s++) {
    recorder.record(conflict('a'));
    await clock.advance(1000);
  }
  const updates = sink.writes.filter((w) => w.op === 'update' && w.name === 'a' && w.reason === 'LabelConflict');
  assert.equal(updates.length, 7);
  assert.equal(updates.at(-1)?.count, 65);
  assert.equal(sink.writes.filter((w) => w.op === 'create').length, 3);
  // A quiet flush writes nothing.
  const before = sink.writes.length;
  await clock.advance(30_000);
  assert.equal(sink.writes.length, before);
  stop.abort();
  await running;
});

test('a thousand objects conflicting in a loop: writes stay within the bucket, the queue is bounded, drops are logged at debug', async () => {
  const { clock, sink, lines, recorder, stop, running } = setUp({
    qps: 5,
    burst: 100,
    flushIntervalMs: 10_000,
    maxQueued: 500,
  });
  // Every object reconciled (and conflicting) once a second for two minutes.
  for (let s = 0; s < 120; s++) {
    for (let i = 0; i < 1000; i++) recorder.record(conflict(`cm-${i}`));
    await clock.advance(1000);
  }
  const seconds = 120;
  assert.ok(sink.writes.length <= 100 + 5 * seconds, `${sink.writes.length} writes in ${seconds} s`);
  assert.ok(sink.writes.length >= 5 * seconds, `the budget is used: ${sink.writes.length} writes`);
  // In any 10 s window, no more than the refill (after the initial burst is spent).
  const late = sink.writes.filter((w) => w.at >= clock.now() - 10_000);
  assert.ok(late.length <= 51, `${late.length} writes in the last 10 s`);
  // Never two Events for one object.
  const created = sink.writes.filter((w) => w.op === 'create').map((w) => w.name);
  assert.equal(new Set(created).size, created.length);
  assert.ok(lines.some((l) => l.level === 'debug' && l.msg === 'event dropped: too many pending'));
  assert.ok(!lines.some((l) => l.level !== 'debug'), 'nothing above debug');
  assert.ok(recorder.series <= 1000);
  stop.abort();
  await running;
});

test('a failing sink: record() never throws, one warning then debug, and the series starts over', async () => {
  const { clock, sink, lines, recorder, stop, running } = setUp();
  sink.failing = true;
  recorder.record(conflict('a'));
  recorder.record(conflict('b'));
  await settle();
  assert.deepEqual(lines.map((l) => [l.level, l.msg]), [
    ['warn', 'event not written; labelling goes on (further failures logged at debug)'],
    ['debug', 'event not written'],
  ]);
  assert.equal(recorder.series, 0);
  sink.failing = false;
  recorder.record(conflict('a'));
  await clock.advance(100);
  assert.deepEqual(sink.writes.map((w) => [w.op, w.name, w.count]), [['create', 'a', 1]]);
  stop.abort();
  await running;
});

test('a series quiet for its time to live is forgotten: the next occurrence is a new Event', async () => {
  const { clock, sink, recorder, stop, running } = setUp({ seriesTtlMs: 60_000, flushIntervalMs: 10_000 });
  recorder.record(conflict('a'));
  await clock.advance(70_000);
  assert.equal(recorder.series, 0);
  recorder.record(conflict('a'));
  await settle();
  assert.deepEqual(sink.writes.map((w) => w.op), ['create', 'create']);
  stop.abort();
  await running;
});

test('drain writes pending counts within the rate limit and drops what does not fit in time', async () => {
  const { clock, sink, lines, recorder, stop, running } = setUp({ qps: 1, burst: 2, flushIntervalMs: 60_000 });
  for (const name of ['a', 'b', 'c', 'd', 'e']) recorder.record(conflict(name));
  await settle();
  assert.equal(sink.writes.length, 2);
  stop.abort();
  await running;
  recorder.record(conflict('f'));
  const draining = recorder.drain(2_500);
  await clock.advance(2_500);
  await draining;
  // One token a second for 2.5 s; 'e' does not fit, 'f' came after the stop and is not taken.
  assert.deepEqual(sink.writes.map((w) => w.name), ['a', 'b', 'c', 'd']);
  assert.ok(lines.some((l) => l.msg === 'events dropped at exit'));
});
