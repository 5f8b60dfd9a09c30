import assert from 'node:assert/strict';
import { test } from 'node:test';
import { envName } from './flags.ts';
import { parseOptions, unknownEnv } from './options.ts';
import { parseDuration } from '../util/duration.ts';
import { UsageError } from '../util/usage.ts';

type Env = Readonly<Record<string, string | undefined>>;

const parse = (argv: readonly string[], env: Env = {}) => parseOptions(argv, env, '1.2.3');

test('defaults when nothing is set', async () => {
  assert.deepEqual(await parse([]), {
    command: 'label',
    allKinds: false,
    annotations: undefined,
    output: 'table',
    kinds: undefined,
    excludeKinds: undefined,
    config: undefined,
    labels: undefined,
    namespaces: undefined,
    selector: undefined,
    coverage: false,
    preflight: true,
    as: undefined,
    target: undefined,
    conflicts: undefined,
    protect: undefined,
    kubeconfig: undefined,
    context: undefined,
    fieldManager: 'labeller',
    admissionPolicies: false,
    admissionPoliciesOwner: undefined,
    policyReports: false,
    policyReportsOwner: undefined,
    ignoreFieldManagerGuard: false,
    concurrency: 8,
    requeueAfterMs: 300_000,
    gracePeriodMs: 30_000,
    dryRun: false,
    once: false,
    logLevel: 'info',
    logFormat: 'auto',
    watchTimeoutSeconds: 290,
    events: true,
    metricsBindAddress: undefined,
    healthProbeBindAddress: undefined,
    leaderElect: false,
    shards: false,
    shardGroup: 'labeller',
    shardConfigSkewMs: 120_000,
    leaderElectionNamespace: undefined,
    leaderElectionId: 'labeller',
    leaseDurationMs: 15_000,
    renewDeadlineMs: 10_000,
    retryPeriodMs: 2_000,
    sourcesMemoryKeyFile: undefined,
  });
});

test('envName is LABELLER_ and the option in upper snake case', () => {
  assert.equal(envName('field-manager'), 'LABELLER_FIELD_MANAGER');
  assert.equal(envName('kinds'), 'LABELLER_KINDS');
});

test('every option can come from the environment (former names of options included)', async () => {
  const options = await parse([], {
    LABELLER_KINDS: 'deploy,svc',
    LABELLER_EXCLUDE_KINDS: 'secrets,cm',
    LABELLER_CONFIG: 'kinds.yaml',
    LABELLER_LABEL: 'team=a,tier=web',
    LABELLER_ANNOTATION: 'example.com/runbook=https://r/a,b\nnote=n',
    LABELLER_NAMESPACE: 'shop',
    LABELLER_SELECTOR: 'app=web',
    LABELLER_CONFLICTS: 'skip',
    LABELLER_KUBECONFIG: '/tmp/kubeconfig',
    LABELLER_CONTEXT: 'kind-dev',
    LABELLER_AS: 'system:serviceaccount:ops:labeller',
    LABELLER_FIELD_MANAGER: 'mine',
    LABELLER_IGNORE_FIELD_MANAGER_GUARD: 'true',
    LABELLER_CONCURRENCY: '3',
    LABELLER_REQUEUE_AFTER: '1h',
    LABELLER_GRACE_PERIOD: '10s',
    LABELLER_DRY_RUN: 'true',
    LABELLER_ONCE: '1',
    LABELLER_LOG_LEVEL: 'debug',
    LABELLER_LOG_FORMAT: 'json',
    LABELLER_WATCH_TIMEOUT: '1m',
    LABELLER_EVENTS: 'false',
    LABELLER_HTTP_PORT: '8080',
    LABELLER_LEADER_ELECT: 'true',
    LABELLER_SHARDS: 'off',
    LABELLER_SHARD_GROUP: 'lbl-shards',
    LABELLER_SHARD_CONFIG_SKEW: '30s',
    LABELLER_LEADER_ELECTION_NAMESPACE: 'ops',
    LABELLER_LEADER_ELECTION_ID: 'lbl',
    LABELLER_LEASE_DURATION: '30s',
    LABELLER_RENEW_DEADLINE: '20s',
    LABELLER_RETRY_PERIOD: '4s',
    LABELLER_SOURCES_MEMORY_KEY_FILE: '/var/run/secrets/labeller/sources-memory/key',
  });
  assert.deepEqual(
    options,
    {
      command: 'label',
      allKinds: false,
      output: 'table',
      coverage: false,
      preflight: true,
      as: 'system:serviceaccount:ops:labeller',
      target: undefined,
      kinds: ['deploy', 'svc'],
      excludeKinds: ['secrets', 'cm'],
      config: 'kinds.yaml',
      labels: ['team=a', 'tier=web'],
      annotations: ['example.com/runbook=https://r/a,b', 'note=n'],
      namespaces: ['shop'],
      selector: 'app=web',
      conflicts: 'skip',
      protect: undefined,
      kubeconfig: '/tmp/kubeconfig',
      context: 'kind-dev',
      fieldManager: 'mine',
      admissionPolicies: false,
      admissionPoliciesOwner: undefined,
      policyReports: false,
      policyReportsOwner: undefined,
      ignoreFieldManagerGuard: true,
      concurrency: 3,
      requeueAfterMs: 3_600_000,
      gracePeriodMs: 10_000,
      dryRun: true,
      once: true,
      logLevel: 'debug',
      logFormat: 'json',
      watchTimeoutSeconds: 60,
      events: false,
      metricsBindAddress: { host: '', port: 8080 },
      healthProbeBindAddress: { host: '', port: 8080 },
      leaderElect: true,
      shards: false,
      shardGroup: 'lbl-shards',
      shardConfigSkewMs: 30_000,
      leaderElectionNamespace: 'ops',
      leaderElectionId: 'lbl',
      leaseDurationMs: 30_000,
      renewDeadlineMs: 20_000,
      retryPeriodMs: 4_000,
      sourcesMemoryKeyFile: '/var/run/secrets/labeller/sources-memory/key',
    },
  );
});

