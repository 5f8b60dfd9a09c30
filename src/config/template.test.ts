import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TemplateContext } from './template.ts';
import { compileTemplate, readField, TemplateError } from './template.ts';

const context: TemplateContext = {
  name: 'web',
  namespace: 'shop',
  kind: 'Deployment',
  resource: 'deployments',
  group: 'apps',
  apiVersion: 'apps/v1',
  uid: '6f1c',
  labels: { app: 'storefront', 'example.com/team': 'payments' },
  annotations: { 'example.com/owner': 'alice' },
};

const ALLOWED =
  'name, namespace, kind, resource, group, apiVersion, uid, labels.<key>, annotations.<key>, spec.<field>, status.<field>, namespace.labels.<key>, namespace.annotations.<key>, owner.kind, owner.name, owner.labels.<key>, owner.annotations.<key>, root.kind, root.name, root.labels.<key>, root.annotations.<key>';

test('a source without "{{" is a constant', () => {
  for (const source of ['labeller', '', 'a}}b']) {
    const template = compileTemplate(source);
    assert.equal(template.constantValue, source);
    assert.equal(template.source, source);
    assert.equal(template.render(context), source);
  }
});

test('render substitutes every variable', () => {
  const cases: Array<[string, string]> = [
    ['{{name}}', 'web'],
    ['team-{{ namespace }}', 'team-shop'],
    ['{{kind}}.{{resource}}.{{group}}', 'Deployment.deployments.apps'],
    ['{{apiVersion}}/{{uid}}', 'apps/v1/6f1c'],
    ['{{labels.app}}', 'storefront'],
    ['{{labels.example.com/team}}-x', 'payments-x'],
    ['{{annotations.example.com/owner}}', 'alice'],
    ['{{name}}{{name}}', 'webweb'],
  ];
  for (const [source, rendered] of cases) {
    const template = compileTemplate(source);
    assert.equal(template.constantValue, undefined, source);
    assert.equal(template.render(context), rendered, source);
  }
});

test('a missing label or annotation makes the template absent, whatever surrounds it', () => {
  assert.equal(compileTemplate('x{{labels.missing}}y').render(context), undefined);
  assert.equal(compileTemplate('{{annotations.missing}}').render(context), undefined);
  // Inherited properties are not labels.
  assert.equal(compileTemplate('{{labels.constructor}}').render({ ...context, labels: {} }), undefined);
  // A label that is there but empty is a value.
  assert.equal(compileTemplate('{{labels.empty}}').render({ ...context, labels: { empty: '' } }), '');
});

test('| default "<value>" stands in for an absent variable; "" gives an explicit empty label', () => {
  assert.equal(compileTemplate('{{labels.missing | default "none"}}').render(context), 'none');
  assert.equal(compileTemplate('{{ namespace.labels.team|default "" }}').render(context), '');
  assert.equal(compileTemplate('{{labels.app | default "none"}}').render(context), 'storefront');
  assert.equal(compileTemplate('{{owner.name | default "bare"}}-{{labels.missing}}').render(context), undefined);
  assert.throws(() => compileTemplate('{{labels.app | upper}}'), {
    name: 'TemplateError',
    message: /unknown filter "\| upper": write "\{\{labels.app \| default \\"<value>\\"\}\}"/,
  });
  assert.throws(() => compileTemplate("{{labels.app | default 'x'}}"), {
    name: 'TemplateError',
    message: /unknown filter/,
  });
});

const related: TemplateContext = {
  ...context,
  related: {
    namespace: {
      kind: 'Namespace',
      name: 'shop',
      labels: { team: 'payments' },
      annotations: { 'example.com/cost-center': 'cc-7' },
    },
    owner: { kind: 'ReplicaSet', name: 'web-5d8f', labels: {}, annotations: {} },
    root: {
      kind: 'Deployment',
      name: 'web',
      labels: { 'app.kubernetes.io/part-of': 'shop' },
      annotations: { note: 'x' },
    },
  },
};

