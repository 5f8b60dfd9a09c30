import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import type { ConfigInput } from './overlay.ts';
import type { KindConfig } from './model.ts';
import { buildConfig, parseAnnotationFlag, parseLabelFlag } from './overlay.ts';
import { parseConfig } from './parse.ts';
import { ConfigError } from './fields.ts';
import type { TemplateContext } from './template.ts';

const file = (text: string) => ({ text, source: 'kinds.yaml' });

/** The effective labels of a kind as key → template source. */
const labelSources = (kind: KindConfig | undefined) =>
  Object.fromEntries([...(kind?.labels ?? [])].map(([key, template]) => [key, template.source]));

function rejects(input: ConfigInput, message: string): void {
  assert.throws(() => buildConfig(input), (error: unknown) => {
    assert.ok(error instanceof ConfigError, `expected a ConfigError, got ${String(error)}`);
    assert.equal(error.name, 'ConfigError');
    assert.equal(error.message, message);
    return true;
  });
}

const SAMPLE = `
labels:
  app.kubernetes.io/managed-by: labeller
  team: platform
conflicts: skip
kinds:
  - resource: deployments
  - resource: services
    namespaces: [default, web]
    selector: "app in (web)"
    labels:
      tier: frontend
      team: null
    conflicts: force
`;

test('the example kinds.yaml at the repository root loads', () => {
  const source = new URL('../../kinds.yaml', import.meta.url);
  const config = buildConfig({ file: { text: readFileSync(source, 'utf8'), source: 'kinds.yaml' } });
  assert.deepEqual(
    config.kinds.map((kind) => kind.resource),
    ['deployments', 'services', 'configmaps'],
  );
  const [deployments, services, configmaps] = config.kinds;
  assert.deepEqual(labelSources(deployments), {
    'app.kubernetes.io/managed-by': 'labeller',
    'example.com/namespace': '{{namespace}}',
    'example.com/app': '{{labels.app}}',
  });
  assert.deepEqual(services?.namespaces, ['default']);
  assert.equal(services?.selector?.toString(), 'app in (api,web)');
  assert.equal(services?.conflicts, 'skip');
  assert.deepEqual(labelSources(configmaps), { 'app.kubernetes.io/managed-by': 'labeller' });
  assert.equal(configmaps?.conflicts, 'force');
});

test('a kind merges its labels over the global ones and inherits the global settings', () => {
  const { kinds } = buildConfig({ file: file(SAMPLE) });
  const [deployments, services] = kinds;
  assert.equal(kinds.length, 2);
  assert.deepEqual(labelSources(deployments), { 'app.kubernetes.io/managed-by': 'labeller', team: 'platform' });
  assert.deepEqual(deployments?.namespaces, []);
  assert.equal(deployments?.selector, undefined);
  assert.equal(deployments?.conflicts, 'skip');

  assert.deepEqual(labelSources(services), { 'app.kubernetes.io/managed-by': 'labeller', tier: 'frontend' });
  assert.deepEqual(services?.namespaces, ['default', 'web']);
  assert.equal(services?.selector?.toString(), 'app in (web)');
  assert.equal(services?.conflicts, 'force');
});

test('templates compile at load and render per object', () => {
  const { kinds } = buildConfig({
    file: file(
      'labels:\n  example.com/owner: "{{annotations.example.com/owner}}-{{namespace}}"\nkinds:\n  - resource: pods\n',
    ),
  });
  const context: TemplateContext = {
    name: 'p',
    namespace: 'shop',
    kind: 'Pod',
    resource: 'pods',
    group: '',
    apiVersion: 'v1',
    uid: 'u',
    labels: {},
    annotations: { 'example.com/owner': 'alice' },
  };
  assert.equal(kinds[0]?.labels.get('example.com/owner')?.render(context), 'alice-shop');
});

test('defaults apply when neither the file nor the flags set a value', () => {
  const { kinds } = buildConfig({ kinds: ['deployments'], labels: { tier: 'web' } });
  assert.deepEqual(kinds, [
    {
      where: '--kinds "deployments"',
      resource: 'deployments',
      namespaces: [],
      selector: undefined,
      labels: kinds[0]?.labels,
      annotations: new Map(),
      conflicts: 'force',
    },
  ]);
  assert.deepEqual(labelSources(kinds[0]), { tier: 'web' });
});

