import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ConfigInput } from './overlay.ts';
import { buildConfig } from './overlay.ts';
import { ConfigError } from './fields.ts';
import { DEFAULT_EXCLUDES } from './everykind.ts';
import { kindSettings } from './model.ts';
import { configFingerprint } from './fingerprint.ts';

const file = (text: string) => ({ text, source: 'kinds.yaml' });

function rejects(input: ConfigInput, message: RegExp): void {
  assert.throws(() => buildConfig(input), (error: unknown) => {
    assert.ok(error instanceof ConfigError, `expected a ConfigError, got ${String(error)}`);
    assert.match(error.message, message);
    return true;
  });
}

test('the "*" entry is the every-kind entry, kept apart from the kinds listed by name, with the settings any entry takes', () => {
  const config = buildConfig({
    file: file(`
labels: { team: platform }
conflicts: skip
kinds:
  - resource: "*"
    scope: all
    exclude: [secrets, widgets.example.com]
    namespaces: [shop]
    selector: app
    labels: { tier: any }
  - resource: configmaps
    labels: { tier: config }
`),
  });
  assert.deepEqual(config.kinds.map((kind) => kind.resource), ['configmaps']);
  const every = config.everyKind!;
  assert.deepEqual([every.scope, every.exclude, every.kind.resource, every.kind.where], [
    'all',
    ['secrets', 'widgets.example.com'],
    '*',
    'kinds.yaml: kinds[0]',
  ]);
  assert.deepEqual(every.kind.namespaces, ['shop']);
  assert.equal(every.kind.selector?.toString(), 'app');
  assert.equal(every.kind.conflicts, 'skip');
  assert.deepEqual([...every.kind.labels.keys()], ['team', 'tier']);
  assert.deepEqual(kindSettings(config).map((kind) => kind.resource), ['configmaps', '*']);
});

test('the every-kind entry alone is a config; scope defaults to namespaced, exclude to the defaults alone', () => {
  const config = buildConfig({ file: file('labels: { a: b }\nkinds: [{ resource: "*" }]\n') });
  assert.deepEqual(config.kinds, []);
  assert.deepEqual([config.everyKind?.scope, config.everyKind?.exclude], ['namespaced', []]);
  assert.equal(
    buildConfig({ file: file('labels: { a: b }\nkinds: [{ resource: configmaps }]\n') }).everyKind,
    undefined,
  );
});

test("--kinds '*' is the every-kind entry, keeping the file's; --exclude-kinds adds to its exclude", () => {
  const text = 'labels: { a: b }\nkinds:\n  - resource: "*"\n    scope: cluster\n    exclude: [nodes]\n';
  const flagged = buildConfig({ file: file(text), kinds: ['*', 'secrets'], excludeKinds: ['namespaces', 'nodes'] });
  assert.deepEqual(flagged.kinds.map((kind) => kind.resource), ['secrets']);
  assert.deepEqual([flagged.everyKind?.scope, flagged.everyKind?.exclude], ['cluster', ['nodes', 'namespaces']]);
  const bare = buildConfig({ kinds: ['*'], labels: { a: 'b' }, namespaces: ['shop'] });
  assert.deepEqual([bare.everyKind?.kind.where, bare.everyKind?.kind.namespaces], ['--kinds "*"', ['shop']]);
  // Without "*" in --kinds, the file's entry is replaced like any other.
  assert.equal(buildConfig({ file: file(text), kinds: ['secrets'] }).everyKind, undefined);
});