test('related variables render from the namespace, the controller owner and the root of the chain', () => {
  const cases: Array<[string, string | undefined]> = [
    ['{{namespace.labels.team}}', 'payments'],
    ['{{namespace.annotations.example.com/cost-center}}', 'cc-7'],
    ['{{owner.kind}}/{{owner.name}}', 'ReplicaSet/web-5d8f'],
    ['{{root.kind}}-{{root.name}}', 'Deployment-web'],
    ['{{root.labels.app.kubernetes.io/part-of}}', 'shop'],
    ['{{root.annotations.note}}', 'x'],
    ['{{owner.labels.app.kubernetes.io/part-of}}', undefined],
    ['{{namespace}}', 'shop'],
  ];
  for (const [source, rendered] of cases) assert.equal(compileTemplate(source).render(related), rendered, source);
  // No owner, no namespace object: absent.
  const bare = { ...context, related: {} };
  for (const source of ['{{owner.name}}', '{{root.kind}}', '{{namespace.labels.team}}', 'x-{{owner.labels.a}}']) {
    assert.equal(compileTemplate(source).render(bare), undefined, source);
  }
});

test('a template lists what it reads of related objects', () => {
  assert.deepEqual(
    compileTemplate('{{namespace.labels.team}}-{{owner.name}}-{{root.annotations.a}}-{{labels.x}}').related,
    [
      { relation: 'namespace', field: 'labels', key: 'team' },
      { relation: 'owner', field: 'name' },
      { relation: 'root', field: 'annotations', key: 'a' },
    ],
  );
  assert.deepEqual(compileTemplate('{{name}}').related, []);
});

test('an empty namespace or group renders as empty', () => {
  const clusterScoped = { ...context, namespace: '', group: '', apiVersion: 'v1', kind: 'Namespace' };
  assert.equal(compileTemplate('{{namespace}}-{{group}}').render(clusterScoped), '-');
});

test('compileTemplate rejects unknown variables, naming them and the allowed set', () => {
  const cases: Array<[string, string]> = [
    ['{{nmae}}', `template "{{nmae}}": unknown variable "nmae" (did you mean "name"?); use one of ${ALLOWED}`],
    [
      'x-{{label.app}}',
      `template "x-{{label.app}}": unknown variable "label.app" (did you mean "labels.app"?); use one of ${ALLOWED}`,
    ],
    ['{{metadata.name}}', `template "{{metadata.name}}": unknown variable "metadata.name"; use one of ${ALLOWED}`],
    [
      '{{ownr.labels.team}}',
      `template "{{ownr.labels.team}}": unknown variable "ownr.labels.team" (did you mean "owner.labels.team"?); use one of ${ALLOWED}`,
    ],
    [
      '{{owner.uid}}',
      `template "{{owner.uid}}": unknown variable "owner.uid" (did you mean "owner.kind"?); use one of ${ALLOWED}`,
    ],
    [
      '{{namespace.name}}',
      'template "{{namespace.name}}": unknown variable "namespace.name": the namespace\'s name is "{{namespace}}"',
    ],
    ['{{root.labels}}', 'template "{{root.labels}}": "root.labels" needs a key, e.g. "{{root.labels.app}}"'],
    ['{{ }}', `template "{{ }}": empty variable "{{}}"; use one of ${ALLOWED}`],
    ['{{labels}}', 'template "{{labels}}": "labels" needs a key, e.g. "{{labels.app}}"'],
    ['{{annotations.}}', 'template "{{annotations.}}": "annotations" needs a key, e.g. "{{annotations.app}}"'],
    [
      '{{labels.Foo_bar/app}}',
      'template "{{labels.Foo_bar/app}}": variable "labels.Foo_bar/app": prefix "Foo_bar" must be a lowercase DNS-1123 subdomain (e.g. "example.com")',
    ],
  ];
  for (const [source, message] of cases) {
    assert.throws(() => compileTemplate(source), { name: 'TemplateError', message }, source);
  }
});

test('compileTemplate rejects unterminated braces', () => {
  assert.throws(() => compileTemplate('team-{{name'), (error: unknown) => {
    assert.ok(error instanceof TemplateError);
    assert.equal(error.message, 'template "team-{{name": "{{" is not closed: add "}}" after the variable');
    return true;
  });
  assert.throws(() => compileTemplate('{{name}}-{{'), { message: /"\{\{" is not closed/ });
});

test('a template lists the annotations it reads, so the cache can keep only those', () => {
  assert.deepEqual(
    compileTemplate('{{ annotations.example.com/owner }}-{{labels.app}}-{{annotations.team}}').annotations,
    ['example.com/owner', 'team'],
  );
  assert.deepEqual(compileTemplate('constant').annotations, []);
});

