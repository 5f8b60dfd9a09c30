import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildConfig } from '../config/overlay.ts';
import { resolveResource } from '../apimachinery/resolve.ts';
import { BUILTINS } from '../apimachinery/testing/resources.ts';
import {
  type Admission,
  type AdmissionInput,
  type AdmissionPolicy,
  type AdmissionPolicyBinding,
  renderAdmission,
} from './policy.ts';

/** The config of `yaml`, its kinds resolved as discovery would. */
function input(yaml: string, fieldManager = 'labeller'): AdmissionInput {
  const config = buildConfig({ file: { text: yaml, source: 'kinds.yaml' } });
  return {
    fieldManager,
    kinds: config.kinds.map((kind) => ({ kind, resource: resolveResource(kind.resource, BUILTINS) })),
    everyKind: config.everyKind && {
      every: config.everyKind,
      excluded: [{ group: '', resource: 'secrets' }, { group: 'apps', resource: 'deployments' }, {
        group: '',
        resource: 'events',
      }],
    },
    sources: config.sources,
  };
}

const policies = (admission: Admission) =>
  admission.objects.filter((o): o is AdmissionPolicy => o.kind === 'MutatingAdmissionPolicy');
const bindings = (admission: Admission) =>
  admission.objects.filter((o): o is AdmissionPolicyBinding => o.kind === 'MutatingAdmissionPolicyBinding');
/** A policy's name without the hash of its identity (names.ts). */
const readable = (name: string) => name.replace(/-[0-9a-f]{8}$/, '');
const expression = (policy: AdmissionPolicy) => policy.spec.mutations[0]!.applyConfiguration.expression;
const variable = (policy: AdmissionPolicy, name: string) =>
  policy.spec.variables.find((v) => v.name === name)?.expression;

const CONFIG = `
labels:
  app.kubernetes.io/managed-by: labeller
  example.com/team: "{{namespace.labels.team}}"
annotations:
  example.com/runbook: "https://runbooks.example.com/{{namespace}}/{{name}}"
sources:
  teams: {configMap: {namespace: platform, name: teams}}
  docs: {configMap: {namespace: platform, name: docs, key: docs.yaml}}
kinds:
  - resource: deployments
    labels:
      example.com/cc: "{{teams[labels.app]}}"
  - resource: pods
    namespaces: [shop, api]
    selector: "app in (web, api),!legacy"
    conflicts: skip
    labels:
      example.com/workload: "{{root.kind}}.{{root.name}}"
      example.com/doc: "{{docs[labels.app]}}"
`;

test('a policy and binding per kind, and per source its keys read; named for the field manager and the kind, in order', () => {
  const admission = renderAdmission(input(CONFIG));
  assert.deepEqual(admission.objects.map((o) => `${o.kind} ${readable(o.metadata.name)}`), [
    'MutatingAdmissionPolicy labeller-deployments.apps',
    'MutatingAdmissionPolicyBinding labeller-deployments.apps',
    'MutatingAdmissionPolicy labeller-deployments.apps-teams',
    'MutatingAdmissionPolicyBinding labeller-deployments.apps-teams',
    'MutatingAdmissionPolicy labeller-pods',
    'MutatingAdmissionPolicyBinding labeller-pods',
  ]);
  for (const object of admission.objects) {
    assert.equal(object.apiVersion, 'admissionregistration.k8s.io/v1');
    assert.deepEqual(object.metadata.labels, {
      'app.kubernetes.io/managed-by': 'labeller',
      'labeller/field-manager': 'labeller',
    });
  }
  for (const policy of policies(admission)) {
    assert.equal(policy.spec.failurePolicy, 'Ignore');
    assert.equal(policy.spec.reinvocationPolicy, 'Never');
    assert.deepEqual(policy.spec.mutations.map((m) => m.patchType), ['ApplyConfiguration']);
  }
  assert.deepEqual(renderAdmission(input(CONFIG)), admission, 'the same config renders the same objects');
});

test('a source split off: its own policy reads the ConfigMap as params, and runs without it', () => {
  const admission = renderAdmission(input(CONFIG));
  const [main, teams] = policies(admission);
  assert.equal(main!.spec.paramKind, undefined);
  assert.deepEqual(teams!.spec.paramKind, { apiVersion: 'v1', kind: 'ConfigMap' });
  assert.deepEqual(bindings(admission)[1]!.spec, {
    policyName: teams!.metadata.name,
    paramRef: { name: 'teams', namespace: 'platform', parameterNotFoundAction: 'Allow' },
  });
  assert.deepEqual(bindings(admission)[0]!.spec, { policyName: main!.metadata.name });
  assert.equal(readable(teams!.metadata.name), 'labeller-deployments.apps-teams');
  assert.deepEqual(teams!.spec.variables.map((v) => v.name), [
    'label0',
    'admittedLabels',
    'entriesLabels',
    'markerLabels',
    'annotationBytes',
    'fits',
  ]);
  assert.match(variable(teams!, 'label0')!, /^\/\/ example.com\/cc: "\{\{teams\[labels.app\]\}\}"\n/);
  assert.match(expression(teams!), /\?"example.com\/cc": variables.label0.optMap\(v, string\(v\)\)/);
  assert.doesNotMatch(expression(teams!), /admitted-annotations/, 'no annotation set, no annotation marker');
});