test('flags override the global settings; a kind keeps its own', () => {
  const { kinds } = buildConfig({
    file: file(SAMPLE),
    labels: { team: 'payments', extra: 'yes' },
    namespaces: ['prod'],
    selector: 'app',
    conflicts: 'force',
  });
  const [deployments, services] = kinds;
  assert.deepEqual(labelSources(deployments), {
    'app.kubernetes.io/managed-by': 'labeller',
    team: 'payments',
    extra: 'yes',
  });
  assert.deepEqual(deployments?.namespaces, ['prod']);
  assert.equal(deployments?.selector?.toString(), 'app');
  assert.equal(deployments?.conflicts, 'force');
  // services sets its own namespaces, selector and conflicts, and drops "team".
  assert.deepEqual(labelSources(services), {
    'app.kubernetes.io/managed-by': 'labeller',
    tier: 'frontend',
    extra: 'yes',
  });
  assert.deepEqual(services?.namespaces, ['default', 'web']);
  assert.equal(services?.selector?.toString(), 'app in (web)');
  assert.equal(buildConfig({ file: file(SAMPLE), conflicts: 'force' }).kinds[0]?.conflicts, 'force');
});

test('--kinds replaces the file kinds but keeps the settings of kinds named in both', () => {
  const { kinds } = buildConfig({ file: file(SAMPLE), kinds: ['configmaps', 'services'] });
  assert.deepEqual(
    kinds.map((kind) => kind.resource),
    ['configmaps', 'services'],
  );
  assert.deepEqual(kinds[0]?.namespaces, []);
  assert.deepEqual(labelSources(kinds[0]), { 'app.kubernetes.io/managed-by': 'labeller', team: 'platform' });
  assert.deepEqual(kinds[1]?.namespaces, ['default', 'web']);
  assert.deepEqual(labelSources(kinds[1]), { 'app.kubernetes.io/managed-by': 'labeller', tier: 'frontend' });
});

test('a file may leave the kinds to --kinds', () => {
  const { kinds } = buildConfig({ file: file('labels:\n  a: b\n'), kinds: ['secrets'] });
  assert.deepEqual(labelSources(kinds[0]), { a: 'b' });
});

test('nothing to do is an error', () => {
  rejects({ labels: { a: 'b' } }, 'no kinds configured: pass --kinds deployments,services or --config kinds.yaml');
  rejects(
    { file: file('# empty\n'), labels: { a: 'b' } },
    'no kinds configured: pass --kinds deployments,services or add "kinds:" to kinds.yaml',
  );
  rejects(
    { kinds: ['deployments'] },
    'no labels configured: pass --label app.kubernetes.io/managed-by=labeller or --config kinds.yaml',
  );
  rejects(
    { file: file('kinds:\n  - resource: deployments\n') },
    'no labels configured: pass --label app.kubernetes.io/managed-by=labeller or add "labels:" to kinds.yaml',
  );
  rejects(
    { file: file('kinds:\n  - resource: deployments\n    labels: {a: b}\n'), kinds: ['deployments', 'secrets'] },
    '--kinds "secrets": no labels or annotations to apply: give this kind labels of its own or keep a global one',
  );
  rejects(
    { file: file('labels: {a: b}\nkinds:\n  - resource: pods\n  - resource: secrets\n    labels: {a: null}\n') },
    'kinds.yaml: kinds[1]: no labels or annotations to apply: give this kind labels of its own or keep a global one',
  );
});

