// Bad input, property-based (fast-check): generated malformed kinds.yaml files and argument lists
// never produce a stack trace, always a clear `labeller: …` error and exit status 2. Most cases
// run in-process against the config loader and the option parser (thousands of inputs, shrunk to
// a minimal one on failure); a bounded number go through the real CLI as a subprocess.
// Needs no cluster: the CLI runs get a kubeconfig whose server nothing listens on, and must stop
// before connecting.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { dump } from 'js-yaml';
import { buildConfig, parseLabelFlag } from '../../src/config/overlay.ts';
import { ConfigError } from '../../src/config/fields.ts';
import { parseOptions } from '../../src/cli/options.ts';
import { UsageError } from '../../src/util/usage.ts';
import { figure } from '../process/figures.ts';
import { fatalMessage, Labeller, type LabellerExit } from '../process/labeller.ts';

const dir = mkdtempSync(join(tmpdir(), 'labeller-faults-fuzz-'));
after(() => rmSync(dir, { recursive: true, force: true }));

// ---- generators -------------------------------------------------------------------------------

const name63 = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,10}[a-z0-9])?$/);
const labelKey = fc.oneof(
  name63,
  fc.tuple(fc.constantFrom('example.com', 'app.kubernetes.io', 'a.b'), name63).map(([p, n]) => `${p}/${n}`),
);
const labelValue = fc.oneof(
  name63,
  fc.constantFrom('{{name}}', '{{namespace}}', 'team-{{kind}}', '{{labels.app}}', ''),
);
const labels = fc.dictionary(labelKey, labelValue, { minKeys: 1, maxKeys: 3 });
const resource = fc.constantFrom(
  'configmaps',
  'deployments',
  'svc',
  'Deployment.apps',
  'deployments.v1.apps',
  'widgets.example.com',
);
const kind = fc.record(
  {
    resource,
    namespaces: fc.uniqueArray(name63, { minLength: 1, maxLength: 2 }),
    selector: fc.constantFrom('app=web', 'tier in (a,b)', '!skip', 'env!=prod'),
    labels,
    conflicts: fc.constantFrom('force', 'skip'),
  },
  { requiredKeys: ['resource'] },
);
/** A valid kinds.yaml document (as an object). */
const validConfig = fc.record({
  labels,
  conflicts: fc.constantFrom('force', 'skip', undefined),
  kinds: fc.uniqueArray(kind, { minLength: 1, maxLength: 3, selector: (k) => k.resource }),
}).map((c) =>
  JSON.parse(JSON.stringify(c)) as {
    labels: Record<string, unknown>;
    kinds: Record<string, unknown>[];
    [k: string]: unknown;
  }
);

const badLabelKey = fc.oneof(
  fc.constantFrom(
    '',
    '-a',
    'a-',
    'a b',
    'a/b/c',
    '/a',
    'a/',
    'ex ample.com/a',
    'a'.repeat(64),
    `${'a'.repeat(254)}/b`,
    'é',
    'a:b',
    'a*',
  ),
  fc.string({ minLength: 1, maxLength: 5 }).map((s) => `${s}!`),
);
const badLabelValue = fc.constantFrom(
  '-x',
  'x-',
  'a b',
  'a'.repeat(64),
  'é',
  'a/b',
  'x!',
  '{{',
  '{{nope}}',
  '{{ name',
  'a}}b{{',
);
const badNamespace = fc.constantFrom('Default', 'kube_system', '-a', 'a'.repeat(64), 'a.b', '');
const badSelector = fc.constantFrom(
  'a in (',
  '!!a',
  '==a',
  'in (a)',
  'a notin',
  ',',
  'a=b,,c=d',
  '=a',
  'a in (b',
  'bad key=x',
);
const wrongType = fc.constantFrom<unknown>(3, true, 1.5, null, [], ['a'], { a: 1 }, 'text');
const identifier = fc.stringMatching(/^[a-zA-Z][a-zA-Z0-9_]{0,8}$/);

type Config = { labels: Record<string, unknown>; kinds: Record<string, unknown>[]; [k: string]: unknown };
type Mutation = { readonly what: string; readonly apply: (c: Config) => Config | string };

