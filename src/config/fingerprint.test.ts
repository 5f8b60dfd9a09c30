import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildConfig } from './overlay.ts';
import { configFingerprint } from './fingerprint.ts';

const fingerprint = (text: string, labels?: Record<string, string>): string =>
  configFingerprint(buildConfig({ file: { text, source: 'kinds.yaml' }, labels }));

test("a config's fingerprint ignores the order things were written in", () => {
  const a = fingerprint(
    'labels: { a: "1", b: "2" }\nkinds: [{ resource: configmaps, namespaces: [x, y] }, { resource: secrets }]\n',
  );
  const b = fingerprint(
    'labels: { b: "2", a: "1" }\nkinds: [{ resource: secrets }, { resource: configmaps, namespaces: [y, x] }]\n',
  );
  assert.equal(a, b);
  assert.match(a, /^sha256:[0-9a-f]{16}$/);
});

test("a config's fingerprint changes with any label, kind, namespace, selector or policy", () => {
  const base = 'kinds: [{ resource: configmaps, labels: { team: a } }]\n';
  const variants = [
    'kinds: [{ resource: configmaps, labels: { team: b } }]\n',
    'kinds: [{ resource: secrets, labels: { team: a } }]\n',
    'kinds: [{ resource: configmaps, namespaces: [x], labels: { team: a } }]\n',
    'kinds: [{ resource: configmaps, selector: app, labels: { team: a } }]\n',
    'kinds: [{ resource: configmaps, conflicts: skip, labels: { team: a } }]\n',
    'kinds: [{ resource: configmaps, labels: { team: "{{name}}" } }]\n',
  ];
  const all = new Set([base, ...variants].map((text) => fingerprint(text)));
  assert.equal(all.size, variants.length + 1);
  assert.notEqual(fingerprint(base), fingerprint(base, { extra: '1' }), 'a --label flag counts too');
});