test('scope and exclude belong to the every-kind entry only; one such entry; mistakes name the field', () => {
  rejects(
    { file: file('labels: { a: b }\nkinds: [{ resource: secrets, scope: all }]\n') },
    /^kinds\.yaml: kinds\[0\]\.scope: only the every-kind entry \(resource: "\*"\) takes scope/,
  );
  rejects(
    { file: file('labels: { a: b }\nkinds: [{ resource: secrets, exclude: [cm] }]\n') },
    /^kinds\.yaml: kinds\[0\]\.exclude: only the every-kind entry/,
  );
  rejects(
    { file: file('labels: { a: b }\nkinds: [{ resource: "*" }, { resource: "*" }]\n') },
    /^kinds\.yaml: kinds\[1\]\.resource: "\*" is already configured at kinds\[0\]: merge the two entries$/,
  );
  rejects(
    { file: file('labels: { a: b }\nkinds: [{ resource: "*", scope: Namespaced }]\n') },
    /^kinds\.yaml: kinds\[0\]\.scope: must be "namespaced", "cluster", "all", got the string "Namespaced"$/,
  );
  rejects(
    { file: file('labels: { a: b }\nkinds: [{ resource: "*", exclude: secrets }]\n') },
    /^kinds\.yaml: kinds\[0\]\.exclude: expected a list of kinds/,
  );
  rejects(
    { file: file('labels: { a: b }\nkinds: [{ resource: "*", exclude: [cm, cm] }]\n') },
    /^kinds\.yaml: kinds\[0\]\.exclude\[1\]: "cm" is listed twice/,
  );
  rejects(
    { file: file('labels: { a: b }\nkinds: [{ resource: "*", exclude: ["*"] }]\n') },
    /^kinds\.yaml: kinds\[0\]\.exclude\[0\]: "\*" cannot be excluded$/,
  );
  rejects(
    { file: file('labels: { a: b }\nkinds: [{ resource: "*", exclude: ["no such"] }]\n') },
    /^kinds\.yaml: kinds\[0\]\.exclude\[0\]: "no such" is not a kubectl-style resource name/,
  );
  rejects(
    { file: file('labels: { a: b }\nkinds: [{ resource: "*", scope: cluster, namespaces: [shop] }]\n') },
    /^kinds\.yaml: kinds\[0\]\.namespaces: cluster-scoped kinds have no namespaces/,
  );
  rejects(
    { kinds: ['configmaps'], labels: { a: 'b' }, excludeKinds: ['secrets'] },
    /^--exclude-kinds: excludes kinds from the every-kind entry, and there is none: add "\*" to --kinds/,
  );
  rejects({ kinds: ['*'], labels: { a: 'b' }, excludeKinds: ['a b'] }, /^--exclude-kinds\[0\]: "a b" is not a kubectl/);
  rejects({ kinds: ['*'] }, /^no labels configured/);
  rejects({ file: file('ownerKinds: ["*"]\nkinds: [{ resource: "*", labels: { a: b } }]\n') }, /ownerKinds\[0\]/);
});

test('the fingerprint tells every-kind configs apart by scope and exclusions, in any order, and keeps the old one without', () => {
  const fingerprint = (text: string) => configFingerprint(buildConfig({ file: file(text) }));
  const base = 'labels: { a: b }\nkinds:\n  - resource: "*"\n';
  assert.equal(
    fingerprint(`${base}    exclude: [secrets, cm]\n`),
    fingerprint(`${base}    exclude: [cm, secrets]\n    scope: namespaced\n`),
  );
  assert.notEqual(fingerprint(base), fingerprint(`${base}    scope: all\n`));
  assert.notEqual(fingerprint(base), fingerprint(`${base}    exclude: [secrets]\n`));
  assert.notEqual(fingerprint(base), fingerprint('labels: { a: b }\nkinds: [{ resource: configmaps }]\n'));
  // Unchanged for configs without one (replicas across an upgrade agree).
  assert.equal(fingerprint('labels: { a: b }\nkinds: [{ resource: configmaps }]\n'), 'sha256:4cf23c8b1fac575a');
});

test('default exclusions are fully qualified and say why', () => {
  for (const { resource, why } of DEFAULT_EXCLUDES) {
    assert.ok(['events', 'endpoints', 'secrets'].includes(resource) || resource.includes('.'), resource);
    assert.ok(why.length > 20, resource);
  }
});