test('flags win over the environment; an empty variable counts as unset', async () => {
  const env = {
    LABELLER_CONCURRENCY: '3',
    LABELLER_DRY_RUN: 'true',
    LABELLER_KINDS: 'svc',
    LABELLER_CONFLICTS: 'bogus',
    LABELLER_SELECTOR: '',
  };
  const options = await parse(
    ['--concurrency', '5', '--dry-run=false', '--kinds', 'deploy', '--conflicts', 'force'],
    env,
  );
  assert.equal(options?.concurrency, 5);
  assert.equal(options?.dryRun, false);
  assert.deepEqual(options?.kinds, ['deploy']);
  assert.equal(options?.conflicts, 'force', 'a bad variable that a flag overrides is not an error');
  assert.equal(options?.selector, undefined);
});

test('lists come from comma-separated values and repeated flags, trimmed, without empty items', async () => {
  const cases: Array<[readonly string[], Env, readonly string[] | undefined]> = [
    [['-n', 'a', '--namespace', 'b,c'], {}, ['a', 'b', 'c']],
    [[], { LABELLER_NAMESPACE: ' a , b,,c ' }, ['a', 'b', 'c']],
    [[], { LABELLER_NAMESPACE: ',' }, undefined],
    [['--namespace', 'x'], { LABELLER_NAMESPACE: 'a,b' }, ['x']],
  ];
  for (const [argv, env, namespaces] of cases) {
    assert.deepEqual((await parse(argv, env))?.namespaces, namespaces, JSON.stringify([argv, env]));
  }
  assert.deepEqual((await parse(['--label', 'team=a', '--label', 'tier=web']))?.labels, ['team=a', 'tier=web']);
});

test('booleans from the environment accept 1/true/yes and 0/false/no', async () => {
  const cases: Array<[string, boolean]> = [['1', true], ['TRUE', true], ['yes', true], ['0', false], ['false', false], [
    'No',
    false,
  ]];
  for (const [value, expected] of cases) {
    assert.equal((await parse([], { LABELLER_ONCE: value }))?.once, expected, value);
  }
});

test('--events is on by default; --events=false, --no-events and LABELLER_EVENTS=false turn it off', async () => {
  const cases: Array<[string[], Env, boolean]> = [
    [[], {}, true],
    [['--events=false'], {}, false],
    [['--events', 'false'], {}, false],
    [['--no-events'], {}, false],
    [[], { LABELLER_EVENTS: 'false' }, false],
    [['--events'], { LABELLER_EVENTS: 'false' }, true],
  ];
  for (const [argv, env, expected] of cases) {
    assert.equal((await parse(argv, env))?.events, expected, JSON.stringify([argv, env]));
  }
});