/** One change that makes a valid config invalid, and what it did. */
const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  identifier.filter((f) => !['labels', 'conflicts', 'kinds', 'allowProtectedPrefixes'].includes(f)).map((field) => ({
    what: `unknown top-level field ${field}`,
    apply: (c: Config) => ({ ...c, [field]: 'x' }),
  })),
  identifier.filter((f) => !['resource', 'namespaces', 'selector', 'labels', 'conflicts'].includes(f)).map((field) => ({
    what: `unknown kind field ${field}`,
    apply: (c: Config) => ({ ...c, kinds: [{ ...c.kinds[0], [field]: 'x' }, ...c.kinds.slice(1)] }),
  })),
  badLabelKey.map((key) => ({
    what: `bad global label key ${JSON.stringify(key)}`,
    apply: (c: Config) => ({ ...c, labels: { ...c.labels, [key]: 'v' } }),
  })),
  badLabelValue.map((value) => ({
    what: `bad global label value ${JSON.stringify(value)}`,
    apply: (c: Config) => ({ ...c, labels: { ...c.labels, k: value } }),
  })),
  badLabelKey.map((key) => ({
    what: `bad kind label key ${JSON.stringify(key)}`,
    apply: (c: Config) => ({ ...c, kinds: [{ ...c.kinds[0], labels: { [key]: 'v' } }, ...c.kinds.slice(1)] }),
  })),
  badNamespace.map((ns) => ({
    what: `bad namespace ${JSON.stringify(ns)}`,
    apply: (c: Config) => ({ ...c, kinds: [{ ...c.kinds[0], namespaces: [ns] }, ...c.kinds.slice(1)] }),
  })),
  badSelector.map((s) => ({
    what: `bad selector ${JSON.stringify(s)}`,
    apply: (c: Config) => ({ ...c, kinds: [{ ...c.kinds[0], selector: s }, ...c.kinds.slice(1)] }),
  })),
  fc.tuple(fc.constantFrom('labels', 'kinds', 'conflicts'), wrongType).filter(([f, v]) =>
    !(v === null && f !== 'kinds') &&
    !(f === 'labels' && typeof v === 'object' && v !== null && !Array.isArray(v) && Object.keys(v).length > 0 && false)
  ).map(([field, value]) => ({
    what: `top-level ${field}: ${JSON.stringify(value)}`,
    apply: (
      c: Config,
    ) => (field === 'kinds' && value === null
      ? { ...c, kinds: null as unknown as Config['kinds'] }
      : { ...c, [field]: value }),
  })),
  fc.tuple(fc.constantFrom('resource', 'namespaces', 'selector', 'labels', 'conflicts'), wrongType).filter(([f, v]) =>
    v !== null && !(typeof v === 'string' && (f === 'resource' || f === 'selector')) &&
    !(f === 'namespaces' && Array.isArray(v) && v.length > 0)
  ).map(([field, value]) => ({
    what: `kind ${field}: ${JSON.stringify(value)}`,
    apply: (c: Config) => ({ ...c, kinds: [{ ...c.kinds[0], [field]: value }, ...c.kinds.slice(1)] }),
  })),
  fc.constant({ what: 'duplicate kind', apply: (c: Config) => ({ ...c, kinds: [...c.kinds, { ...c.kinds[0] }] }) }),
  fc.constant({ what: 'empty kinds list', apply: (c: Config) => ({ ...c, kinds: [] }) }),
  fc.constant({
    what: 'no kinds at all',
    apply: (c: Config) => {
      const { kinds: _, ...rest } = c;
      return rest as Config;
    },
  }),
  fc.constantFrom('node-restriction.kubernetes.io/zone', 'k8s.io/app').map((key) => ({
    what: `${key} copies the object's label`,
    apply: (c: Config) => ({ ...c, labels: { ...c.labels, [key]: '{{labels.app}}' } }),
  })),
  fc.constant({ what: 'null global label', apply: (c: Config) => ({ ...c, labels: { ...c.labels, k: null } }) }),
  fc.constant({
    what: 'kind drops a global label that does not exist',
    apply: (c: Config) => ({
      ...c,
      kinds: [{ ...c.kinds[0], labels: { 'not-global-zz': null } }, ...c.kinds.slice(1)],
    }),
  }),
  fc.constant({
    what: 'no labels anywhere',
    apply: (c: Config) => ({ kinds: c.kinds.map(({ labels: _, ...k }) => k) }) as Config,
  }),
  fc.constantFrom(
    'resource: [',
    '\tkinds: x',
    'kinds:\n - a\n  b: c',
    '"unclosed',
    'a: b\na: c',
    '? [a\n',
    'kinds: *nope',
    '{',
    '- a\nb: c',
  ).map((junk) => ({ what: `YAML syntax: ${JSON.stringify(junk)}`, apply: () => junk })),
  fc.constant({ what: 'two YAML documents', apply: (c: Config) => `${dump(c)}---\n${dump(c)}` }),
  fc.constantFrom<unknown>('just text', 42, ['a'], true).map((doc) => ({
    what: `document is ${JSON.stringify(doc)}`,
    apply: () => dump(doc),
  })),
);

