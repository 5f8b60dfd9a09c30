import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildConfig } from '../config/overlay.ts';
import { ConfigError } from '../config/fields.ts';
import { LookupIndex } from '../labelling/lookupindex.ts';
import { projector } from '../labelling/object.ts';
import { changedKeys, lookUp, massRemoval, sourceContent, SourceContentError } from './content.ts';
import { parseContent } from './loader.ts';
import { compileTemplate, TemplateError } from '../config/template.ts';

const config = (yaml: string) => buildConfig({ file: { text: yaml, source: 'kinds.yaml' } });

test('content: keys to values or to fields; numbers and booleans read as text; anything else refused whole', () => {
  const content = sourceContent({ payments: { costCenter: 'cc-1', tier: 2 }, legacy: 'cc-0', flag: true });
  assert.equal(lookUp(content, 'payments', 'costCenter'), 'cc-1');
  assert.equal(lookUp(content, 'payments', 'tier'), '2');
  assert.equal(lookUp(content, 'legacy', undefined), 'cc-0');
  assert.equal(lookUp(content, 'flag', undefined), 'true');
  assert.equal(lookUp(content, 'payments', undefined), undefined, 'fields where a value is read: absent');
  assert.equal(lookUp(content, 'legacy', 'costCenter'), undefined, 'a value where a field is read: absent');
  assert.equal(lookUp(content, 'payments', 'toString'), undefined, 'not an inherited property');
  assert.equal(lookUp(content, 'nobody', undefined), undefined);
  for (const bad of [[1, 2], 'text', null, { a: [1] }, { a: { b: { c: 'd' } } }]) {
    assert.throws(() => sourceContent(bad), SourceContentError, JSON.stringify(bad));
  }
});

test('changed keys: added, removed, and those whose value or fields changed', () => {
  const before = sourceContent({ a: 'x', b: { f: '1' }, c: { f: '1', g: '2' }, gone: 'y' });
  const after = sourceContent({ a: 'x', b: { f: '2' }, c: { g: '2', f: '1' }, new: 'z' });
  assert.deepEqual(changedKeys(before, after).sort(), ['b', 'gone', 'new']);
  assert.deepEqual(changedKeys(undefined, after).sort(), ['a', 'b', 'c', 'new'], 'a first load: every key');
});

test('lookups: a source named in the config, a key that is a variable, a field; unknown sources and shapes point at the field', () => {
  const sources = new Set(['teams']);
  const template = compileTemplate('{{teams[namespace.labels.team].costCenter}}', { sources });
  assert.deepEqual(template.lookups, [{ source: 'teams', field: 'costCenter' }]);
  assert.deepEqual(template.related, [{ relation: 'namespace', field: 'labels', key: 'team' }]);
  assert.equal(template.readsObjectMetadata, true, 'a source is written by others: the protected-prefix rule applies');
  const render = (key: string | undefined) =>
    template.render({
      name: 'o',
      namespace: 'shop',
      kind: 'ConfigMap',
      resource: 'configmaps',
      group: '',
      apiVersion: 'v1',
      uid: 'u',
      labels: {},
      annotations: {},
      related: { namespace: { kind: 'Namespace', name: 'shop', labels: key ? { team: key } : {}, annotations: {} } },
      lookup: (
        source,
        k,
        field,
      ) => (source === 'teams' && k === 'payments' && field === 'costCenter' ? 'cc-1' : undefined),
    });
  assert.equal(render('payments'), 'cc-1');
  assert.equal(render('search'), undefined, 'no entry: absent');
  assert.equal(render(undefined), undefined, 'no key: absent');
  assert.equal(
    compileTemplate('{{teams[labels.app] | default "none"}}', { sources }).render({
      name: 'o',
      namespace: '',
      kind: 'ConfigMap',
      resource: 'configmaps',
      group: '',
      apiVersion: 'v1',
      uid: 'u',
      labels: { app: 'web' },
      annotations: {},
      lookup: () => undefined,
    }),
    'none',
  );
  assert.throws(
    () => compileTemplate('{{tams[labels.app]}}', { sources }),
    /unknown source "tams" \(did you mean "teams"\?\)/,
  );
  assert.throws(() => compileTemplate('{{teams[]}}', { sources }), TemplateError);
  assert.throws(
    () => compileTemplate('{{teams[teams[labels.a]]}}', { sources }),
    /a key is a variable, not another lookup/,
  );
  assert.throws(() => compileTemplate('{{teams[nmae]}}', { sources }), /unknown variable "nmae"/);
  assert.throws(
    () => config('sources: {teams: {file: /t.yaml}}\nkinds: [{resource: cm, labels: {a: "{{tems[name]}}"}}]'),
    (error: unknown) =>
      error instanceof ConfigError &&
      /kinds\.yaml: kinds\[0\]\.labels\["a"\]: .*unknown source "tems"/.test(error.message),
  );
});