test('parseDuration reads Go-style durations and bare seconds', () => {
  const cases: Array<[string, number | undefined]> = [
    ['30s', 30_000],
    ['5m', 300_000],
    ['1h30m', 5_400_000],
    ['500ms', 500],
    ['1m500ms', 60_500],
    ['1.5s', 1500],
    ['45', 45_000],
    ['0', 0],
    [' 2m ', 120_000],
    ['', undefined],
    ['abc', undefined],
    ['5x', undefined],
    ['1h 30m', undefined],
    ['-5s', undefined],
    ['s', undefined],
    ['1m30', undefined],
  ];
  for (const [text, ms] of cases) assert.equal(parseDuration(text), ms, JSON.stringify(text));
});

test('a bad value is a UsageError naming the flag or variable it came from', async () => {
  const cases: Array<[readonly string[], Env, RegExp]> = [
    [['--concurrency', '0'], {}, /^--concurrency: "0" is not a positive whole number/],
    [[], { LABELLER_CONCURRENCY: '2.5' }, /^LABELLER_CONCURRENCY: "2.5" is not a positive whole number/],
    [['--grace-period', 'soon'], {}, /^--grace-period: "soon" is not a duration/],
    [[], { LABELLER_REQUEUE_AFTER: '5 minutes' }, /^LABELLER_REQUEUE_AFTER: "5 minutes" is not a duration/],
    [['--requeue-after', '600h'], {}, /^--requeue-after: "600h" is longer than the 596h a timer can wait/],
    [[], { LABELLER_CONFLICTS: 'overwrite' }, /^LABELLER_CONFLICTS: "overwrite" is not one of force, skip/],
    [[], { LABELLER_LOG_LEVEL: 'trace' }, /^LABELLER_LOG_LEVEL: "trace" is not one of debug, info, warn, error/],
    [[], { LABELLER_DRY_RUN: 'maybe' }, /^LABELLER_DRY_RUN: "maybe" is not a boolean/],
    [['--log-format', 'xml'], {}, /log-format.*xml/s],
  ];
  for (const [argv, env, message] of cases) {
    await assert.rejects(parse(argv, env), (error: unknown) => {
      assert.ok(error instanceof UsageError, String(error));
      assert.match(error.message, message);
      return true;
    }, JSON.stringify([argv, env]));
  }
});

test('unknown flags and stray arguments are UsageErrors', async () => {
  for (const argv of [['--kind', 'deploy'], ['--bogus'], ['deploy']]) {
    await assert.rejects(parse(argv), UsageError, JSON.stringify(argv));
  }
});

test('unknownEnv reports LABELLER_* typos but not the variables Kubernetes injects for a Service named labeller', () => {
  const env = {
    LABELLER_KIND: 'deploy',
    LABELLER_DRYRUN: 'true',
    LABELLER_KINDS: 'deploy',
    LABELLER_SERVICE_HOST: '10.0.0.1',
    LABELLER_SERVICE_PORT: '8080',
    LABELLER_SERVICE_PORT_METRICS: '8080',
    LABELLER_PORT: 'tcp://10.0.0.1:8080',
    LABELLER_PORT_8080_TCP: 'tcp://10.0.0.1:8080',
    LABELLER_PORT_8080_TCP_ADDR: '10.0.0.1',
    LABELLER_PORTS: 'x',
    HOME: '/root',
  };
  assert.deepEqual(unknownEnv(env), ['LABELLER_KIND', 'LABELLER_DRYRUN', 'LABELLER_PORTS']);
});

test('--help and --version print and return undefined', async (t) => {
  const cases: Array<[string, RegExp]> = [
    ['--help', /--kinds[\s\S]*LABELLER_KINDS/],
    ['--version', /^1\.2\.3\n$/],
  ];
  for (const [flag, printed] of cases) {
    const write = t.mock.method(process.stdout, 'write', () => true);
    try {
      assert.equal(await parse([flag]), undefined, flag);
    } finally {
      write.mock.restore();
    }
    assert.equal(write.mock.callCount(), 1, flag);
    assert.match(String(write.mock.calls[0]?.arguments[0]), printed, flag);
  }
});

