import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TemplateContext } from './template.ts';
import { compileTemplate, TemplateError } from './template.ts';

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

const ALLOWED = 'name, namespace, kind, resource, group, apiVersion, uid, labels.<key>, annotations.<key>';

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

test('a missing label or annotation renders as an empty string', () => {
  assert.equal(compileTemplate('x{{labels.missing}}y').render(context), 'xy');
  assert.equal(compileTemplate('{{annotations.missing}}').render(context), '');
  // Inherited properties are not labels.
  assert.equal(compileTemplate('{{labels.constructor}}').render({ ...context, labels: {} }), '');
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
  assert.deepEqual(compileTemplate('{{ annotations.example.com/owner }}-{{labels.app}}-{{annotations.team}}').annotations, ['example.com/owner', 'team']);
  assert.deepEqual(compileTemplate('constant').annotations, []);
});

test('readsObjectMetadata tells a template that copies the object\'s labels or annotations', () => {
  const cases: Array<[string, boolean]> = [
    ['constant', false],
    ['{{name}}-{{namespace}}-{{kind}}-{{uid}}', false],
    ['{{labels.app}}', true],
    ['x-{{ annotations.example.com/owner }}', true],
    ['{{name}}-{{labels.app}}', true],
  ];
  for (const [source, reads] of cases) assert.equal(compileTemplate(source).readsObjectMetadata, reads, source);
});
