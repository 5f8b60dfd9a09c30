import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { createLogger, type Level, LEVELS, type LoggerOptions } from './log.ts';

const NOW = Date.parse('2026-03-04T05:06:07.089Z');

function capture(t: TestContext, options: Omit<LoggerOptions, 'write'>) {
  t.mock.timers.enable({ apis: ['Date'], now: NOW });
  const lines: string[] = [];
  return { lines, log: createLogger({ ...options, write: (line) => lines.push(line) }) };
}

test('json: one line per entry with time, level, msg and fields, child fields included', (t) => {
  const { lines, log } = capture(t, { level: 'debug', format: 'json' });
  const child = log.child({ kind: 'Deployment', namespace: 'shop' });
  child.child({ name: 'web' }).info('labels applied', { patch: [{ op: 'add' }], namespace: 'other' });

  const [line = ''] = lines;
  assert.equal(lines.length, 1);
  assert.ok(line.endsWith('}\n') && !line.slice(0, -1).includes('\n'));
  assert.deepEqual(JSON.parse(line), {
    time: '2026-03-04T05:06:07.089Z',
    level: 'info',
    msg: 'labels applied',
    kind: 'Deployment',
    namespace: 'other',
    name: 'web',
    patch: [{ op: 'add' }],
  });
});

test('errors are logged as their message, also nested', (t) => {
  const { lines, log } = capture(t, { level: 'debug', format: 'json' });
  log.error('watch failed', { error: new Error('connection refused'), details: { cause: new TypeError('bad') } });
  const entry = JSON.parse(lines[0] ?? '') as Record<string, unknown>;
  assert.equal(entry['error'], 'connection refused');
  assert.deepEqual(entry['details'], { cause: 'bad' });
});

test('only entries at or above the level are written', (t) => {
  const cases: Array<[Level, Level[]]> = [
    ['debug', ['debug', 'info', 'warn', 'error']],
    ['info', ['info', 'warn', 'error']],
    ['warn', ['warn', 'error']],
    ['error', ['error']],
  ];
  for (const [level, written] of cases) {
    const { lines, log } = capture(t, { level, format: 'json' });
    for (const each of LEVELS) log.child({ c: 1 })[each]('m');
    assert.deepEqual(lines.map((line) => (JSON.parse(line) as { level: string }).level), written, level);
    t.mock.timers.reset();
  }
});

test('text: time of day, padded level, message, then key=value pairs without empty fields', (t) => {
  const { lines, log } = capture(t, { level: 'info', format: 'text' });
  log.child({ namespace: 'shop', skipped: undefined }).warn('label conflict', {
    name: 'web',
    empty: '',
    count: 2,
    error: new Error('409 Conflict'),
  });
  log.info('started');
  assert.deepEqual(lines, [
    '05:06:07.089 WARN  label conflict  namespace=shop name=web count=2 error="409 Conflict"\n',
    '05:06:07.089 INFO  started\n',
  ]);
});