test('leader election timings must nest: retry period < renew deadline < lease duration', async () => {
  await assert.rejects(
    parse(['--renew-deadline', '20s']),
    /--leader-elect-retry-period < --leader-elect-renew-deadline < --leader-elect-lease-duration \(got 2s, 20s, 15s\)/,
  );
});

test('--shards auto: the controller, prune and the preflight of status and --once --dry-run; not with --leader-elect; the group names Leases', async () => {
  assert.equal((await parse(['--kinds', 'cm', '--shards', 'auto']))?.shards, true);
  for (const describing of [['prune'], ['status'], ['--once', '--dry-run']]) {
    assert.equal((await parse([...describing, '--kinds', 'cm', '--shards', 'auto']))?.shards, true, describing[0]);
  }
  await assert.rejects(
    parse(['--kinds', 'cm', '--shards', 'auto', '--leader-elect']),
    /--shards auto and --leader-elect/,
  );
  await assert.rejects(parse(['--kinds', 'cm', '--shards', 'auto', '--once']), /not with --once or explain/);
  await assert.rejects(parse(['explain', 'cm/a', '--kinds', 'cm', '--shards', 'auto']), /not with --once or explain/);
  await assert.rejects(parse(['--kinds', 'cm', '--shards', 'some']), /Invalid values/);
  await assert.rejects(
    parse(['--kinds', 'cm', '--shard-group', 'Bad_Name']),
    /--shard-group: "Bad_Name" is not a valid name/,
  );
});

test('--admission-policies-owner: <kind>/<name>, with the controller and --admission-policies only', async () => {
  const owner = 'clusterrole/labeller-admission-policies';
  const args = ['--kinds', 'cm', '--admission-policies', '--admission-policies-owner', owner];
  assert.equal((await parse(args))?.admissionPoliciesOwner, owner);
  await assert.rejects(
    parse(['--kinds', 'cm', '--admission-policies-owner', owner]),
    /--admission-policies-owner works with the controller and --admission-policies/,
  );
  await assert.rejects(
    parse(['prune', ...args]),
    /--admission-policies-owner works with the controller and --admission-policies/,
  );
  await assert.rejects(
    parse(['--kinds', 'cm', '--admission-policies'], { LABELLER_ADMISSION_POLICIES_OWNER: 'labeller' }),
    /LABELLER_ADMISSION_POLICIES_OWNER: "labeller" is not <kind>\/<name>/,
  );
});

test('--admission-policies (LABELLER_ADMISSION_POLICIES): the controller, prune and status; not --once, explain or admission', async () => {
  assert.equal((await parse(['--kinds', 'cm', '--admission-policies']))?.admissionPolicies, true);
  assert.equal((await parse(['--kinds', 'cm'], { LABELLER_ADMISSION_POLICIES: 'true' }))?.admissionPolicies, true);
  for (const command of ['prune', 'status']) {
    assert.equal((await parse([command, '--kinds', 'cm', '--admission-policies']))?.admissionPolicies, true, command);
  }
  for (const other of [['--once'], ['--once', '--dry-run'], ['admission'], ['explain', 'cm/a']]) {
    await assert.rejects(
      parse([...other, '--kinds', 'cm', '--admission-policies']),
      /--admission-policies works with the controller \(labeller without --once\), prune and status/,
      other.join(' '),
    );
  }
});

