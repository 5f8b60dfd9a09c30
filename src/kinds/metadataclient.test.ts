import assert from 'node:assert/strict';
import { test } from 'node:test';
import jsonpatch from 'fast-json-patch';
import type { PartialObjectMetadata } from '../apimachinery/objects.ts';
import type { JsonPatchOperation } from '../kube/api.ts';
import { markerKeys } from '../labelling/admitted.ts';
import { answer } from '../runtime/testing/scripted.ts';
import { metadataClient } from './metadataclient.ts';

test('the removal of admitted keys: the uid and version tested, each key removed as an escaped JSON Pointer', async () => {
  const object: PartialObjectMetadata = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: 'cm',
      namespace: 'shop',
      uid: 'u-1',
      resourceVersion: '7',
      labels: { 'example.com/team': 'a', 'a~b': 'b', kept: 'k' },
      annotations: { 'example.com/runbook': 'r', [markerKeys('labeller').labels]: 'example.com/team' },
    },
  };
  const sent: JsonPatchOperation[][] = [];
  const client = metadataClient(() => ({
    apply: () => Promise.reject(new Error('no apply expected')),
    list: () => Promise.reject(new Error('no list expected')),
    patch: (_name, _namespace, operations) => {
      sent.push([...operations]);
      // What the API server would do: the whole patch, or nothing when a test fails.
      const patched = jsonpatch.applyPatch(structuredClone(object), operations.map((op) => ({ ...op })), true, false);
      return Promise.resolve(answer(patched.newDocument));
    },
  }), 'labeller');
  const target = { apiVersion: 'v1', kind: 'ConfigMap', name: 'cm', namespace: 'shop', uid: 'u-1' };
  const keys = { labels: ['example.com/team', 'a~b'], annotations: ['example.com/runbook'] };
  const removed = await client.remove(target, '7', keys, { markers: ['labels'], dryRun: false, annotationKeys: [] });
  assert.deepEqual(sent, [[
    { op: 'test', path: '/metadata/uid', value: 'u-1' },
    { op: 'test', path: '/metadata/resourceVersion', value: '7' },
    { op: 'remove', path: '/metadata/labels/example.com~1team' },
    { op: 'remove', path: '/metadata/labels/a~0b' },
    { op: 'remove', path: '/metadata/annotations/example.com~1runbook' },
    { op: 'remove', path: '/metadata/annotations/labeller.io~1admitted-labels.labeller' },
  ]]);
  assert.deepEqual(removed.labels, { kept: 'k' });
});
