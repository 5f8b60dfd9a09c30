import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Counter, Gauge, Histogram, Registry } from './prometheus.ts';

test('the text exposition: HELP and TYPE, then each series with its labels; a metric without labels starts at 0', async () => {
  const registry = new Registry();
  const registers = [registry];
  const requests = new Counter({
    name: 'requests_total',
    help: 'Requests\nmade \\ here',
    labelNames: ['code'],
    registers,
  });
  new Counter({ name: 'restarts_total', help: 'Restarts', registers });
  const depth = new Gauge({ name: 'depth', help: 'Depth', labelNames: ['queue'], registers });
  requests.inc({ code: '200' });
  requests.inc({ code: '200' }, 2);
  requests.inc({ code: '<error>' }, 0);
  depth.set({ queue: 'a "b"\nc\\d' }, 1.5);
  depth.inc({ queue: 'x' }, -2);
  assert.equal(
    await registry.metrics(),
    [
      '# HELP requests_total Requests\\nmade \\\\ here',
      '# TYPE requests_total counter',
      'requests_total{code="200"} 3',
      'requests_total{code="<error>"} 0',
      '',
      '# HELP restarts_total Restarts',
      '# TYPE restarts_total counter',
      'restarts_total 0',
      '',
      '# HELP depth Depth',
      '# TYPE depth gauge',
      'depth{queue="a \\"b\\"\\nc\\\\d"} 1.5',
      'depth{queue="x"} -2',
      '',
    ].join('\n'),
  );
});

test('a histogram writes cumulative buckets up to +Inf, the sum and the count, per series', async () => {
  const registry = new Registry();
  const time = new Histogram({
    name: 'work_seconds',
    help: 'Work',
    labelNames: ['controller'],
    buckets: [1, 0.1, 1e-7],
    registers: [registry],
  });
  for (const value of [0.05, 0.1, 0.5, 3, 1e-8]) time.observe({ controller: 'pods' }, value);
  assert.deepEqual((await registry.metrics()).split('\n').slice(2, -1), [
    'work_seconds_bucket{controller="pods",le="1e-7"} 1',
    'work_seconds_bucket{controller="pods",le="0.1"} 3',
    'work_seconds_bucket{controller="pods",le="1"} 4',
    'work_seconds_bucket{controller="pods",le="+Inf"} 5',
    'work_seconds_sum{controller="pods"} 3.65000001',
    'work_seconds_count{controller="pods"} 5',
  ]);
});

test('remove drops one series, reset every one; collect sets what is read when scraped, awaited', async () => {
  const registry = new Registry();
  const registers = [registry];
  const cached = new Gauge({ name: 'cached', help: 'Cached', labelNames: ['controller'], registers });
  cached.set({ controller: 'a' }, 1);
  cached.set({ controller: 'b' }, 2);
  cached.remove({ controller: 'a' });
  let read = 7;
  new Gauge({
    name: 'read',
    help: 'Read',
    registers,
    async collect() {
      await Promise.resolve();
      this.set(read);
    },
  });
  assert.match(await registry.metrics(), /^cached\{controller="b"\} 2\n[^]*^read 7$/m);
  read = 8;
  cached.reset();
  const text = await registry.metrics();
  assert.doesNotMatch(text, /^cached\{/m);
  assert.match(text, /^read 8$/m);
});

test('a label the metric does not have is an error, once, where the series would be made; a counter never goes down', () => {
  const counter = new Counter({ name: 'c_total', help: 'C', labelNames: ['controller'] });
  assert.throws(() => counter.inc({ controler: 'x' }), /c_total has no label controler: it has controller/);
  assert.throws(() => counter.inc({ controller: 'x' }, -1), /a counter cannot add -1/);
  const registry = new Registry();
  registry.register(counter);
  assert.throws(() => registry.register(counter), /a metric named c_total is registered already/);
});