test('a kind matches its resource at CREATE, in its namespaces, by its selector; a cluster-scoped one in any namespace', () => {
  const [deployments, , pods] = policies(renderAdmission(input(CONFIG)));
  assert.deepEqual(deployments!.spec.matchConstraints, {
    resourceRules: [{ apiGroups: ['apps'], apiVersions: ['v1'], operations: ['CREATE'], resources: ['deployments'] }],
    matchPolicy: 'Equivalent',
  });
  assert.deepEqual(pods!.spec.matchConstraints, {
    resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }],
    namespaceSelector: {
      matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: ['api', 'shop'] }],
    },
    objectSelector: {
      matchExpressions: [
        { key: 'app', operator: 'In', values: ['api', 'web'] },
        { key: 'legacy', operator: 'DoesNotExist' },
      ],
    },
    matchPolicy: 'Equivalent',
  });
  const [namespaces] = policies(renderAdmission(input(`
kinds: [{resource: namespaces, namespaces: [a], labels: {x: y}}]
`)));
  assert.equal(namespaces!.spec.matchConstraints.namespaceSelector, undefined);
});

test('each key is set when its template renders a valid value; under skip only when the request lacks it; all are recorded in the marker', () => {
  const [deployments, , pods] = policies(renderAdmission(input(CONFIG)));
  assert.deepEqual(deployments!.spec.variables.map((v) => v.name), [
    'label0',
    'label1',
    'admittedLabels',
    'entriesLabels',
    'markerLabels',
    'annotation0',
    'admittedAnnotations',
    'markerAnnotations',
    'annotationBytes',
    'fits',
    'labelsFit',
  ]);
  // A constant was checked at load; a template's value is checked at admission.
  assert.equal(
    variable(deployments!, 'label0'),
    '// app.kubernetes.io/managed-by: "labeller"\noptional.of("labeller")',
  );
  assert.match(variable(deployments!, 'label1')!, /\.optFlatMap\(v, v\.matches\(.*\) && size\(v\) <= 63 \?/);
  assert.doesNotMatch(variable(deployments!, 'annotation0')!, /matches/, 'an annotation value is any text');
  // Each entry says whether the policy forced its value over the request's ("!").
  assert.equal(
    variable(deployments!, 'admittedLabels'),
    'variables.label0.optMap(v, [object.metadata.?labels[?"app.kubernetes.io/managed-by"].optMap(o, o == string(v) ? "" : "!").orValue("") + "app.kubernetes.io/managed-by=" + string(v)]).orValue([]) +\n' +
      'variables.label1.optMap(v, [object.metadata.?labels[?"example.com/team"].optMap(o, o == string(v) ? "" : "!").orValue("") + "example.com/team=" + string(v)]).orValue([])',
  );
  assert.match(variable(deployments!, 'admittedAnnotations')!, /\.replace\("%", "%25"\)/);
  assert.doesNotMatch(variable(deployments!, 'label1')!, /hasValue/, 'force: set whatever the request carries');
  assert.match(
    variable(pods!, 'label1')!,
    /^\/\/ example.com\/team: .*\nobject.metadata.\?labels\[\?"example.com\/team"\]\.hasValue\(\) \? optional\.none\(\) : /,
  );
  assert.match(
    variable(pods!, 'annotation0')!,
    /object.metadata.\?annotations\[\?"example.com\/runbook"\]\.hasValue\(\)/,
  );
  assert.equal(
    expression(deployments!),
    [
      'variables.fits ? Object{metadata: Object.metadata{',
      '  labels: {',
      '    ?"app.kubernetes.io/managed-by": variables.label0.optMap(v, string(v)),',
      '    ?"example.com/team": variables.label1.optMap(v, string(v))',
      '  },',
      '  annotations: {',
      '    ?"labeller.io/admitted-labels.labeller": variables.markerLabels.optMap(m, string(m)),',
      '    ?"example.com/runbook": variables.annotation0.optMap(v, string(v)),',
      '    ?"labeller.io/admitted-annotations.labeller": variables.markerAnnotations.optMap(m, string(m))',
      '  }',
      '}} :',
      'variables.labelsFit ? Object{metadata: Object.metadata{',
      '  labels: {',
      '    ?"app.kubernetes.io/managed-by": variables.label0.optMap(v, string(v)),',
      '    ?"example.com/team": variables.label1.optMap(v, string(v))',
      '  },',
      '  annotations: {',
      '    ?"labeller.io/admitted-labels.labeller": variables.markerLabels.optMap(m, string(m))',
      '  }',
      '}} : Object{}',
    ].join('\n'),
  );
});

test('a policy never makes the object too big to create: its annotations and markers count toward 256 KiB with those the object carries (issue 46, item 3)', () => {
  const [deployments] = policies(renderAdmission(input(CONFIG)));
  const bytes = (value: string) => `size(${value}) + 3 * size(${value}.findAll("[^\\\\x00-\\\\x7f]"))`;
  assert.equal(
    variable(deployments!, 'annotationBytes'),
    `object.metadata.?annotations.optMap(a, a.map(k, ${bytes('string(k)')} + ${
      bytes('string(a[k])')
    }).sum()).orValue(0)`,
  );
  assert.equal(
    variable(deployments!, 'fits'),
    `variables.annotationBytes + variables.markerLabels.optMap(m, 36 + ${bytes('string(m)')}).orValue(0) + ` +
      `variables.annotation0.optMap(v, 19 + ${bytes('string(v)')}).orValue(0) + ` +
      `variables.markerAnnotations.optMap(m, 41 + ${bytes('string(m)')}).orValue(0) <= 262144`,
  );
  assert.equal(
    variable(deployments!, 'labelsFit'),
    `variables.annotationBytes + variables.markerLabels.optMap(m, 36 + ${bytes('string(m)')}).orValue(0) <= 262144`,
  );
});

test("the marker: a policy keeps the entries of its entry's other policies and replaces the rest, never appending to the request's (issue 46)", () => {
  const [main, teams] = policies(renderAdmission(input(CONFIG)));
  // The deployments entry's keys: managed-by and team in one policy, cc in the teams source's.
  assert.equal(
    variable(main!, 'markerLabels'),
    'size(variables.entriesLabels) > 0 || object.metadata.?annotations[?"labeller.io/admitted-labels.labeller"].hasValue() ? optional.of(variables.entriesLabels.join(",")) : optional.none()',
  );
  assert.equal(
    variable(main!, 'entriesLabels'),
    'object.metadata.?annotations[?"labeller.io/admitted-labels.labeller"].orValue("").split(",").filter(e, (e.startsWith("!") ? e.substring(1) : e).split("=")[0] in ["example.com/cc"]) +\nvariables.admittedLabels',
  );
  assert.match(variable(teams!, 'entriesLabels')!, /in \["app.kubernetes.io\/managed-by","example.com\/team"\]\) \+/);
  // Its annotations: no other policy of the entry sets one, so what the object carries is replaced.
  assert.equal(variable(main!, 'entriesAnnotations'), undefined);
  assert.match(variable(main!, 'markerAnnotations')!, /optional\.of\(variables\.admittedAnnotations\.join\(","\)\)/);
});