test('file errors name the source and the field path', () => {
  const kind = (body: string) => file(`labels: {a: b}\nkinds:\n  - resource: pods\n  - ${body}\n`);
  const cases: Array<[ConfigInput['file'], string]> = [
    [
      kind('resource: x\n    labels: {"bad key": v}'),
      `kinds.yaml: kinds[1].labels["bad key"]: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. "MyName", "my.name", "123-abc")`,
    ],
    [kind('namespaces: [default]'), 'kinds.yaml: kinds[1].resource: required, e.g. "deployments"'],
    [
      kind('resource: x\n    namespace: default'),
      'kinds.yaml: kinds[1]: unknown field "namespace" (did you mean "namespaces"?)',
    ],
    [
      kind('resource: x\n    replicas: 3'),
      'kinds.yaml: kinds[1]: unknown field "replicas": use one of resource, namespaces, selector, labels, annotations, conflicts, protect',
    ],
    [file('kind:\n  - resource: pods\n'), 'kinds.yaml: unknown field "kind" (did you mean "kinds"?)'],
    [
      kind('resource: pods'),
      'kinds.yaml: kinds[1].resource: "pods" is already configured at kinds[0]: merge the two entries',
    ],
    [
      kind('resource: apps/v1/deployments'),
      'kinds.yaml: kinds[1].resource: "apps/v1/deployments" is not a kubectl-style resource name: write e.g. "deployments", "deployments.apps" or "Deployment.v1.apps"',
    ],
    [
      kind('resource: x\n    namespaces: [default, Prod]'),
      'kinds.yaml: kinds[1].namespaces[1]: "Prod" is not a valid namespace name: use a lowercase DNS-1123 label of at most 63 characters (e.g. "kube-system")',
    ],
    [
      kind('resource: x\n    namespaces: [a, a]'),
      'kinds.yaml: kinds[1].namespaces[1]: "a" is listed twice: list each namespace once',
    ],
    [
      kind('resource: x\n    namespaces: []'),
      'kinds.yaml: kinds[1].namespaces: empty list: list namespaces, or remove the field for all namespaces',
    ],
    [
      kind('resource: x\n    namespaces: default'),
      'kinds.yaml: kinds[1].namespaces: expected a list of namespace names, e.g. [default], got the string "default"',
    ],
    [
      kind('resource: x\n    selector: "tier in (a"'),
      'kinds.yaml: kinds[1].selector: term "tier in (a": missing ")" at the end of the value list, e.g. "tier in (a, b)"',
    ],
    [
      kind('resource: x\n    conflicts: forced'),
      'kinds.yaml: kinds[1].conflicts: must be "force" or "skip", got the string "forced"',
    ],
    [
      kind('resource: x\n    labels: {replicas: 3}'),
      'kinds.yaml: kinds[1].labels["replicas"]: expected a string, got the number 3: put it in quotes',
    ],
    [
      kind('resource: x\n    labels: {tier: "-web"}'),
      `kinds.yaml: kinds[1].labels["tier"]: value "-web" must be empty or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. "MyValue", "my_value", "12345")`,
    ],
    [
      kind('resource: x\n    labels: {tier: "{{nmae}}"}'),
      'kinds.yaml: kinds[1].labels["tier"]: template "{{nmae}}": unknown variable "nmae" (did you mean "name"?); use one of name, namespace, kind, resource, group, apiVersion, uid, labels.<key>, annotations.<key>, spec.<field>, status.<field>, namespace.labels.<key>, namespace.annotations.<key>, owner.kind, owner.name, owner.labels.<key>, owner.annotations.<key>, root.kind, root.name, root.labels.<key>, root.annotations.<key>, <reference>.name, <reference>.labels.<key>, <reference>.annotations.<key> (references: node, serviceAccount, claim, volume, scaler, mountedBy)',
    ],
    [
      kind('resource: x\n    labels: {team: "{{namespace.label.team}}"}'),
      'kinds.yaml: kinds[1].labels["team"]: template "{{namespace.label.team}}": unknown variable "namespace.label.team" (did you mean "namespace.labels.team"?); use one of name, namespace, kind, resource, group, apiVersion, uid, labels.<key>, annotations.<key>, spec.<field>, status.<field>, namespace.labels.<key>, namespace.annotations.<key>, owner.kind, owner.name, owner.labels.<key>, owner.annotations.<key>, root.kind, root.name, root.labels.<key>, root.annotations.<key>, <reference>.name, <reference>.labels.<key>, <reference>.annotations.<key> (references: node, serviceAccount, claim, volume, scaler, mountedBy)',
    ],
    [
      kind('resource: x\n    labels: {team: "{{owner.labels.team | default none}}"}'),
      'kinds.yaml: kinds[1].labels["team"]: template "{{owner.labels.team | default none}}": unknown filter "| default none": write "{{owner.labels.team | default \\"<value>\\"}}" (one default, a double-quoted value)',
    ],
    [
      kind('resource: x\n    labels: {zone: null}'),
      'kinds.yaml: kinds[1].labels["zone"]: null drops a global label, but there is no global label "zone": remove this entry',
    ],
    [
      kind('resource: x\n    labels: [a]'),
      'kinds.yaml: kinds[1].labels: expected a mapping of label keys to values, e.g. "tier: backend", got a list',
    ],
    [
      file('labels:\n  a: null\nkinds: [{resource: x}]\n'),
      `kinds.yaml: labels["a"]: null drops a global label, so it belongs in a kind's labels: give a value here or remove the entry`,
    ],
    [
      file('labels: {a: b}\nkinds: [deployments]\n'),
      'kinds.yaml: kinds[0]: expected a mapping such as "resource: deployments", got the string "deployments"',
    ],
    [
      file('labels: {a: b}\nkinds: []\n'),
      'kinds.yaml: kinds: empty list: add an entry such as "- resource: deployments"',
    ],
    [
      file('labels: {a: b}\nkinds:\n  resource: x\n'),
      'kinds.yaml: kinds: expected a list of kinds, e.g. "- resource: deployments", got a mapping',
    ],
    [file('- resource: x\n'), 'kinds.yaml: expected a mapping with "labels:" and "kinds:", got a list'],
    [file('conflicts: true\n'), 'kinds.yaml: conflicts: must be "force" or "skip", got the boolean true'],
    [
      file('labels: {a: b}\n---\nkinds: [{resource: x}]\n'),
      'kinds.yaml: expected one YAML document, found 2: merge them and remove the "---" separators',
    ],
  ];
  for (const [input, message] of cases) rejects({ file: input }, message);
});

