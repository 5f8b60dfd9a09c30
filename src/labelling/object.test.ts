import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compileTemplate } from '../config/template.ts';
import type { ManagedFieldsEntry, PartialObjectMetadata } from '../apimachinery/objects.ts';
import { objectKey } from '../runtime/store.ts';
import { markerKeys } from './admitted.ts';
import { digest } from './digest.ts';
import { type LabelledObject, ownedKeys, projector } from './object.ts';

const ownedLabels = (fields: ManagedFieldsEntry[] | undefined, manager: string) => ownedKeys(fields, manager, 'labels');

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
  assert.deepEqual(ownedKeys(managedFields, 'labeller', 'annotations'), ['note']);
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
  const project = projector({ fieldManager: 'labeller', read: new Set(['example.com/owner', 'example.com/missing']) });
  assert.deepEqual(fields(cached(project, object)), {
    key: 'shop/web',
    name: 'web',
    namespace: 'shop',
    uid: 'u1',
    resourceVersion: '7',
    labels: { app: 'web' },
    annotations: { 'example.com/owner': 'alice' },
    ownedLabels: ['team'],
    ownedAnnotations: [],
    admitted: { labels: [], annotations: [], marked: [] },
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
  assert.deepEqual(fields(cached(projector({ fieldManager: 'labeller' }), node)), {
    key: 'n1',
    name: 'n1',
    namespace: '',
    uid: 'u2',
    resourceVersion: '1',
    labels: {},
    annotations: {},
    ownedLabels: [],
    ownedAnnotations: [],
    admitted: { labels: [], annotations: [], marked: [] },
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
  const project = projector({ fieldManager: 'labeller', owners: true });
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
    !('owner' in cached(projector({ fieldManager: 'labeller' }), pod('c'))),
    'no owner field unless templates read owners',
  );
});

test('projections share one owned-key list while cached, and release lets it go', () => {
  const project = projector({ fieldManager: 'labeller' });
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
  assert.equal(a.ownedLabels, b.ownedLabels, 'one copy of the list');
  project.release(a);
  const c = cached(project, meta('c', 'other'));
  assert.equal(c.ownedLabels, b.ownedLabels, 'still shared while b is cached');
  project.release(b);
  project.release(c);
  assert.notEqual(
    cached(project, meta('d', 'gone')).ownedLabels,
    a.ownedLabels,
    'the list was dropped with its last projection',
  );
});

test('annotations labeller writes are kept as digests, in key order, with the size of the rest', () => {
  const project = projector({ fieldManager: 'labeller', written: ['example.com/b', 'example.com/a'] });
  const object: PartialObjectMetadata = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: 'c',
      namespace: 'shop',
      uid: 'u',
      resourceVersion: '1',
      annotations: { 'example.com/a': 'runbook', other: 'é' },
      managedFields: [{
        manager: 'labeller',
        operation: 'Apply',
        fieldsV1: { 'f:metadata': { 'f:annotations': { 'f:example.com/a': {} } } },
      }],
    },
  };
  const kept = cached(project, object);
  assert.deepEqual(kept.annotations, {}, 'values are not kept');
  assert.deepEqual(kept.ownedAnnotations, ['example.com/a']);
  assert.ok(Number.isNaN(kept.written?.digests[0]), 'b: not carried');
  assert.equal(kept.written?.digests[1], digest('runbook'));
  assert.equal(kept.written?.otherBytes, 'other'.length + 2, 'UTF-8 bytes, as the API server counts');
  const { annotations: _, ...without } = object.metadata;
  const bare = cached(project, { ...object, metadata: without });
  assert.equal(
    bare.written,
    cached(project, { ...object, metadata: { ...object.metadata, name: 'd', annotations: {} } }).written,
    'one shared value for objects without any',
  );
});

test('admitted keys: those a marker lists at the value the object carries and no manager owns; one copy of each set', () => {
  const project = projector({ fieldManager: 'labeller' });
  const ADMITTED = markerKeys('labeller');
  const meta = (
    name: string,
    labels: Record<string, string>,
    managedFields: ManagedFieldsEntry[] = [],
    annotations: Record<string, string> = {},
  ): PartialObjectMetadata => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name,
      namespace: 'shop',
      uid: name,
      resourceVersion: '1',
      labels,
      annotations: { [ADMITTED.labels]: 'team=payments,tier=web,zone=a', ...annotations },
      managedFields,
    },
  });
  // zone: the object carries no such label (removed since, by someone).
  const fresh = cached(project, meta('fresh', { team: 'payments', tier: 'web', app: 'shop' }));
  assert.deepEqual(fresh.admitted, { labels: ['team', 'tier'], annotations: [], marked: ['labels'] });
  assert.deepEqual(fresh.ownedLabels, []);
  // Changed by kubectl label (it owns it now), and set again by the creator's own apply (shared).
  const touched = cached(
    project,
    meta('touched', { team: 'search', tier: 'web' }, [entry('kubectl-label', 'Update', ['team'])]),
  );
  assert.deepEqual(touched.admitted.labels, ['tier']);
  const applied = cached(
    project,
    meta('applied', { team: 'payments', tier: 'web' }, [entry('argocd-controller', 'Apply', ['tier'])]),
  );
  assert.deepEqual(applied.admitted.labels, ['team']);
  // Applied to for the first time with no managedFields: the API server's placeholder holds them, no writer.
  const placeheld = cached(
    project,
    meta('placeheld', { team: 'payments', tier: 'web' }, [entry('before-first-apply', 'Update', ['team', 'tier'])]),
  );
  assert.deepEqual(placeheld.admitted.labels, ['team', 'tier']);
  // Applied by labeller too: owned, and still admitted (its apply alone cannot remove what the policies set).
  const adopted = cached(
    project,
    meta('adopted', { team: 'payments', tier: 'web' }, [entry('labeller', 'Apply', ['team'])]),
  );
  assert.deepEqual([adopted.ownedLabels, adopted.admitted.labels], [['team'], ['team', 'tier']]);
  // Shared by labeller's apply with the placeholder alone: labeller's to remove, whatever the marker says.
  const shared = cached(
    project,
    meta('shared', { team: 'payments', tier: 'web', extra: 'x' }, [
      entry('before-first-apply', 'Update', ['team', 'tier', 'extra']),
      entry('labeller', 'Apply', ['extra']),
    ], { [ADMITTED.labels]: '' }),
  );
  assert.deepEqual(shared.admitted.labels, ['extra']);
  // Annotations compare by value too, escaped as the marker writes them.
  const annotated = cached(
    project,
    meta('annotated', {}, [], { [ADMITTED.annotations]: 'runbook=https://x/a%2Cb', runbook: 'https://x/a,b' }),
  );
  assert.deepEqual(annotated.admitted, { labels: [], annotations: ['runbook'], marked: ['labels', 'annotations'] });
  assert.equal(cached(project, meta('again', { team: 'payments', tier: 'web' })).admitted, fresh.admitted, 'shared');
  const bare = cached(project, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'b', uid: 'b', resourceVersion: '1' },
  });
  assert.deepEqual(bare.admitted, { labels: [], annotations: [], marked: [] });
  // Another labeller's policies (another field manager) set these: not this one's.
  const theirs = markerKeys('labeller-b');
  const other = cached(project, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: 'other',
      uid: 'other',
      resourceVersion: '1',
      labels: { team: 'payments' },
      annotations: { [theirs.labels]: 'team=payments' },
    },
  });
  assert.deepEqual(other.admitted, { labels: [], annotations: [], marked: [] });
});

