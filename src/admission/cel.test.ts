import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseSources } from '../config/sources.ts';
import { compileTemplate } from '../config/template.ts';
import { resource } from '../apimachinery/testing/resources.ts';
import { type CelScope, templateCel, validLabelValue } from './cel.ts';

const DEPLOYMENTS = resource('apps', 'deployments', 'Deployment');
const NAMESPACES = resource('', 'namespaces', 'Namespace', { namespaced: false });
const sources = parseSources({
  teams: { configMap: { namespace: 'platform', name: 'teams' } },
  owners: { configMap: { namespace: 'platform', name: 'owners' } },
  docs: { configMap: { namespace: 'platform', name: 'docs', key: 'docs.yaml' } },
  local: { file: '/etc/labeller/local.yaml' },
  remote: { url: 'https://catalog.example.com/teams.json' },
}, 'sources');
const named: CelScope = { resource: DEPLOYMENTS, sources };
const every: CelScope = { resource: undefined, sources };

const cel = (source: string, scope: CelScope = named) =>
  templateCel(compileTemplate(source, { sources: new Set(sources.keys()) }), scope);

test('constants and what is known of the kind are plain strings made optional', () => {
  assert.deepEqual(cel('labeller'), { cel: 'optional.of("labeller")', source: undefined });
  assert.deepEqual(cel(''), { cel: 'optional.of("")', source: undefined });
  assert.deepEqual(cel('{{kind}}.{{group}}/{{apiVersion}}:{{resource}}'), {
    cel: 'optional.of("Deployment" + "." + "apps" + "/" + "apps/v1" + ":" + "deployments")',
    source: undefined,
  });
  assert.deepEqual(cel('say "hi"\\'), { cel: 'optional.of("say \\"hi\\"\\\\")', source: undefined });
});

test('for any kind, the kind is read from the request; its version, which the controller takes from discovery, is not', () => {
  assert.deepEqual(cel('{{kind}}.{{resource}}.{{group}}', every), {
    cel: 'optional.of(request.kind.kind + "." + request.resource.resource + "." + request.resource.group)',
    source: undefined,
  });
  assert.match((cel('{{apiVersion}}', every) as { why: string }).why, /version the controller reads is not known/);
});

test("the namespace: the request's for namespaced objects, empty for cluster-scoped ones and Namespaces", () => {
  assert.deepEqual(cel('team-{{namespace}}'), { cel: 'optional.of("team-" + request.namespace)', source: undefined });
  assert.deepEqual(cel('{{namespace}}', { ...named, resource: NAMESPACES }), {
    cel: 'optional.of("")',
    source: undefined,
  });
  assert.deepEqual(cel('{{namespace}}', every), {
    cel: 'optional.of((namespaceObject != null ? request.namespace : ""))',
    source: undefined,
  });
});

test('variables that may be absent make the whole template absent, unless a default stands in', () => {
  assert.deepEqual(cel('{{labels.app}}'), { cel: 'object.metadata.?labels[?"app"]', source: undefined });
  assert.deepEqual(cel('{{name}}'), { cel: 'object.metadata.?name', source: undefined });
  assert.deepEqual(cel('{{kind}}-{{annotations.example.com/owner}}'), {
    cel: 'object.metadata.?annotations[?"example.com/owner"].optMap(v2, "Deployment" + "-" + string(v2))',
    source: undefined,
  });
  assert.deepEqual(cel('{{labels.a}}/{{namespace.labels.team}}'), {
    cel: 'object.metadata.?labels[?"a"].optFlatMap(v0, ' +
      '(namespaceObject != null ? namespaceObject.metadata.?labels[?"team"] : optional.none())' +
      '.optMap(v2, string(v0) + "/" + string(v2)))',
    source: undefined,
  });
  // Two variables side by side: each made a string, or the checker takes their sum for bytes.
  assert.deepEqual(cel('{{labels.a}}{{labels.b}}'), {
    cel:
      'object.metadata.?labels[?"a"].optFlatMap(v0, object.metadata.?labels[?"b"].optMap(v1, string(v0) + string(v1)))',
    source: undefined,
  });
  assert.deepEqual(cel('{{labels.a | default "none"}}-{{namespace.annotations.cc | default ""}}'), {
    cel: 'optional.of(object.metadata.?labels[?"a"].orValue("none") + "-" + ' +
      '(namespaceObject != null ? namespaceObject.metadata.?annotations[?"cc"] : optional.none()).orValue(""))',
    source: undefined,
  });
});