test('YAML syntax errors carry the 1-based line and column', () => {
  assert.throws(
    () => parseConfig('labels:\n  a: b\nkinds:\n  - resource: x\n    labels: a: b\n', 'kinds.yaml'),
    (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      const [first, ...snippet] = error.message.split('\n');
      assert.equal(first, 'kinds.yaml:5:14: YAML syntax error: bad indentation of a mapping entry');
      assert.ok(snippet.some((line) => line.includes('labels: a: b')), error.message);
      return true;
    },
  );
  assert.throws(() => parseConfig('a: 1\na: 2\n', 'kinds.yaml'), {
    message: /^kinds\.yaml:2:1: YAML syntax error: duplicated mapping key\n/,
  });
});

test('flag errors name the flag', () => {
  const labels = { a: 'b' };
  rejects({ kinds: ['pods', 'pods'], labels }, '--kinds: "pods" is listed twice: list each kind once');
  rejects(
    { kinds: ['pods/'], labels },
    '--kinds: "pods/" is not a kubectl-style resource name: write e.g. "deployments", "deployments.apps" or "Deployment.v1.apps"',
  );
  rejects(
    { kinds: ['pods'], labels: { 'Foo_bar/x': 'y' } },
    '--label "Foo_bar/x=y": prefix "Foo_bar" must be a lowercase DNS-1123 subdomain (e.g. "example.com")',
  );
  rejects(
    { kinds: ['pods'], labels: { x: 'a b' } },
    `--label "x=a b": value "a b" must be empty or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. "MyValue", "my_value", "12345")`,
  );
  rejects(
    { kinds: ['pods'], labels, namespaces: ['kube_system'] },
    '--namespace: "kube_system" is not a valid namespace name: use a lowercase DNS-1123 label of at most 63 characters (e.g. "kube-system")',
  );
  rejects(
    { kinds: ['pods'], labels, selector: 'app=' + 'x'.repeat(64) },
    `--selector: term "app=${'x'.repeat(64)}": value must be 63 characters or less (got 64)`,
  );
});

test('parseLabelFlag splits at the first "="', () => {
  assert.deepEqual(parseLabelFlag('tier=backend'), ['tier', 'backend']);
  assert.deepEqual(parseLabelFlag('example.com/name={{name}}'), ['example.com/name', '{{name}}']);
  assert.deepEqual(parseLabelFlag('empty='), ['empty', '']);
  for (const flag of ['foo', '=bar']) {
    assert.throws(() => parseLabelFlag(flag), {
      name: 'ConfigError',
      message: `--label ${JSON.stringify(flag)}: expected key=value, e.g. --label tier=backend`,
    });
  }
});