test('sources in kinds.yaml: one of configMap, file or url each, checked where they are written', () => {
  const parsed = config(`
sources:
  teams: { configMap: { namespace: platform, name: teams, key: teams.yaml } }
  owners: { file: /etc/owners.yaml, required: true }
  catalog: { url: "https://catalog.example.com/t.json", interval: 1m, bearerTokenFile: /t }
labels: { a: "{{teams[name]}}" }
kinds: [{ resource: cm }]
`).sources;
  assert.deepEqual([...parsed.keys()], ['teams', 'owners', 'catalog']);
  assert.deepEqual(parsed.get('catalog')?.origin, {
    type: 'url',
    url: 'https://catalog.example.com/t.json',
    intervalMs: 60_000,
    timeoutMs: 10_000,
    caFile: undefined,
    bearerTokenFile: '/t',
    maxBytes: 1024 * 1024,
  });
  assert.equal(parsed.get('owners')?.required, true);
  assert.equal(parsed.get('owners')?.allowMassRemoval, false, 'outages refused unless allowed');
  const refused: [string, RegExp][] = [
    [
      'x: {file: /a, url: "https://b"}',
      /sources\.x: give exactly one of configMap, file or url \(found file and url\)/,
    ],
    ['x: {}', /sources\.x: give exactly one of configMap, file or url \(found none\)/],
    ['x: {url: "http://catalog/t.json"}', /sources\.x\.url: plain http:\/\/ sends the content.*allowHTTP: true/],
    ['x: {url: "https://u:p@catalog/t.json"}', /no credentials in the URL/],
    [
      'x: {url: "catalog.example.com/t.json?token=s3cret"}',
      /sources\.x\.url: "catalog\.example\.com\/t\.json\?…" is not a URL: write e\.g\. https:/,
    ],
    ['x: {file: relative.yaml}', /sources\.x\.file: "relative\.yaml": give an absolute path/],
    ['x: {file: /a, interval: 1m}', /sources\.x\.interval: only a url source takes it/],
    ['x: {configMap: {namespace: Bad, name: t}}', /sources\.x\.configMap\.namespace: "Bad" is not a namespace name/],
    ['X: {file: /a}', /sources\.X: a source name is lowercase/],
    ['x: {file: /a, requird: true}', /unknown field "requird" \(did you mean "required"\?\)/],
    ['x: {file: /a, allowMassRemoval: yes please}', /sources\.x\.allowMassRemoval: must be true or false/],
    [
      'x: {url: "https://c/t", interval: 600h}',
      /sources\.x\.interval: "600h" is longer than the 596h a timer can wait: use at most 596h/,
    ],
  ];
  for (const [yaml, message] of refused) {
    assert.throws(() => config(`sources:\n  ${yaml}\nkinds: [{resource: cm, labels: {a: b}}]`), message, yaml);
  }
  assert.ok(config('sources: {x: {url: "http://c/t", allowHTTP: true}}\nkinds: [{resource: cm, labels: {a: b}}]'));
});

test('the protected-prefix rule applies to values from sources', () => {
  assert.throws(
    () =>
      config('sources: {t: {file: /t}}\nkinds: [{resource: cm, labels: {example.kubernetes.io/team: "{{t[name]}}"}}]'),
    /under kubernetes\.io/,
  );
});

test('the lookup index: objects by what they looked up last; replaced, forgotten', () => {
  const index = new LookupIndex();
  const project = projector({ fieldManager: 'labeller', lookups: true });
  const object = (name: string) =>
    project(
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: 'ns', uid: name, resourceVersion: '1' } },
      `ns/${name}`,
      undefined,
    );
  const [a, b] = [object('a'), object('b')];
  index.record(a, ['teams\npayments']);
  index.record(b, ['teams\npayments', 'owners\nweb']);
  assert.deepEqual([...index.objects('teams', 'payments')].sort(), ['ns/a', 'ns/b']);
  // A's next version carries what it looked up: the index follows it there.
  const a2 = project(
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'a', namespace: 'ns', uid: 'a', resourceVersion: '2' } },
    'ns/a',
    a,
  );
  index.record(a2, ['teams\nsearch']);
  assert.deepEqual([...index.objects('teams', 'payments')], ['ns/b']);
  assert.deepEqual([...index.objects('teams', 'search')], ['ns/a']);
  index.forget(b);
  assert.deepEqual([...index.objects('owners', 'web')], []);
});

test('an empty document is a failure, not a source with no entries: null, nothing, a comment', () => {
  for (const text of ['', 'null', '~', '# maintenance\n']) {
    assert.throws(() => parseContent(text), /empty/, JSON.stringify(text));
  }
});

test('a YAML alias bomb is refused before it is expanded; a few aliases are fine', () => {
  const fields = Array.from({ length: 600 }, (_, i) => `f${i}: v`).join(', ');
  const bomb = `a: &a {${fields}}\n${Array.from({ length: 6000 }, (_, i) => `k${i}: *a`).join('\n')}\n`;
  const before = process.memoryUsage().rss;
  assert.throws(() => parseContent(bomb), /aliases expand to more than \d+ keys and fields/);
  assert.ok(process.memoryUsage().rss - before < 64 * 1024 * 1024, 'refused without expanding it');
  const shared = parseContent('defaults: &d {tier: web, oncall: ops}\npayments: *d\nsearch: *d\n');
  assert.equal(lookUp(shared.content, 'search', 'oncall'), 'ops');
});

test('what looks like an outage: no entries, or more than half of the keys (two or more) dropped at once', () => {
  const five = sourceContent({ red: 'cc-1', green: 'cc-2', blue: 'cc-3', pink: 'cc-4', gray: 'cc-5' });
  assert.equal(massRemoval(five, sourceContent({})), 'it has no entries');
  assert.equal(massRemoval(undefined, sourceContent({})), 'it has no entries');
  assert.equal(massRemoval(five, sourceContent({ error: 'maintenance window' })), 'it drops 5 of its 5 keys at once');
  assert.equal(massRemoval(five, sourceContent({ red: 'cc-1', green: 'cc-2' })), 'it drops 3 of its 5 keys at once');
  assert.equal(
    massRemoval(five, sourceContent({ red: 'x', green: 'y', blue: 'z' })),
    undefined,
    'two of five: an edit',
  );
  assert.equal(massRemoval(sourceContent({ a: '1' }), sourceContent({ b: '1' })), undefined, 'one key renamed');
  assert.equal(massRemoval(undefined, five), undefined, 'a first load');
});