test('readsObjectMetadata tells a template that copies the labels or annotations of the object or a related one', () => {
  const cases: Array<[string, boolean]> = [
    ['constant', false],
    ['{{name}}-{{namespace}}-{{kind}}-{{uid}}', false],
    ['{{labels.app}}', true],
    ['x-{{ annotations.example.com/owner }}', true],
    ['{{name}}-{{labels.app}}', true],
    ['{{namespace.labels.team}}', true],
    ['{{root.annotations.example.com/owner}}', true],
    ['{{owner.kind}}-{{owner.name}}', false],
  ];
  for (const [source, reads] of cases) assert.equal(compileTemplate(source).readsObjectMetadata, reads, source);
});

test('a template lists its parts in order: text, variables and lookups, each with its default', () => {
  assert.deepEqual(
    compileTemplate('team-{{namespace}}.{{labels.app | default "x"}}{{teams[namespace.labels.team].cc}}', {
      sources: new Set(['teams']),
    }).parts,
    [
      { type: 'text', text: 'team-' },
      { type: 'variable', variable: { type: 'field', field: 'namespace' }, fallback: undefined },
      { type: 'text', text: '.' },
      { type: 'variable', variable: { type: 'map', map: 'labels', key: 'app' }, fallback: 'x' },
      {
        type: 'lookup',
        source: 'teams',
        key: { type: 'related', read: { relation: 'namespace', field: 'labels', key: 'team' } },
        field: 'cc',
        fallback: undefined,
      },
    ],
  );
  assert.deepEqual(compileTemplate('plain').parts, [{ type: 'text', text: 'plain' }]);
  assert.deepEqual(compileTemplate('').parts, []);
});

test('a field of the object outside its metadata: a path of names, map keys in ["…"] and list indexes, read as text', () => {
  const object = {
    metadata: { name: 'data' },
    spec: {
      storageClassName: 'fast',
      nodeSelector: { 'topology.kubernetes.io/zone': 'eu-1a' },
      ports: [{ port: 443, protocol: 'TCP' }],
      claimRef: { namespace: 'shop' },
      paused: false,
      resources: { requests: { storage: '10Gi' } },
    },
    status: { phase: 'Bound' },
  };
  const cases: [source: string, path: readonly string[], rendered: string | undefined][] = [
    ['{{spec.storageClassName}}', ['spec.storageClassName'], 'fast'],
    [
      '{{spec.nodeSelector["topology.kubernetes.io/zone"]}}',
      ['spec.nodeSelector["topology.kubernetes.io/zone"]'],
      'eu-1a',
    ],
    ['{{spec.ports[0].protocol}}-{{spec.ports[0].port}}', ['spec.ports[0].protocol', 'spec.ports[0].port'], 'TCP-443'],
    ['{{spec.claimRef.namespace}}/{{status.phase}}', ['spec.claimRef.namespace', 'status.phase'], 'shop/Bound'],
    ['{{spec.paused}}', ['spec.paused'], 'false'],
    // A map or a list is no value; nor is a field not set.
    ['{{spec.resources}}', ['spec.resources'], undefined],
    ['{{spec.ports}}', ['spec.ports'], undefined],
    ['{{spec.ports[1].protocol}}', ['spec.ports[1].protocol'], undefined],
    ['{{spec.volumeName | default "unbound"}}', ['spec.volumeName'], 'unbound'],
  ];
  for (const [source, paths, rendered] of cases) {
    const template = compileTemplate(source);
    assert.deepEqual(template.fields.map((field) => field.path), paths, source);
    const value = template.render({
      ...context,
      field: (path) => readField(object, template.fields.find((field) => field.path === path)!),
    });
    assert.equal(value, rendered, source);
    assert.equal(template.readsObjectMetadata, true, `${source}: others write an object's fields`);
  }
  assert.equal(compileTemplate('{{spec.x}}').render(context), undefined, 'a context without fields: absent');
  for (
    const [source, message] of [
      ['{{spec}}', /unknown variable "spec"/],
      ['{{spec.}}', /cannot read "\."/],
      ['{{spec.nodeSelector[zone]}}', /cannot read "\[zone\]"; a field's path is names after dots/],
      ['{{status..phase}}', /cannot read "\.\.phase"/],
    ] as const
  ) {
    assert.throws(() => compileTemplate(source), message, source);
  }
});
