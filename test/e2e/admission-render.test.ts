// `labeller admission` against the real API server (issue 36): its output, applied with kubectl,
// labels objects in their create response exactly as the controller's semantics say: constants,
// the object's own metadata (two of its labels side by side too), its namespace's labels, a
// ConfigMap source through params (a missing entry sets nothing), defaults, skip and force,
// namespaces and selectors; a rendered value that is no label value is not set, and the create
// still succeeds (the API server would refuse the object otherwise, failurePolicy or not); the
// marker annotations list exactly the keys set, by every policy that matched.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadAll } from 'js-yaml';
import { policyName } from '../../src/admission/names.ts';
import { markerKeys, markerValues } from '../../src/labelling/admitted.ts';
import type { AdmissionList } from '../../src/commands/admission.ts';
import { policyLabels } from '../../src/admission/names.ts';
import type { MetadataField } from '../../src/config/model.ts';
import { ApiError } from '../../src/apimachinery/errors.ts';
import { admission, apply, policiesSkip } from './admission.ts';
import { configFile, create, createNamespace, eventually, patchLabels, skip } from './cluster.ts';

const FIELD_MANAGER = 'labeller-admission-e2e';
/** The marker annotations of this field manager's policies. */
const MARKERS = markerKeys(FIELD_MANAGER);

interface Created {
  readonly metadata: {
    readonly name: string;
    readonly labels?: Record<string, string>;
    readonly annotations?: Record<string, string>;
  };
}

/** The keys the marker of `field` lists on `object`, with their values. */
const marked = (object: Created, field: MetadataField): Record<string, string> =>
  markerValues(field, object.metadata.annotations?.[MARKERS[field]] ?? '');

/** The object's labels, or annotations, but the markers: what was set, compared with what the marker says. */
const own = (map: Record<string, string> | undefined): Record<string, string> =>
  Object.fromEntries(Object.entries(map ?? {}).filter(([key]) => !Object.values(MARKERS).includes(key)));

