import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildConfig } from '../config/overlay.ts';
import { resolveResource } from '../apimachinery/resolve.ts';
import { BUILTINS } from '../apimachinery/testing/resources.ts';
import { renderProtection } from './protection.ts';

const render = (yaml: string, identities: readonly string[] = ['system:serviceaccount:ops:labeller']) => {
  const config = buildConfig({ file: { text: yaml, source: 'kinds.yaml' } });
  return renderProtection({
    fieldManager: 'labeller',
    kinds: config.kinds.map((kind) => ({ kind, resource: resolveResource(kind.resource, BUILTINS) })),
    identities: [...identities, ...(config.protectAllow ?? [])],
  });
};

test('one ValidatingAdmissionPolicy and binding per protecting entry: UPDATE only, labeller and allow exempt, the mode as the action', () => {
  const objects = render(`
labels: {team: a, tier: b}
annotations: {example.com/cc: c}
protect: {mode: deny, keys: [team, example.com/cc], allow: [system:serviceaccount:argocd:argocd, group:admins]}
kinds:
  - resource: pods
  - resource: services
    protect: warn
  - resource: configmaps
    protect: false
`);
  assert.deepEqual(objects.map((o) => `${o.kind} ${o.metadata.name.replace(/-[0-9a-f]{8}$/, '')}`), [
    'ValidatingAdmissionPolicy labeller-protect-pods',
    'ValidatingAdmissionPolicyBinding labeller-protect-pods',
    'ValidatingAdmissionPolicy labeller-protect-services',
    'ValidatingAdmissionPolicyBinding labeller-protect-services',
  ]);
  const [pods, podsBinding, services, servicesBinding] = objects;
  assert.ok(pods?.kind === 'ValidatingAdmissionPolicy' && services?.kind === 'ValidatingAdmissionPolicy');
  assert.ok(podsBinding?.kind === 'ValidatingAdmissionPolicyBinding');
  assert.ok(servicesBinding?.kind === 'ValidatingAdmissionPolicyBinding');
  assert.deepEqual(podsBinding.spec, { policyName: pods.metadata.name, validationActions: ['Deny'] });
  assert.deepEqual(servicesBinding.spec.validationActions, ['Warn']);
  assert.deepEqual(pods.spec.matchConstraints.resourceRules.map((r) => r.operations), [['UPDATE']]);
  assert.equal(pods.spec.failurePolicy, 'Ignore');
  assert.deepEqual(pods.spec.matchConditions, [{
    name: 'not-labeller',
    expression:
      '!(request.userInfo.username in ["system:serviceaccount:argocd:argocd","system:serviceaccount:ops:labeller"]) && ' +
      '!request.userInfo.groups.exists(g, g in ["admins"])',
  }]);
  // The keys it protects, and labeller's markers, compared between the old object and the new.
  assert.equal(
    pods.spec.variables[0]?.expression,
    '["team"].filter(k, object.metadata.?labels[?k] != oldObject.metadata.?labels[?k]).map(k, "label " + k) +\n' +
      '["example.com/cc"].filter(k, object.metadata.?annotations[?k] != oldObject.metadata.?annotations[?k]).map(k, "annotation " + k) +\n' +
      '["labeller.io/admitted-labels.labeller","labeller.io/admitted-annotations.labeller"].filter(k, object.metadata.?annotations[?k] != oldObject.metadata.?annotations[?k]).map(k, "labeller\'s marker " + k)',
  );
  assert.match(services.spec.variables[0]?.expression ?? '', /^\["team","tier"\]\.filter/, 'its own: every key');
  assert.match(
    pods.spec.validations[0]?.messageExpression ?? '',
    /as its config says \(kinds\.yaml: kinds\[0\], field manager labeller\): change it there, not on the object"$/,
  );
});

test('nothing protected, nothing rendered', () => {
  assert.deepEqual(render('labels: {team: a}\nkinds: [{resource: pods}]\n'), []);
});
