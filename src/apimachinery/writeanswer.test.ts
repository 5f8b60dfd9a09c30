import assert from 'node:assert/strict';
import { Buffer } from 'node:buffer';
import { test } from 'node:test';
import { parseWriteAnswer as parseBytes } from './writeanswer.ts';

/** The answer's text as the client hands it over: its bytes. */
const parseWriteAnswer = (text: string) => parseBytes(Buffer.from(text, 'utf8'));

const managedFields = [
  {
    manager: 'labeller',
    operation: 'Apply',
    fieldsType: 'FieldsV1',
    fieldsV1: { 'f:metadata': { 'f:labels': { 'f:team': {} } } },
  },
  {
    manager: 'kubectl',
    operation: 'Update',
    fieldsV1: { 'f:spec': { 'f:ports': { 'k:{"port":80,"protocol":"TCP"}': {} } } },
  },
];

test('a write answer is read without its managedFields, labels, annotations (non-ASCII ones too: the cut is at a byte offset) and version intact', () => {
  const metadata = {
    name: 'web',
    namespace: 'shop',
    uid: 'u1',
    resourceVersion: '42',
    labels: { team: 'payments', managedFields: 'x' },
    // Values that look like the cut point, escaped inside their strings.
    annotations: { note: ',"managedFields":[', other: '"}}', snow: 'naïve ☃ 🚀' },
    ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-1', uid: 'r1' }],
    managedFields,
  };
  const answer = { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata };
  const { managedFields: _, ...rest } = metadata;
  assert.deepEqual(parseWriteAnswer(JSON.stringify(answer)), { ...answer, metadata: rest });
  // A full object (a server that ignored as=PartialObjectMetadata): its spec goes with the cut.
  const full = { kind: 'Service', apiVersion: 'v1', metadata, spec: { ports: [{ port: 80 }] } };
  assert.deepEqual(parseWriteAnswer(JSON.stringify(full)), { kind: 'Service', apiVersion: 'v1', metadata: rest });
});

test('an answer of another shape is parsed whole', () => {
  // managedFields before the version: the cut has none, so the whole is read.
  const reordered =
    '{"metadata":{"name":"a","managedFields":[{"manager":"m"}],"resourceVersion":"7"},"kind":"ConfigMap"}';
  assert.deepEqual(parseWriteAnswer(reordered), JSON.parse(reordered));
  // Not an object's answer (a list): the cut does not parse.
  const list =
    '{"kind":"List","items":[{"metadata":{"name":"a","managedFields":[]}}],"metadata":{"resourceVersion":"9"}}';
  assert.deepEqual(parseWriteAnswer(list), JSON.parse(list));
  const without = { kind: 'ConfigMap', metadata: { name: 'a', resourceVersion: '3' } };
  assert.deepEqual(parseWriteAnswer(JSON.stringify(without)), without);
  assert.throws(() => parseWriteAnswer('not json'), SyntaxError);
});