const text = (doc: Config | string): string => (typeof doc === 'string' ? doc : dump(doc, { skipInvalid: true }));

/** A message for the person running labeller: names the file, no code internals. */
function assertClear(message: string, source: string): void {
  assert.ok(
    message.includes(source) || /no kinds configured|no labels configured/.test(message),
    `the message names the file: ${message}`,
  );
  // The first line, without the quoted input it repeats, shows no code internals.
  const own = (message.split('\n')[0] ?? '').replace(/"(?:[^"\\]|\\.)*"/g, '""');
  assert.doesNotMatch(
    own,
    /undefined|\[object |TypeError|ReferenceError|Cannot read prop/,
    `no internals in: ${message}`,
  );
}

// ---- argument lists ------------------------------------------------------------------------------

const KNOWN_FLAGS = [
  'kinds',
  'config',
  'c',
  'label',
  'namespace',
  'n',
  'selector',
  'conflicts',
  'kubeconfig',
  'context',
  'field-manager',
  'concurrency',
  'requeue-after',
  'grace-period',
  'dry-run',
  'once',
  'log-level',
  'log-format',
  'watch-timeout',
  'http-port',
  'metrics-bind-address',
  'health-probe-bind-address',
  'l',
  'leader-elect',
  'leader-elect-resource-namespace',
  'leader-elect-resource-name',
  'leader-elect-lease-duration',
  'leader-elect-renew-deadline',
  'leader-elect-retry-period',
  'leader-election-namespace',
  'leader-election-id',
  'lease-duration',
  'renew-deadline',
  'retry-period',
  'help',
  'h',
  'version',
];
const validExtra = fc.array(
  fc.constantFrom<string[]>(
    ['--dry-run'],
    ['--concurrency', '3'],
    ['--requeue-after', '10m'],
    ['--namespace', 'default'],
    ['--selector', 'app=web'],
    ['--conflicts', 'skip'],
    ['--log-level', 'debug'],
    ['--grace-period', '5s'],
    ['-n', 'a,b'],
  ),
  { maxLength: 3 },
).map((a) => a.flat());
/** One argument (or pair, or environment variable) that is wrong for sure. */
type BadArg = { readonly what: string; readonly args: string[]; readonly env?: Record<string, string> };
const badArg: fc.Arbitrary<BadArg> = fc.oneof<fc.Arbitrary<BadArg>[]>(
  fc.stringMatching(/^[a-z][a-z-]{2,12}$/).filter((f) =>
    !KNOWN_FLAGS.includes(f) && !f.startsWith('no-') &&
    !KNOWN_FLAGS.some((k) => k.startsWith(f) || f.startsWith(`${k}-`))
  ).map((f) => ({ what: 'unknown flag', args: [`--${f}`] })),
  fc.tuple(
    fc.constantFrom('--requeue-after', '--grace-period', '--watch-timeout', '--lease-duration'),
    fc.constantFrom('5x', '-1s', 'abc', '1h-', 's', '1.5.3s', ''),
  ).map(([f, v]) => ({ what: 'bad duration', args: [f, v] })),
  fc.constantFrom('0', '-1', '1.5', 'abc', '', '1e3x').map((v) => ({ what: 'bad count', args: ['--concurrency', v] })),
  fc.constantFrom('70000', '-1', 'x', '1.5').map((v) => ({ what: 'bad port', args: ['--http-port', v] })),
  fc.tuple(
    fc.constantFrom('--metrics-bind-address', '--health-probe-bind-address'),
    fc.constantFrom('8080', 'host', ':', ':0', ':70000', 'a:b'),
  ).map(([f, v]) => ({ what: 'bad address', args: [f, v] })),
  fc.tuple(
    fc.constantFrom('--conflicts', '--log-level', '--log-format'),
    fc.constantFrom('maybe', 'FORCE', '', 'jsonl'),
  ).map(([f, v]) => ({ what: 'bad choice', args: [f, v] })),
  badLabelKey.map((k) => ({ what: 'bad label key', args: ['--label', `${k}=v`] })),
  badLabelValue.map((v) => ({ what: 'bad label value', args: ['--label', `k=${v}`] })),
  fc.constantFrom('novalue', '=v', '=').map((v) => ({ what: 'label without key=value', args: ['--label', v] })),
  badNamespace.filter((n) => n !== '').map((n) => ({ what: 'bad namespace', args: ['--namespace', n] })),
  badSelector.map((s) => ({ what: 'bad selector', args: ['--selector', s] })),
  fc.stringMatching(/^[a-z]{1,8}$/).map((p) => ({ what: 'positional argument', args: [p] })),
  fc.constant({ what: 'duplicate kind', args: ['--kinds', 'configmaps,configmaps'] }),
  fc.constantFrom('-x', 'a_b', 'con figmaps', '.x').map((k) => ({ what: 'bad resource name', args: ['--kinds', k] })),
  fc.constant({ what: 'missing config file', args: ['--config', '/nonexistent/kinds.yaml'] }),
  fc.constantFrom('maybe', '2', 'yes please').map((v) => ({
    what: 'bad boolean in the environment',
    args: [],
    env: { LABELLER_DRY_RUN: v },
  })),
  fc.constantFrom('0', 'x').map((v) => ({
    what: 'bad count in the environment',
    args: [],
    env: { LABELLER_CONCURRENCY: v },
  })),
);
type BadArgs = { readonly what: string; readonly args: string[]; readonly env: Record<string, string> };
const badArgs: fc.Arbitrary<BadArgs> = fc.tuple(validExtra, badArg, fc.nat(3)).map(([extra, bad, at]) => {
  // A flag wins over the environment: keep the valid flags off the option the bad variable sets.
  const shadowed = Object.keys(bad.env ?? {}).map((v) =>
    `--${v.slice('LABELLER_'.length).toLowerCase().replaceAll('_', '-')}`
  );
  const kept = extra.filter((a, i) => !shadowed.includes(a) && !shadowed.includes(extra[i - 1] ?? ''));
  const base = ['--kinds', 'configmaps', '--label', 'a=b', ...kept];
  // (A positional argument after a list option would be taken as one more list item: put it first.)
  const i = bad.what === 'positional argument' ? 0 : Math.min(at * 2, base.length);
  return { what: bad.what, args: [...base.slice(0, i), ...bad.args, ...base.slice(i)], env: bad.env ?? {} };
});