test('a lookup in a ConfigMap source reads its data through params, by a key that may be absent', () => {
  assert.deepEqual(cel('{{teams[namespace.labels.team]}}'), {
    cel: '(namespaceObject != null ? namespaceObject.metadata.?labels[?"team"] : optional.none())' +
      '.optFlatMap(k, (params != null ? params.?data[?k] : optional.none()))',
    source: 'teams',
  });
  assert.deepEqual(cel('cc-{{teams[namespace] | default "none"}}'), {
    cel: 'optional.of("cc-" + (params != null ? params.?data[?request.namespace] : optional.none()).orValue("none"))',
    source: 'teams',
  });
  assert.equal(
    (cel('{{teams[labels.app]}}{{teams[name]}}') as { source: string }).source,
    'teams',
    'one source read twice',
  );
});

test('what admission cannot see is said, for the controller to render', () => {
  const why = (source: string, scope: CelScope = named) => (cel(source, scope) as { why?: string }).why;
  assert.match(why('{{owner.name}}')!, /reads the object's owner/);
  assert.match(why('x-{{root.labels.team}}')!, /reads the object's root/);
  assert.match(why('{{uid}}')!, /gives the uid after admission/);
  assert.match(why('{{docs[labels.app]}}')!, /document in key docs.yaml of its ConfigMap, which CEL cannot parse/);
  assert.match(why('{{local[labels.app]}}')!, /source local is a file/);
  assert.match(why('{{remote[labels.app]}}')!, /source remote is a URL/);
  assert.match(why('{{teams[labels.app].costCenter}}')!, /reads field costCenter of an entry/);
  assert.match(why('{{teams[owner.name]}}')!, /reads the object's owner/);
  assert.match(why('{{teams[name]}}-{{owners[name]}}')!, /reads sources teams and owners.*one \(its params\)/);
});

test('a label value is checked as the API server checks it, matches() first', () => {
  assert.equal(
    validLabelValue('v'),
    'v.matches("^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$") && size(v) <= 63',
  );
  const pattern = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;
  for (const value of ['', 'a', 'a.b-c_d', 'x'.repeat(63)]) assert.ok(pattern.test(value), value);
  for (const value of ['-a', 'a-', 'a b', 'a/b', 'ns-']) assert.ok(!pattern.test(value), value);
});

test('a field of the object outside its metadata: as the request carries it, a string, int or bool as text, else absent', () => {
  const text = (path: string) =>
    `object${path}.optFlatMap(f, type(f) == string ? optional.of(f) : type(f) == int || type(f) == bool ? optional.of(string(f)) : optional.none())`;
  assert.deepEqual(cel('{{spec.storageClassName}}'), { cel: text('.?spec.?storageClassName'), source: undefined });
  assert.deepEqual(cel('{{spec.nodeSelector["topology.kubernetes.io/zone"]}}'), {
    cel: text('.?spec.?nodeSelector[?"topology.kubernetes.io/zone"]'),
    source: undefined,
  });
  assert.deepEqual(cel('{{spec.ports[0].protocol}}'), { cel: text('.?spec.?ports[?0].?protocol'), source: undefined });
  // Field names CEL reserves are escaped as Kubernetes' CEL escapes them.
  assert.deepEqual(cel('{{spec.claimRef.namespace}}'), {
    cel: text('.?spec.?claimRef.?__namespace__'),
    source: undefined,
  });
});
