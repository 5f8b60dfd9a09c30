import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ManagedFieldsEntry, PartialObjectMetadata } from '../kube/objects.ts';
import { objectKey } from '../runtime/store.ts';
import { type LabelledObject, ownedLabels, projector } from './object.ts';

/** Projects `object` as the store does, under its key. */
const cached = (project: ReturnType<typeof projector>, object: PartialObjectMetadata): LabelledObject =>
  project(object, objectKey(object.metadata), undefined);

/** Every field of a cached object, the name (read from the key) included. */
const fields = (object: LabelledObject) => ({ ...object, name: object.name });

/** A managedFields entry owning the given label keys. */
function entry(
  manager: string,
  operation: string,
  keys: readonly string[],
  extra: Partial<ManagedFieldsEntry> = {},
): ManagedFieldsEntry {
  const labels = Object.fromEntries(keys.map((key) => [`f:${key}`, {}]));
  return {
    manager,
    operation,
    apiVersion: 'v1',
    fieldsType: 'FieldsV1',
    fieldsV1: { 'f:metadata': { 'f:labels': labels } },
    ...extra,
  };
}

test("ownedLabels reads only the manager's Apply entries on the main resource", () => {
  const managedFields: ManagedFieldsEntry[] = [
    entry('labeller', 'Apply', ['team', 'example.com/tier']),
    entry('labeller', 'Update', ['via-update']),
    entry('kubectl', 'Apply', ['theirs']),
    entry('labeller', 'Apply', ['on-status'], { subresource: 'status' }),
  ];
  assert.deepEqual(ownedLabels(managedFields, 'labeller'), ['team', 'example.com/tier']);
  assert.deepEqual(ownedLabels(managedFields, 'kubectl'), ['theirs']);
  assert.deepEqual(ownedLabels(managedFields, 'nobody'), []);
});

test('ownedLabels ignores non-label fields and tolerates entries without labels or fields', () => {
  const managedFields: ManagedFieldsEntry[] = [
    {
      manager: 'labeller',
      operation: 'Apply',
      fieldsV1: {
        'f:metadata': { 'f:labels': { '.': {}, 'f:app': {} }, 'f:annotations': { 'f:note': {} } },
        'f:spec': { 'f:replicas': {} },
      },
    },
    { manager: 'labeller', operation: 'Apply', fieldsV1: { 'f:metadata': {} } },
    { manager: 'labeller', operation: 'Apply' },
  ];
  assert.deepEqual(ownedLabels(managedFields, 'labeller'), ['app']);
  assert.deepEqual(ownedLabels(undefined, 'labeller'), []);
});

test('the projection keeps identity, labels, owned keys and only the annotations templates read', () => {
  const object: PartialObjectMetadata = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: {
      name: 'web',
      namespace: 'shop',
      uid: 'u1',
      resourceVersion: '7',
      labels: { app: 'web' },
      annotations: {
        'example.com/owner': 'alice',
        'kubectl.kubernetes.io/last-applied-configuration': '{"huge":true}',
      },
      managedFields: [entry('labeller', 'Apply', ['team']), entry('kubectl', 'Update', ['app'])],
    },
  };
  const project = projector('labeller', new Set(['example.com/owner', 'example.com/missing']));
  assert.deepEqual(fields(cached(project, object)), {
    key: 'shop/web',
    name: 'web',
    namespace: 'shop',
    uid: 'u1',
    resourceVersion: '7',
    labels: { app: 'web' },
    annotations: { 'example.com/owner': 'alice' },
    owned: ['team'],
    deleting: false,
  });
  assert.ok(!('managedFields' in cached(project, object)));
  assert.equal(project.version(cached(project, object)), '7');
  assert.equal(project.key?.(cached(project, object)), 'shop/web');
});

test('the projection of a bare cluster-scoped object has empty namespace, labels and annotations', () => {
  const node: PartialObjectMetadata = {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: 'n1', uid: 'u2', resourceVersion: '1', annotations: { a: 'b' } },
  };
  assert.deepEqual(fields(cached(projector('labeller', new Set()), node)), {
    key: 'n1',
    name: 'n1',
    namespace: '',
    uid: 'u2',
    resourceVersion: '1',
    labels: {},
    annotations: {},
    owned: [],
    deleting: false,
  });
});

test('with owners, the projection keeps the controller reference only, its type strings shared', () => {
  const pod = (name: string): PartialObjectMetadata => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: 'shop',
      uid: `u-${name}`,
      resourceVersion: '1',
      ownerReferences: [
        { apiVersion: 'v1', kind: 'Node', name: 'n1', uid: 'n' },
        {
          apiVersion: JSON.parse('"apps/v1"') as string,
          kind: 'ReplicaSet',
          name: 'web-1',
          uid: 'rs',
          controller: true,
        },
      ],
    },
  });
  const project = projector('labeller', new Set(), true);
  const [a, b] = [cached(project, pod('a')), cached(project, pod('b'))];
  assert.deepEqual(a.owner, { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-1', uid: 'rs' });
  assert.equal(a.owner?.apiVersion, b.owner?.apiVersion);
  assert.equal(
    cached(project, { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'bare', uid: 'x', resourceVersion: '1' } })
      .owner,
    undefined,
  );
  assert.equal(a.name, 'a');
  assert.ok(
    !('owner' in cached(projector('labeller', new Set()), pod('c'))),
    'no owner field unless templates read owners',
  );
});

test('projections share one owned-key list while cached, and release lets it go', () => {
  const project = projector('labeller', new Set());
  const meta = (name: string, namespace: string): PartialObjectMetadata => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name,
      namespace,
      uid: name,
      resourceVersion: '1',
      managedFields: [entry('labeller', 'Apply', ['team'])],
    },
  });
  const a = cached(project, meta('a', 'gone'));
  const b = cached(project, meta('b', 'gone'));
  assert.equal(a.owned, b.owned, 'one copy of the list');
  project.release(a);
  const c = cached(project, meta('c', 'other'));
  assert.equal(c.owned, b.owned, 'still shared while b is cached');
  project.release(b);
  project.release(c);
  assert.notEqual(cached(project, meta('d', 'gone')).owned, a.owned, 'the list was dropped with its last projection');
});