/** Each CLI run costs a Node start (1–2 s of CPU): bounded so the file stays near a minute. */
const CLI_RUNS = Number(process.env['FAULTS_CLI_RUNS'] ?? 25);

// ---- the CLI ---------------------------------------------------------------------------------------

let kubeconfig = '';
before(async () => {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'c', cluster: { server: `https://127.0.0.1:${port}`, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'u', user: { token: 'x' } }],
      contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'c',
    }),
  );
});

/** The CLI with `args` as they are (the text of its fatal line is what is checked), killed after 20 s. */
async function cli(args: readonly string[], env: Record<string, string> = {}): Promise<LabellerExit> {
  const labeller = new Labeller(['--kubeconfig', kubeconfig, ...args], { raw: true, env });
  const timer = setTimeout(() => labeller.kill(), 20_000);
  try {
    return await labeller.exited;
  } finally {
    clearTimeout(timer);
  }
}

/** Runs `items` through `run`, `width` at a time. */
async function pool<T>(items: readonly T[], width: number, run: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < items.length) await run(items[next++]!);
  }));
}

function assertUsageExit(exit: { code: number | null; stderr: string }, what: string): void {
  const detail = `${what}\n${exit.stderr}`;
  assert.doesNotMatch(exit.stderr, /^\s+at /m, `no stack trace: ${detail}`);
  assert.equal(exit.code, 2, `exit status 2: ${detail}`);
  const lines = exit.stderr.trim().split('\n');
  assert.match(fatalMessage(exit.stderr) ?? '', /^\S/, `a fatal line with a message: ${detail}`);
  assert.ok(!/cannot reach the API server/.test(exit.stderr), `stopped before connecting: ${detail}`);
  assert.ok(lines.length <= 12, `a short message: ${detail}`);
}

