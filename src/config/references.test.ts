import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildConfig } from './overlay.ts';
import { parseConfig } from './parse.ts';
import { BUILTIN_REFERENCES, describeReference } from './references.ts';
import { compileTemplate, referenceRelation } from './template.ts';

test("built-in references: a pod's node and ServiceAccount, a PV's claim in any namespace, a PVC's volume; a workload's HPA, a PVC's pods", () => {
  assert.deepEqual([...BUILTIN_REFERENCES.keys()], [
    'node',
    'serviceAccount',
    'claim',
    'volume',
    'scaler',
    'mountedBy',
  ]);
  assert.equal(
    describeReference(BUILTIN_REFERENCES.get('claim')!),
    "persistentvolumes' spec.claimRef.name names an object of persistentvolumeclaims in the namespace spec.claimRef.namespace names",
  );
  assert.equal(
    describeReference(BUILTIN_REFERENCES.get('mountedBy')!),
    "pods' spec.volumes[*].persistentVolumeClaim.claimName names an object of persistentvolumeclaims",
  );
  assert.equal(
    describeReference(BUILTIN_REFERENCES.get('scaler')!),
    "horizontalpodautoscalers.autoscaling' spec.scaleTargetRef.name names an object of the kind spec.scaleTargetRef.kind names",
  );
});

test('templates read a reference by name: its labels, annotations and name, and nothing else', () => {
  const references = new Set(BUILTIN_REFERENCES.keys());
  const template = compileTemplate('{{node.labels.topology.kubernetes.io/zone}}/{{node.name}}', { references });
  assert.deepEqual(template.related, [
    { relation: referenceRelation('node'), field: 'labels', key: 'topology.kubernetes.io/zone' },
    { relation: referenceRelation('node'), field: 'name' },
  ]);
  assert.equal(
    template.render({
      name: 'p',
      namespace: 'ns',
      kind: 'Pod',
      resource: 'pods',
      group: '',
      apiVersion: 'v1',
      uid: 'u',
      labels: {},
      annotations: {},
      related: {
        [referenceRelation('node')]: {
          kind: 'Node',
          name: 'n1',
          labels: { 'topology.kubernetes.io/zone': 'eu-1a' },
          annotations: {},
        },
      },
    }),
    'eu-1a/n1',
  );
  assert.throws(() => compileTemplate('{{node.kind}}', { references }), /unknown variable "node.kind"/);
  // Without the reference known, the name is no variable, and the message lists the references there are.
  assert.throws(
    () => compileTemplate('{{backup.name}}', { references }),
    /references: node, serviceAccount, claim, volume, scaler, mountedBy/,
  );
  assert.throws(() => compileTemplate('{{nod.labels.zone}}', { references }), /did you mean "node.labels.zone"/);
});

test('kinds.yaml references: declared by name with of, field and to; mistakes name the field and the fix', () => {
  const config = parseConfig(
    `
references:
  backup:
    of: deployments
    field: spec.template.metadata.annotations["example.com/backup-policy"]
    to: backuppolicies.example.com
kinds:
  - resource: deployments
    labels:
      example.com/backup-tier: "{{backup.labels.tier}}"
`,
    'kinds.yaml',
  );
  const backup = config.references.get('backup');
  assert.equal(backup?.field.path, 'spec.template.metadata.annotations["example.com/backup-policy"]');
  assert.equal(backup?.to, 'backuppolicies.example.com');
  assert.ok(config.references.has('node'), 'the built-in ones stay');
  const reverse = parseConfig(
    `
references:
  restoredBy: {from: restores.example.com, field: "spec.targets[*].name", to: persistentvolumeclaims}
kinds: [{resource: pvc, labels: {restore: "{{restoredBy.name}}"}}]
`,
    'kinds.yaml',
  ).references.get('restoredBy');
  assert.equal(reverse?.direction, 'reverse');
  assert.deepEqual(reverse?.field.steps, ['spec', 'targets', null, 'name']);
  const fails = (references: string, pattern: RegExp) =>
    assert.throws(() => parseConfig(`references:\n${references}\nkinds: [{resource: pods}]`, 'kinds.yaml'), pattern);
  fails('  node: {of: pods, field: spec.x, to: nodes}', /references\.node: "node" is a built-in reference/);
  fails('  owner: {of: pods, field: spec.x, to: nodes}', /references\.owner: "owner" is a template variable already/);
  fails('  backup: {of: pods, to: nodes}', /references\.backup\.field: required/);
  fails(
    '  backup: {of: pods, field: metadata.name, to: nodes}',
    /references\.backup\.field: .*starts with spec or status/,
  );
  fails('  backup: {field: spec.x, to: nodes}', /references\.backup\.of: required/);
  fails('  backup: {of: pods, field: spec.x, to: nodes, from: pods}', /"of" .* or "from" .*, not both/);
  fails('  backup: {of: pods, field: spec.x, to: nodes, kindField: spec.k}', /unknown field "kindField"/);
  fails('  backup: {of: pods, field: "spec.x[*]", to: nodes}', /\[\*\] reads many values/);
  fails('  restores: {from: restores.example.com, field: "spec.targets[*].name"}', /say which labelled kind/);
  fails('  Back_up: {of: pods, field: spec.x, to: nodes}', /lowerCamelCase/);
});

test('the every-kind entry may not read a reference: it names an object by a field of one kind', () => {
  assert.throws(
    () =>
      buildConfig({ file: { text: 'kinds: [{resource: "*", labels: {z: "{{node.name}}"}}]', source: 'kinds.yaml' } }),
    /kinds\.yaml: kinds\[0\]: "\{\{node\.name\}\}" reads a reference, .* not in the every-kind entry/,
  );
});