test('flags are named as Kubernetes components name them; the former names still work', async () => {
  const current = await parse([
    '-l',
    'app=web',
    '--leader-elect-resource-namespace',
    'ops',
    '--leader-elect-resource-name',
    'lbl',
    '--leader-elect-lease-duration',
    '30s',
    '--leader-elect-renew-deadline',
    '20s',
    '--leader-elect-retry-period',
    '4s',
  ]);
  const former = await parse([
    '--selector',
    'app=web',
    '--leader-election-namespace',
    'ops',
    '--leader-election-id',
    'lbl',
    '--lease-duration',
    '30s',
    '--renew-deadline',
    '20s',
    '--retry-period',
    '4s',
  ]);
  const fromEnv = await parse([], {
    LABELLER_SELECTOR: 'app=web',
    LABELLER_LEADER_ELECT_RESOURCE_NAMESPACE: 'ops',
    LABELLER_LEADER_ELECT_RESOURCE_NAME: 'lbl',
    LABELLER_LEADER_ELECT_LEASE_DURATION: '30s',
    LABELLER_LEADER_ELECT_RENEW_DEADLINE: '20s',
    LABELLER_LEADER_ELECT_RETRY_PERIOD: '4s',
  });
  const expected = {
    selector: 'app=web',
    leaderElectionNamespace: 'ops',
    leaderElectionId: 'lbl',
    leaseDurationMs: 30_000,
    renewDeadlineMs: 20_000,
    retryPeriodMs: 4_000,
  };
  for (const options of [current, former, fromEnv]) {
    assert.deepEqual(
      Object.fromEntries(Object.keys(expected).map((k) => [k, options?.[k as keyof typeof expected]])),
      expected,
    );
  }
  assert.deepEqual(
    unknownEnv({
      LABELLER_LEASE_DURATION: '30s',
      LABELLER_LEADER_ELECT_LEASE_DURATION: '30s',
      LABELLER_HTTP_PORT: '1',
    }),
    [],
  );
});

test('bind addresses: host:port, :port for every interface, 0 off; --http-port is the shorthand for both', async () => {
  const cases: Array<[readonly string[], Env, object | undefined, object | undefined]> = [
    [[], {}, undefined, undefined],
    [
      ['--metrics-bind-address', ':8080', '--health-probe-bind-address', '127.0.0.1:8081'],
      {},
      { host: '', port: 8080 },
      { host: '127.0.0.1', port: 8081 },
    ],
    [['--metrics-bind-address', '[::1]:9090'], {}, { host: '::1', port: 9090 }, undefined],
    [['--http-port', '8080'], {}, { host: '', port: 8080 }, { host: '', port: 8080 }],
    [['--http-port', '8080', '--metrics-bind-address', '0'], {}, undefined, { host: '', port: 8080 }],
    [['--http-port', '0'], {}, undefined, undefined],
    [[], { LABELLER_HEALTH_PROBE_BIND_ADDRESS: ':8081' }, undefined, { host: '', port: 8081 }],
  ];
  for (const [argv, env, metrics, probes] of cases) {
    const options = await parse(argv, env);
    assert.deepEqual(
      [options?.metricsBindAddress, options?.healthProbeBindAddress],
      [metrics, probes],
      JSON.stringify([argv, env]),
    );
  }
  for (const bad of ['8080', ':', ':0', ':70000', 'host']) {
    await assert.rejects(
      parse(['--metrics-bind-address', bad]),
      /--metrics-bind-address: ".*" is not an address; use host:port, :port for every interface, or 0 to turn it off/,
      bad,
    );
  }
});

test('--help: the options in sections, with typed values, defaults, variables and examples', async (t) => {
  const write = t.mock.method(process.stdout, 'write', () => true);
  try {
    assert.equal(await parse(['-h']), undefined);
  } finally {
    write.mock.restore();
  }
  const help = String(write.mock.calls[0]?.arguments[0]);
  const sections = [...help.matchAll(/^(\S[^:\n]*):$/gm)].map((m) => m[1]);
  assert.deepEqual(sections, ['Commands', 'What to label', 'Cluster', 'Behaviour', 'Operations', 'Other', 'Examples']);
  assert.match(help, /^ {2}status +per kind/m);
  assert.match(help, /^ {2}prune +remove every label/m);
  assert.match(help, /^ {2}admission +print the config as MutatingAdmissionPolicies/m);
  assert.match(help, /--grace-period <duration> +on SIGTERM[^\n]*\n[^\n]*\(default 30s; LABELLER_GRACE_PERIOD\)/);
  assert.match(help, /--concurrency <n> /);
  assert.match(help, /--http-port <port> /);
  assert.match(help, /-l, --selector <selector> /);
  assert.doesNotMatch(help, /\[string\]|\[array\]/);
  assert.equal(
    [...help.matchAll(/^ {2}labeller /gm)].length + [...help.matchAll(/^ {2}LABELLER_/gm)].length,
    8,
    'eight examples',
  );
  assert.match(help.split('Examples:')[1] ?? '', /^\s+labeller [^\n]*--once --dry-run\n/, 'the safe command first');
});

test('--http-port takes 0 to 65535', async () => {
  await assert.rejects(parse(['--http-port', '70000']), /--http-port: "70000" is not a port number/);
});

