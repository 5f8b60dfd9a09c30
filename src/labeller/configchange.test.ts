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

test('a kind whose templates start, stop or change reading related objects is restarted; the same reads in other templates are relabelled', () => {
  const before = kinds(`
kinds:
  - resource: configmaps
    labels: { env: prod }
  - resource: secrets
    labels: { team: "{{namespace.labels.team}}" }
  - resource: services
    labels: { team: "{{namespace.labels.team}}" }
  - resource: pods
    labels: { owner: "{{owner.name}}" }
  - resource: jobs
    labels: { team: "{{namespace.labels.team}}", tier: "{{owner.labels.tier}}" }
  - resource: cronjobs
    labels: { note: "{{root.annotations.example.com/note}}" }
`);
  const after = kinds(`
kinds:
  - resource: configmaps
    labels: { env: prod, team: "{{namespace.labels.team}}" }
  - resource: secrets
    labels: { env: prod }
  - resource: services
    labels: { team: "team-{{namespace.labels.team}}" }
  - resource: pods
    labels: { owner: "{{root.name}}" }
  - resource: jobs
    labels: { tier: "{{owner.labels.tier}}", team: "{{namespace.labels.team}}", copy: "{{namespace.labels.team}}" }
  - resource: cronjobs
    labels: { note: "{{root.annotations.example.com/other}}" }
`);
  const change = configChange(before, after);
  assert.deepEqual(names(change.restarted), ['configmaps', 'secrets', 'pods', 'cronjobs']);
  assert.deepEqual(names(change.relabelled), ['services', 'jobs']);
});

test('a default template that starts reading the namespace restarts every kind it applies to', () => {
  const yaml = (team: string) => `labels: { team: "${team}" }\nkinds: [{ resource: cm }, { resource: secrets }]\n`;
  const change = configChange(kinds(yaml('platform')), kinds(yaml('{{namespace.labels.team}}')));
  assert.deepEqual([names(change.restarted), names(change.relabelled)], [['cm', 'secrets'], []]);
});