test("templates may not copy the object's labels or annotations into kubernetes.io or k8s.io keys unless the file allows it", () => {
  const refusal = (where: string, value: string, domain: string, optIn: string) =>
    `${where}: ${
      JSON.stringify(value)
    } copies the object's labels, annotations or fields into a key under ${domain}, which admission may forbid the object's writers to set; ` +
    `labeller would set it for them with its own rights. Use a constant or a key outside ${domain}, or set "allowProtectedPrefixes: true" ${optIn} if whoever may write these objects may set this label too`;
  rejects(
    { file: file('labels:\n  node-restriction.kubernetes.io/zone: "{{labels.zone}}"\nkinds: [{resource: nodes}]\n') },
    refusal(
      'kinds.yaml: labels["node-restriction.kubernetes.io/zone"]',
      '{{labels.zone}}',
      'kubernetes.io',
      'at the top of kinds.yaml',
    ),
  );
  rejects(
    {
      file: file(
        'kinds:\n  - resource: pods\n    labels:\n      k8s.io/owner: "team-{{annotations.example.com/owner}}"\n',
      ),
    },
    refusal(
      'kinds.yaml: kinds[0].labels["k8s.io/owner"]',
      'team-{{annotations.example.com/owner}}',
      'k8s.io',
      'at the top of kinds.yaml',
    ),
  );
  rejects(
    { kinds: ['pods'], labels: { 'app.kubernetes.io/name': '{{labels.app}}' } },
    refusal(
      '--label "app.kubernetes.io/name={{labels.app}}"',
      '{{labels.app}}',
      'kubernetes.io',
      'in the --config file',
    ),
  );

  // Constants and the object's identity are not the writer's choice of label; other prefixes are not reserved.
  const allowed = {
    'app.kubernetes.io/managed-by': 'labeller',
    'app.kubernetes.io/instance': '{{name}}',
    'example.com/app': '{{labels.app}}',
    'notkubernetes.io/x': '{{labels.app}}',
    app: '{{labels.app}}',
  };
  assert.doesNotThrow(() => buildConfig({ kinds: ['pods'], labels: allowed }));

  const optedIn = buildConfig({
    file: file(
      'allowProtectedPrefixes: true\nlabels:\n  node-restriction.kubernetes.io/zone: "{{labels.zone}}"\nkinds: [{resource: nodes}]\n',
    ),
    labels: { 'k8s.io/app': '{{labels.app}}' },
  });
  assert.deepEqual(labelSources(optedIn.kinds[0]), {
    'node-restriction.kubernetes.io/zone': '{{labels.zone}}',
    'k8s.io/app': '{{labels.app}}',
  });
  rejects(
    { file: file('allowProtectedPrefixes: yes please\nlabels: {a: b}\nkinds: [{resource: x}]\n') },
    'kinds.yaml: allowProtectedPrefixes: must be true or false, got the string "yes please"',
  );
});

test('annotations: global and per kind with the same templates and merge rules, from the file and --annotation', () => {
  const { kinds } = buildConfig({
    file: file(`
annotations:
  example.com/runbook: "https://runbooks.example.com/{{namespace}}/{{name}}"
  example.com/Contact: platform@example.com
kinds:
  - resource: deployments
    annotations:
      example.com/Contact: null
      note: "a long note, with commas, and: colons"
  - resource: services
`),
    annotations: { 'example.com/tier': 'web' },
  });
  const sources = (kind: KindConfig | undefined) =>
    Object.fromEntries([...(kind?.annotations ?? [])].map(([key, template]) => [key, template.source]));
  assert.deepEqual(sources(kinds[0]), {
    'example.com/runbook': 'https://runbooks.example.com/{{namespace}}/{{name}}',
    'example.com/tier': 'web',
    note: 'a long note, with commas, and: colons',
  });
  assert.deepEqual(Object.keys(sources(kinds[1])), ['example.com/runbook', 'example.com/Contact', 'example.com/tier']);
  assert.equal(kinds[0]?.labels.size, 0, 'annotations alone are something to apply');
  assert.deepEqual(parseAnnotationFlag('example.com/link=https://x/?a=b,c'), ['example.com/link', 'https://x/?a=b,c']);
});

test('annotations: key syntax, null without a global one, protected prefixes and the 256 KiB limit are checked', () => {
  rejects(
    { file: file('annotations: {"bad key": x}\nkinds: [{resource: cm}]') },
    'kinds.yaml: annotations["bad key"]: name part must consist of alphanumeric characters, \'-\', \'_\' or \'.\', and must start and end with an alphanumeric character (e.g. "MyName", "my.name", "123-abc")',
  );
  rejects(
    { file: file('labels: {a: b}\nkinds: [{resource: cm, annotations: {x: null}}]') },
    'kinds.yaml: kinds[0].annotations["x"]: null drops a global annotation, but there is no global annotation "x": remove this entry',
  );
  rejects(
    { file: file('kinds: [{resource: cm, annotations: {"example.kubernetes.io/x": "{{labels.a}}"}}]') },
    'kinds.yaml: kinds[0].annotations["example.kubernetes.io/x"]: "{{labels.a}}" copies the object\'s labels, annotations or fields into a key under kubernetes.io, which admission may forbid the object\'s writers to set; labeller would set it for them with its own rights. Use a constant or a key outside kubernetes.io, or set "allowProtectedPrefixes: true" at the top of kinds.yaml if whoever may write these objects may set this annotation too',
  );
  rejects(
    { kinds: ['cm'], annotations: { big: 'x'.repeat(256 * 1024) } },
    '--kinds "cm".annotations: the annotations come to 262147 bytes, more than the 262144 bytes the API server allows on one object: shorten them',
  );
});