describe('labeller admission', { skip: await policiesSkip(skip) }, () => {
  test('its policies label objects at their create as the controller would, and mark what they set', async () => {
    const [forced, skipped, elsewhere] = [
      await createNamespace('admit-force'),
      await createNamespace('admit-skip'),
      await createNamespace('admit-none'),
    ];
    await patchLabels(`/api/v1/namespaces/${forced}`, { team: 'payments' });
    await patchLabels(`/api/v1/namespaces/${skipped}`, { team: 'search' });
    await patchLabels(`/api/v1/namespaces/${elsewhere}`, { team: 'other' });
    await create(`/api/v1/namespaces/${forced}/configmaps`, { metadata: { name: 'teams' }, data: { shop: 'cc-12' } });
    const config = configFile(`
labels:
  example.com/managed: labeller
  example.com/team: "{{namespace.labels.team}}"
annotations:
  example.com/runbook: "https://runbooks.example.com/?ns={{namespace}},name={{name}}"
sources:
  teams: {configMap: {namespace: ${forced}, name: teams}}
kinds:
  - resource: configmaps
    namespaces: [${forced}]
    labels:
      example.com/kind: "{{kind}}"
      example.com/app: "{{labels.app | default \\"none\\"}}"
      example.com/cc: "{{teams[labels.app]}}"
      example.com/copy: "{{annotations.example.com/value}}"
      example.com/tier: "tier-{{labels.tier}}"
      # Two object variables side by side: summed as strings, which the API server's checker takes.
      example.com/joined: "{{labels.app}}{{labels.tier}}"
      example.com/owner: "{{owner.name}}"
  - resource: cm
    namespaces: [${skipped}]
    selector: "!legacy"
    conflicts: skip
`);
    const args = ['--config', config, '--field-manager', FIELD_MANAGER];
    const { stdout, stderr } = await admission(args);
    const json = JSON.parse((await admission([...args, '-o', 'json'])).stdout) as AdmissionList;
    assert.deepEqual(loadAll(stdout), json.items, '-o yaml and -o json render the same objects');
    const name = (...parts: string[]) => policyName(FIELD_MANAGER, 'configmaps', ...parts);
    assert.deepEqual(json.items.map((o) => `${o.kind} ${o.metadata.name}`), [
      `MutatingAdmissionPolicy ${name(forced)}`,
      `MutatingAdmissionPolicyBinding ${name(forced)}`,
      `MutatingAdmissionPolicy ${name(forced, 'teams')}`,
      `MutatingAdmissionPolicyBinding ${name(forced, 'teams')}`,
      `MutatingAdmissionPolicy ${name(skipped)}`,
      `MutatingAdmissionPolicyBinding ${name(skipped)}`,
    ]);
    // What CEL cannot render is said: in the JSON, and on stderr beside the YAML.
    assert.deepEqual(json.controllerRules.map((r) => r.key), ['example.com/owner']);
    assert.match(stderr, /"msg":"left to the controller".*"key":"example.com\/owner"/);

    await apply(stdout, FIELD_MANAGER);
    const configmap = (ns: string, name: string, metadata: object = {}) =>
      create<Created>(`/api/v1/namespaces/${ns}/configmaps`, { metadata: { name, ...metadata } });
    // The API server enforces new policies within a few seconds.
    let probes = 0;
    await eventually(
      async () => (await configmap(forced, `probe-${probes++}`)).metadata.labels?.['example.com/managed'],
      'the policies in force',
    );
    await eventually(
      async () =>
        (await configmap(forced, `probe-${probes++}`, { labels: { app: 'shop' } })).metadata.labels?.['example.com/cc'],
      'the source policy in force',
    );
    await eventually(
      async () => (await configmap(skipped, `probe-${probes++}`)).metadata.labels?.['example.com/managed'],
      'the skip policy in force',
    );

    // Constants, the kind, the namespace's label, a default, the name in an annotation, with "," and "=".
    const plain = await configmap(forced, 'plain');
    const runbook = `https://runbooks.example.com/?ns=${forced},name=plain`;
    assert.deepEqual(own(plain.metadata.labels), {
      'example.com/managed': 'labeller',
      'example.com/team': 'payments',
      'example.com/kind': 'ConfigMap',
      'example.com/app': 'none',
    });
    assert.deepEqual(own(plain.metadata.annotations), { 'example.com/runbook': runbook });
    assert.deepEqual(marked(plain, 'labels'), own(plain.metadata.labels));
    assert.deepEqual(marked(plain, 'annotations'), { 'example.com/runbook': runbook });

    // A source entry, through the second policy; both policies' keys in the marker. Text around a
    // variable, and two variables side by side.
    const shop = await configmap(forced, 'shop', { labels: { app: 'shop', tier: 'web' } });
    const set = {
      'example.com/managed': 'labeller',
      'example.com/team': 'payments',
      'example.com/kind': 'ConfigMap',
      'example.com/app': 'shop',
      'example.com/tier': 'tier-web',
      'example.com/joined': 'shopweb',
      'example.com/cc': 'cc-12',
    };
    assert.deepEqual(shop.metadata.labels, { app: 'shop', tier: 'web', ...set });
    assert.deepEqual(marked(shop, 'labels'), set);
    // Each policy appends its entries to what the one before it wrote, in whichever order the API server runs them.
    const first =
      'example.com/app=shop,example.com/joined=shopweb,example.com/kind=ConfigMap,example.com/managed=labeller,' +
      'example.com/team=payments,example.com/tier=tier-web';
    assert.ok(
      [`${first},example.com/cc=cc-12`, `example.com/cc=cc-12,${first}`].includes(
        shop.metadata.annotations?.[MARKERS.labels] ?? '',
      ),
      shop.metadata.annotations?.[MARKERS.labels],
    );

    // No entry in the source: nothing set, nothing marked.
    const unknown = await configmap(forced, 'unknown', { labels: { app: 'unknown' } });
    assert.equal(unknown.metadata.labels?.['example.com/cc'], undefined);
    assert.equal(marked(unknown, 'labels')['example.com/cc'], undefined);

    // A copied value that is no label value: not set, and the object is created all the same.
    const invalid = await configmap(forced, 'invalid', { annotations: { 'example.com/value': 'not a label value!' } });
    assert.equal(invalid.metadata.labels?.['example.com/copy'], undefined);
    assert.equal(marked(invalid, 'labels')['example.com/copy'], undefined);
    assert.equal(invalid.metadata.labels?.['example.com/managed'], 'labeller', 'the other keys are set');
    const copied = await configmap(forced, 'copied', { annotations: { 'example.com/value': 'fine' } });
    assert.equal(copied.metadata.labels?.['example.com/copy'], 'fine');

    // A generated name is given after admission: what reads it is left to the controller.
    const generated = await create<Created>(`/api/v1/namespaces/${forced}/configmaps`, {
      metadata: { generateName: 'gen-' },
    });
    assert.equal(generated.metadata.annotations?.['example.com/runbook'], undefined);
    assert.equal(generated.metadata.annotations?.[MARKERS.annotations], undefined, 'no annotation set, no marker');
    assert.equal(generated.metadata.labels?.['example.com/managed'], 'labeller');

    // force: the request's value is replaced, and marked; skip: it is kept, and not marked.
    const carried = { labels: { 'example.com/managed': 'someone-else' } };
    const force = await configmap(forced, 'force', carried);
    assert.equal(force.metadata.labels?.['example.com/managed'], 'labeller');
    assert.equal(marked(force, 'labels')['example.com/managed'], 'labeller');
    const kept = await configmap(skipped, 'skip', carried);
    assert.deepEqual(own(kept.metadata.labels), {
      'example.com/managed': 'someone-else',
      'example.com/team': 'search',
    });
    assert.deepEqual(marked(kept, 'labels'), { 'example.com/team': 'search' });

    // The selector and the namespaces restrict.
    const legacy = await configmap(skipped, 'legacy', { labels: { legacy: 'true' } });
    assert.deepEqual(legacy.metadata.labels, { legacy: 'true' });
    assert.equal(legacy.metadata.annotations, undefined);
    const outside = await configmap(elsewhere, 'outside');
    assert.equal(outside.metadata.labels, undefined);
    assert.equal(outside.metadata.annotations, undefined);
  });

  test('why no invalid label value is ever set: the API server refuses the object, whatever the failure policy', async () => {
    const ns = await createNamespace('admit-invalid');
    const name = `${FIELD_MANAGER}-invalid`;
    const metadata = { name, labels: policyLabels(FIELD_MANAGER) };
    await apply(
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'List',
        items: [
          {
            apiVersion: 'admissionregistration.k8s.io/v1',
            kind: 'MutatingAdmissionPolicy',
            metadata,
            spec: {
              matchConstraints: {
                resourceRules: [{
                  apiGroups: [''],
                  apiVersions: ['v1'],
                  operations: ['CREATE'],
                  resources: ['configmaps'],
                }],
                namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } },
              },
              mutations: [{
                patchType: 'ApplyConfiguration',
                applyConfiguration: { expression: 'Object{metadata: Object.metadata{labels: {"x": "not valid!"}}}' },
              }],
              failurePolicy: 'Ignore',
              reinvocationPolicy: 'Never',
            },
          },
          {
            apiVersion: 'admissionregistration.k8s.io/v1',
            kind: 'MutatingAdmissionPolicyBinding',
            metadata,
            spec: { policyName: name },
          },
        ],
      }),
      FIELD_MANAGER,
    );
    let probes = 0;
    const error = await eventually(async () => {
      try {
        await create(`/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: `probe-${probes++}` } });
        return false;
      } catch (error) {
        return error instanceof ApiError && error;
      }
    }, 'the policy in force');
    assert.equal(error.status, 422);
    assert.match(error.message, /metadata\.labels: Invalid value: "not valid!"/);
  });
});