test('the rules CEL cannot render are left to the controller, each with why', () => {
  const { controllerRules } = renderAdmission(input(CONFIG));
  assert.deepEqual(
    controllerRules.map(({ entry, resource, field, key, template }) => ({ entry, resource, field, key, template })),
    [
      {
        entry: 'kinds.yaml: kinds[1]',
        resource: 'pods',
        field: 'labels',
        key: 'example.com/doc',
        template: '{{docs[labels.app]}}',
      },
      {
        entry: 'kinds.yaml: kinds[1]',
        resource: 'pods',
        field: 'labels',
        key: 'example.com/workload',
        template: '{{root.kind}}.{{root.name}}',
      },
    ],
  );
  assert.match(controllerRules[0]!.why, /CEL cannot parse/);
  assert.match(controllerRules[1]!.why, /root/);
});

test("a key reading a reference (a pod's node) is left to the controller: CEL sees only the object, and the node is not known at create", () => {
  const { controllerRules } = renderAdmission(input(`
kinds: [{resource: pods, labels: {zone: "{{node.labels.topology.kubernetes.io/zone}}", team: a}}]
`));
  assert.deepEqual(controllerRules.map(({ key, why }) => ({ key, why })), [
    { key: 'zone', why: "it reads the object's node, which admission does not see" },
  ]);
});

test('a kind whose every rule is left to the controller has no policy', () => {
  const admission = renderAdmission(input(`
kinds: [{resource: pods, labels: {a: "{{uid}}"}}]
`));
  assert.deepEqual(admission.objects, []);
  assert.equal(admission.controllerRules.length, 1);
});