test("a marker is believed only as labeller's policies leave it (issue 46, items 2 and 4)", () => {
  const project = projector({ fieldManager: 'labeller' });
  const MARKER = markerKeys('labeller').labels;
  const CREATED = '2026-11-28T10:00:00Z';
  /** A managedFields entry owning `labels` and `annotations`, written at `time`. */
  const owns = (manager: string, time: string, labels: string[], annotations: string[] = []): ManagedFieldsEntry => ({
    manager,
    operation: 'Update',
    apiVersion: 'v1',
    time,
    fieldsType: 'FieldsV1',
    fieldsV1: {
      'f:metadata': {
        'f:labels': Object.fromEntries(labels.map((k) => [`f:${k}`, {}])),
        'f:annotations': Object.fromEntries(annotations.map((k) => [`f:${k}`, {}])),
      },
    },
  });
  const admitted = (labels: Record<string, string>, marker: string, managedFields: ManagedFieldsEntry[]) =>
    cached(project, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: 'x',
        namespace: 'shop',
        uid: 'x',
        resourceVersion: '1',
        creationTimestamp: CREATED,
        labels,
        annotations: { [MARKER]: marker },
        managedFields,
      },
    }).admitted.labels;

  // Forced at create over the request's team=mine: the creator owns it, at the create; labeller's all the same.
  assert.deepEqual(admitted({ team: 'payments' }, '!team=payments', [owns('kubectl-create', CREATED, ['team'])]), [
    'team',
  ]);
  // Not forced, yet owned by the creator: the request brought that value itself; shared, not labeller's.
  assert.deepEqual(admitted({ team: 'payments' }, 'team=payments', [owns('kubectl-create', CREATED, ['team'])]), []);
  // Set since by someone else (kubectl label, a minute later): theirs, forced or not.
  assert.deepEqual(
    admitted({ team: 'payments' }, '!team=payments', [owns('kubectl-label', '2026-11-28T10:01:00Z', ['team'])]),
    [],
  );
  // The request carried a marker, which the policies replaced: owned by the create's entry, believed.
  assert.deepEqual(
    admitted({ team: 'payments', tier: 'web' }, 'tier=web', [owns('velero', CREATED, [], [MARKER])]),
    ['tier'],
  );
  // Forged in the create's very second: two entries from then, neither taken for the create's.
  assert.deepEqual(
    admitted({ team: 'payments', tier: 'web' }, 'tier=web', [
      owns('velero', CREATED, ['team']),
      owns('kubectl-annotate', CREATED, [], [MARKER]),
    ]),
    [],
  );
  // A marker written after the create (kubectl annotate, a forged one) vouches for nothing: not
  // even a key no manager owns, such as one another labeller's policy set.
  assert.deepEqual(
    admitted({ 'example.com/owner': 'b' }, 'example.com/owner=b', [
      owns('kubectl-annotate', '2026-11-28T10:05:00Z', [], [MARKER]),
    ]),
    [],
  );
});

test('fields outside the metadata that templates read: kept by path where set, nothing else of the object; one copy of each set', () => {
  const fields = compileTemplate('{{spec.storageClassName}}/{{status.phase}}/{{spec.missing}}').fields;
  const project = projector({ fieldManager: 'labeller', fields });
  const claim = (name: string) => ({
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name, namespace: 'shop', uid: name, resourceVersion: '1' },
    spec: { storageClassName: 'fast', resources: { requests: { storage: '1Gi' } } },
    status: { phase: 'Bound' },
  });
  const a = cached(project, claim('a'));
  const b = cached(project, claim('b'));
  assert.deepEqual(a.fields, { 'spec.storageClassName': 'fast', 'status.phase': 'Bound' });
  assert.equal(a.fields, b.fields, 'one copy of the same values');
  assert.equal(Object.hasOwn(a, 'spec'), false, 'the rest of the object is not kept');
  assert.equal(cached(projector({ fieldManager: 'labeller' }), claim('c')).fields, undefined, 'none read: none kept');
});