test('coverage.maxLabels: a whole number kept for status; anything else names the field', () => {
  const config = buildConfig({ file: file(`${SAMPLE}coverage: {maxLabels: 50}\n`) });
  assert.deepEqual(config.coverage, { maxLabels: 50 });
  assert.equal(buildConfig({ file: file(SAMPLE) }).coverage, undefined);
  rejects(
    { file: file(`${SAMPLE}coverage: {maxLabels: 0}\n`) },
    'kinds.yaml: coverage.maxLabels: must be a whole number of labels, e.g. 50 (AWS split cost allocation imports 50), got the number 0',
  );
  rejects(
    { file: file(`${SAMPLE}coverage: {max: 50}\n`) },
    'kinds.yaml: coverage: unknown field "max": use one of maxLabels',
  );
});

test('protect: a mode for every key, or keys and identities; an entry overrides it or turns it off; --protect overrides the mode', () => {
  const config = buildConfig({
    file: file(`
labels: {team: payments, tier: web}
annotations: {example.com/cc: "1"}
protect:
  mode: deny
  keys: [team, example.com/cc]
  allow: [system:serviceaccount:argocd:argocd-application-controller, group:platform-admins]
kinds:
  - resource: pods
  - resource: services
    protect: warn
  - resource: configmaps
    protect: false
`),
  });
  const [pods, services, configmaps] = config.kinds;
  const keys = (kind: KindConfig | undefined) =>
    kind?.protect && [kind.protect.mode, [...kind.protect.labels], [...kind.protect.annotations]];
  assert.deepEqual(keys(pods), ['deny', ['team'], ['example.com/cc']]);
  assert.deepEqual(keys(services), ['warn', ['team', 'tier'], ['example.com/cc']], 'its own: every key it sets');
  assert.equal(configmaps?.protect, undefined);
  assert.deepEqual(config.protectAllow, [
    'system:serviceaccount:argocd:argocd-application-controller',
    'group:platform-admins',
  ]);
  const flagged = buildConfig({ file: file('labels: {team: x}\nkinds: [{resource: pods}]\n'), protect: 'audit' });
  assert.deepEqual(keys(flagged.kinds[0]), ['audit', ['team'], []]);
  const off = buildConfig({
    file: file('labels: {team: x}\nprotect: deny\nkinds: [{resource: pods}]\n'),
    protect: 'off',
  });
  assert.equal(off.kinds[0]?.protect, undefined);
  assert.equal(buildConfig({ file: file('labels: {team: x}\nkinds: [{resource: pods}]\n') }).protectAllow, undefined);
});

test('protect: mistakes name the field', () => {
  rejects(
    { file: file('labels: {team: x}\nprotect: block\nkinds: [{resource: pods}]\n') },
    'kinds.yaml: protect: must be "deny", "warn" or "audit", got the string "block"',
  );
  rejects(
    { file: file('labels: {team: x}\nprotect: {keys: [team]}\nkinds: [{resource: pods}]\n') },
    'kinds.yaml: protect.mode: required: "deny", "warn" or "audit"',
  );
  rejects(
    { file: file('labels: {team: x}\nprotect: {mode: deny, keys: [tier]}\nkinds: [{resource: pods}]\n') },
    'kinds.yaml: protect.keys: "tier" is no key the config sets (in an entry with protection): protect only what labeller writes',
  );
  rejects(
    { file: file('labels: {team: x}\nkinds: [{resource: pods, protect: {mode: warn, keys: [tier]}}]\n') },
    'kinds.yaml: kinds[0].protect.keys: "tier" is no label or annotation this entry sets: protect only what labeller writes',
  );
  rejects(
    { file: file('labels: {team: x}\nkinds: [{resource: pods, protect: {mode: warn, allow: [me]}}]\n') },
    'kinds.yaml: kinds[0].protect: unknown field "allow": use one of mode, keys',
  );
});