describe('bad input, property-based', () => {
  test('malformed kinds.yaml, in-process: always a ConfigError that names the file (2000 cases)', () => {
    fc.assert(
      fc.property(validConfig, mutation, (config, m) => {
        const doc = text(m.apply(config));
        try {
          buildConfig({ file: { text: doc, source: 'kinds.yaml' } });
        } catch (error) {
          assert.ok(error instanceof ConfigError, `${m.what}: ${String(error)}\n${doc}`);
          assertClear(error.message, 'kinds.yaml');
          return;
        }
        assert.fail(`accepted a malformed config (${m.what}):\n${doc}`);
      }),
      { numRuns: 2000 },
    );
  });

  test('arbitrary YAML and text, in-process: a Config or a ConfigError, nothing else (2000 cases)', () => {
    const anyDoc = fc.oneof(
      fc.string({ maxLength: 200 }),
      fc.string({ unit: 'binary', maxLength: 100 }),
      fc.anything({ maxDepth: 4 }).map((v) => dump(v, { skipInvalid: true })),
      fc.record({
        labels: fc.anything({ maxDepth: 2 }),
        kinds: fc.anything({ maxDepth: 3 }),
        conflicts: fc.anything({ maxDepth: 1 }),
      }, { requiredKeys: [] }).map((v) => dump(v, { skipInvalid: true })),
      fc.record({
        labels: fc.dictionary(fc.string({ maxLength: 70 }), fc.string({ maxLength: 70 })),
        kinds: fc.array(
          fc.record({
            resource: fc.string({ maxLength: 20 }),
            selector: fc.string({ maxLength: 20 }),
            namespaces: fc.array(fc.string({ maxLength: 10 })),
          }, { requiredKeys: [] }),
          { maxLength: 3 },
        ),
      }).map((v) => dump(v)),
    );
    fc.assert(
      fc.property(anyDoc, (doc) => {
        try {
          buildConfig({ file: { text: doc, source: 'kinds.yaml' } });
        } catch (error) {
          assert.ok(error instanceof ConfigError, `${String(error)}\n${JSON.stringify(doc)}`);
          assertClear(error.message, 'kinds.yaml');
        }
      }),
      { numRuns: 2000 },
    );
  });

  test('malformed argument lists, in-process: always a UsageError or ConfigError (1000 cases)', async () => {
    const write = process.stdout.write.bind(process.stdout);
    await fc.assert(
      fc.asyncProperty(badArgs, async ({ what, args, env }) => {
        try {
          const options = await parseOptions(args, env, '0.0.0');
          assert.ok(options, `${what}: ${args.join(' ')} printed help`);
          buildConfig({
            kinds: options.kinds,
            labels: options.labels === undefined ? undefined : Object.fromEntries(options.labels.map(parseLabelFlag)),
            namespaces: options.namespaces,
            selector: options.selector,
            conflicts: options.conflicts,
            ...(options.config ? { file: { text: 'x', source: options.config } } : {}),
          });
        } catch (error) {
          assert.ok(
            error instanceof UsageError || error instanceof ConfigError,
            `${what}: ${JSON.stringify(args)} ${JSON.stringify(env)}: ${String(error)}`,
          );
          assert.doesNotMatch(error.message, /undefined|\[object |NaN/, `${what}: ${error.message}`);
          return;
        } finally {
          process.stdout.write = write;
        }
        // --config is read by cli.ts, not here: a missing file is the CLI test's to catch.
        if (!args.includes('/nonexistent/kinds.yaml')) {
          assert.fail(`${what}: accepted ${JSON.stringify(args)} ${JSON.stringify(env)}`);
        }
      }),
      { numRuns: 1000 },
    );
  });

  test(`through the real CLI: ${CLI_RUNS} malformed kinds.yaml files and ${CLI_RUNS} malformed argument lists exit 2 with a clear message`, async (t) => {
    const configs = fc.sample(fc.tuple(validConfig, mutation), {
      numRuns: CLI_RUNS,
      seed: Number(process.env['FAULTS_SEED'] ?? Date.now() % 100000),
    });
    const argLists = fc.sample(badArgs, {
      numRuns: CLI_RUNS,
      seed: Number(process.env['FAULTS_SEED'] ?? Date.now() % 100000) + 1,
    });
    const failures: string[] = [];
    const cases = [
      ...configs.map(([config, m], i) => async () => {
        const file = join(dir, `kinds-${i}.yaml`);
        writeFileSync(file, text(m.apply(config)));
        const exit = await cli(['--config', file]);
        try {
          assertUsageExit(exit, `${m.what} (${file})`);
          assert.match(exit.stderr, /kinds-\d+\.yaml|no kinds configured|no labels configured/);
        } catch (error) {
          failures.push(String(error));
        }
      }),
      ...argLists.map(({ what, args, env }) => async () => {
        const exit = await cli(args, env);
        try {
          assertUsageExit(exit, `${what}: ${JSON.stringify(args)} ${JSON.stringify(env)}`);
        } catch (error) {
          failures.push(String(error));
        }
      }),
    ];
    const started = Date.now();
    await pool(cases, 3, (run) => run());
    figure(
      t,
      `bad input: ${cases.length} CLI runs in ${
        ((Date.now() - started) / 1000).toFixed(0)
      } s, ${failures.length} failures; in-process 2000 + 2000 configs, 1000 argument lists`,
    );
    assert.deepEqual(failures.slice(0, 5), []);
  });
});