test('two entries of one resource in other namespaces are told apart by their first namespace', () => {
  const names = renderAdmission(input(`
kinds:
  - {resource: configmaps, namespaces: [b, c], labels: {x: "1"}}
  - {resource: cm, namespaces: [a], labels: {x: "2"}}
`)).objects.map((o) => readable(o.metadata.name));
  assert.deepEqual([...new Set(names)], ['labeller-configmaps-a', 'labeller-configmaps-b']);
});

test('a field manager that is no DNS label is named by its slug and a hash, and labelled by a hash', () => {
  const [policy] = policies(renderAdmission(input('kinds: [{resource: pods, labels: {a: b}}]', 'Team A:Labeller')));
  assert.match(policy!.metadata.name, /^team-a-labeller-pods-[0-9a-f]{8}$/);
  assert.match(policy!.metadata.labels['labeller/field-manager']!, /^sha256-[0-9a-f]{56}$/);
});

test('policy names never collide across field managers (issue 46, item 7)', () => {
  const names = (yaml: string, fieldManager: string) =>
    renderAdmission(input(yaml, fieldManager)).objects.map((o) => o.metadata.name);
  const first = names(
    `sources: {services: {configMap: {namespace: p, name: s}}}\nkinds: [{resource: pods, labels: {a: "{{services[name]}}", b: c}}]`,
    'labeller',
  );
  const second = names('kinds: [{resource: services, labels: {a: b}}]', 'labeller-pods');
  assert.deepEqual([...new Set([...first, ...second].map(readable))].sort(), [
    'labeller-pods',
    'labeller-pods-services',
  ], 'read alone, two of them are the same');
  assert.equal(new Set([...first, ...second]).size, 3, 'the names are not');
});

test('the every-kind entry matches every resource of its scope but those it leaves out, the kind read from the request', () => {
  const admission = renderAdmission(input(`
labels: {example.com/kind: "{{kind}}", example.com/version: "{{apiVersion}}"}
kinds: [{resource: "*", selector: "!legacy"}]
`));
  const [every] = policies(admission);
  assert.equal(readable(every!.metadata.name), 'labeller-every-kind');
  assert.deepEqual(every!.spec.matchConstraints, {
    resourceRules: [{
      apiGroups: ['*'],
      apiVersions: ['*'],
      operations: ['CREATE'],
      resources: ['*'],
      scope: 'Namespaced',
    }],
    objectSelector: { matchExpressions: [{ key: 'legacy', operator: 'DoesNotExist' }] },
    matchPolicy: 'Equivalent',
    excludeResourceRules: [
      { apiGroups: [''], apiVersions: ['*'], operations: ['CREATE'], resources: ['events', 'secrets'] },
      { apiGroups: ['apps'], apiVersions: ['*'], operations: ['CREATE'], resources: ['deployments'] },
    ],
  });
  assert.match(variable(every!, 'label0')!, /request\.kind\.kind/);
  assert.deepEqual(admission.controllerRules.map((r) => [r.resource, r.key]), [['*', 'example.com/version']]);
});

test('every kind of scope all in some namespaces: one policy for namespaced kinds there, one for cluster-scoped kinds', () => {
  const scopes = (yaml: string) =>
    policies(renderAdmission(input(yaml))).map((p) => [
      readable(p.metadata.name),
      p.spec.matchConstraints.resourceRules[0]!.scope,
      p.spec.matchConstraints.namespaceSelector?.matchExpressions[0]?.values,
    ]);
  assert.deepEqual(scopes('kinds: [{resource: "*", scope: all, namespaces: [b, a], labels: {x: y}}]'), [
    ['labeller-every-kind-cluster', 'Cluster', undefined],
    ['labeller-every-kind-namespaced', 'Namespaced', ['a', 'b']],
  ]);
  assert.deepEqual(scopes('kinds: [{resource: "*", scope: all, labels: {x: y}}]'), [
    ['labeller-every-kind', '*', undefined],
  ]);
  assert.deepEqual(scopes('kinds: [{resource: "*", scope: cluster, labels: {x: y}}]'), [
    ['labeller-every-kind', 'Cluster', undefined],
  ]);
});

test('a protected key is forced at create whatever conflicts says, and set even when its marker does not fit (issue 46)', () => {
  const [policy] = policies(renderAdmission(input(`
labels: {team: "{{namespace.labels.team}}", tier: web}
conflicts: skip
protect: {mode: deny, keys: [team]}
kinds: [{resource: configmaps}]
`)));
  assert.doesNotMatch(variable(policy!, 'label0')!, /hasValue/, 'team: forced');
  assert.match(variable(policy!, 'label1')!, /hasValue\(\) \? optional\.none\(\)/, 'tier: skip');
  assert.match(
    expression(policy!),
    /: Object\{metadata: Object\.metadata\{\n {2}labels: \{\n {4}\?"team": variables\.label0\.optMap\(v, string\(v\)\)\n {2}\}\n\}\}$/,
    'nothing fits: the protected label alone',
  );
});
