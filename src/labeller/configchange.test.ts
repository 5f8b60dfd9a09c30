import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildConfig } from './config.ts';
import { configChange } from './configchange.ts';

const kinds = (yaml: string) => buildConfig({ file: { text: yaml, source: 'kinds.yaml' } }).kinds;
const names = (list: readonly { resource: string }[]) => list.map((k) => k.resource);

test('kinds added, removed, relabelled (labels, templates, policy) or restarted (namespaces, selector, annotations read)', () => {
  const before = kinds(`
labels: { team: a }
kinds:
  - resource: configmaps
  - resource: services
    labels: { app: "{{labels.app}}" }
  - resource: secrets
  - resource: deployments
    namespaces: [a, b]
  - resource: pods
    labels: { owner: "{{annotations.example.com/owner}}" }
  - resource: jobs
`);
  const after = kinds(`
labels: { team: a }
kinds:
  - resource: configmaps
    conflicts: skip
  - resource: services
    labels: { app: web }
  - resource: deployments
    namespaces: [b, a]
    selector: app
  - resource: pods
    labels: { owner: "{{annotations.example.com/team}}" }
  - resource: jobs
  - resource: ingresses
`);
  const change = configChange(before, after);
  assert.deepEqual(names(change.added), ['ingresses']);
  assert.deepEqual(names(change.removed), ['secrets']);
  assert.deepEqual(names(change.relabelled), ['configmaps', 'services']);
  assert.deepEqual(names(change.restarted), ['deployments', 'pods']);
  assert.equal(change.relabelled[0]?.conflicts, 'skip', 'the new config');
});

test('the same config, or namespaces in another order, changes nothing', () => {
  const yaml = 'labels: { team: a }\nkinds: [{ resource: cm, namespaces: [x, y] }]\n';
  assert.deepEqual(configChange(kinds(yaml), kinds(yaml.replace('[x, y]', '[y, x]'))), {
    added: [],
    removed: [],
    relabelled: [],
    restarted: [],
  });
});