test('commands: status and prune before the options; they run once; their own flags only with them', async () => {
  const plain = await parse(['--kinds', 'cm']);
  assert.deepEqual([plain?.command, plain?.once, plain?.allKinds, plain?.output], ['label', false, false, 'table']);
  const status = await parse(['status', '--kinds', 'cm', '-o', 'json']);
  assert.deepEqual([status?.command, status?.once, status?.output], ['status', true, 'json']);
  const prune = await parse(['prune', '--kinds', 'cm', '--all-kinds', '--dry-run']);
  assert.deepEqual([prune?.command, prune?.once, prune?.allKinds, prune?.dryRun], ['prune', true, true, true]);
  await assert.rejects(parse(['--all-kinds']), /--all-kinds works with labeller prune only/);
  await assert.rejects(parse(['status'], { LABELLER_ALL_KINDS: 'true' }), /--all-kinds works with labeller prune only/);
  await assert.rejects(
    parse(['prune', '-o', 'json']),
    /--output works with labeller status, explain and admission only/,
  );
  await assert.rejects(
    parse(['prune', '--all-kinds', '--exclude-kinds', 'secrets']),
    /--exclude-kinds works with the '\*' kind; prune --all-kinds takes every kind/,
  );
  await assert.rejects(
    parse(['deploy']),
    /unexpected argument "deploy": commands are status, prune, explain, admission; options start with --/,
  );
  await assert.rejects(parse(['prune', 'now']), /unexpected argument "now": options start with --/);
  await assert.rejects(
    parse(['status', '-o', 'yaml']),
    /-o(utput)?: "yaml" is not one of table, json for labeller status/,
  );
  const admission = await parse(['admission', '--kinds', 'cm']);
  assert.deepEqual([admission?.command, admission?.once, admission?.output], ['admission', true, 'yaml']);
  assert.equal((await parse(['admission', '-o', 'json']))?.output, 'json');
  await assert.rejects(parse(['admission', '-o', 'table']), /"table" is not one of yaml, json for labeller admission/);
  const explain = await parse(['explain', 'deploy/web', '-n', 'shop', '-o', 'json', '--config', 'kinds.yaml']);
  assert.deepEqual([explain?.command, explain?.target, explain?.namespaces, explain?.output, explain?.once], [
    'explain',
    'deploy/web',
    ['shop'],
    'json',
    true,
  ]);
  await assert.rejects(parse(['explain']), /labeller explain needs the object as <kind>\/<name>/);
  await assert.rejects(parse(['explain', 'web']), /needs the object as <kind>\/<name>.*\(got "web"\)/);
  await assert.rejects(parse(['explain', 'deploy/web', '-n', 'a,b']), /labeller explain takes one namespace/);
});

test('--policy-reports (LABELLER_POLICY_REPORTS): the controller, and status for its preflight; not --once, explain, prune or admission', async () => {
  assert.equal((await parse(['--kinds', 'cm', '--policy-reports']))?.policyReports, true);
  assert.equal((await parse(['--kinds', 'cm'], { LABELLER_POLICY_REPORTS: 'true' }))?.policyReports, true);
  assert.equal((await parse(['status', '--kinds', 'cm', '--policy-reports']))?.policyReports, true);
  for (const other of [['--once'], ['prune'], ['admission'], ['explain', 'cm/a']]) {
    await assert.rejects(
      parse([...other, '--kinds', 'cm', '--policy-reports']),
      /--policy-reports works with the controller \(labeller without --once\), and with status/,
      other.join(' '),
    );
  }
  const owner = 'clusterrole/labeller-policy-reports';
  assert.equal(
    (await parse(['--kinds', 'cm', '--policy-reports', '--policy-reports-owner', owner]))?.policyReportsOwner,
    owner,
  );
  await assert.rejects(
    parse(['--kinds', 'cm', '--policy-reports-owner', owner]),
    /--policy-reports-owner works with the controller and --policy-reports/,
  );
  await assert.rejects(
    parse(['--kinds', 'cm', '--policy-reports'], { LABELLER_POLICY_REPORTS_OWNER: 'labeller' }),
    /LABELLER_POLICY_REPORTS_OWNER: "labeller" is not <kind>\/<name>/,
  );
});
