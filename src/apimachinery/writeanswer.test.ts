import assert from 'node:assert/strict';
import { Buffer } from 'node:buffer';
import { test } from 'node:test';
import { parseWriteAnswer as parseBytes, WriteAnswer } from './writeanswer.ts';

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

test('a WriteAnswer has the version at once, found before any parse, and the metadata when read; managedFields never decoded', () => {
  // A name that looks like the version's key, escaped inside its string, comes first.
  const metadata = {
    name: 'x"resourceVersion":"1"',
    namespace: 'shop',
    uid: 'u1',
    resourceVersion: '42',
    labels: { a: 'b' },
  };
  const text = JSON.stringify({
    kind: 'PartialObjectMetadata',
    apiVersion: 'meta.k8s.io/v1',
    metadata: { ...metadata, managedFields },
  });
  let decoded = 0;
  const bytes = Buffer.from(text, 'utf8');
  const counting = {
    indexOf: (needle: string) => bytes.indexOf(needle),
    toString: (encoding: 'utf8', start?: number, end?: number) => {
      decoded += (end ?? bytes.length) - (start ?? 0);
      return bytes.toString(encoding, start, end);
    },
  };
  const answer = new WriteAnswer(counting);
  assert.equal(answer.resourceVersion, '42');
  const head = bytes.indexOf(',"managedFields":[');
  assert.equal(decoded, head, 'the text before managedFields is decoded, and nothing else');
  assert.deepEqual(answer.metadata, metadata);
  assert.equal(answer.kind, 'PartialObjectMetadata');
  assert.equal(decoded, head, 'read without decoding more');
  // An answer written otherwise (indented: no `"resourceVersion":"` in it) is parsed whole, at once.
  const indented = new WriteAnswer(
    Buffer.from(JSON.stringify({ metadata: { name: 'a', resourceVersion: '7' } }, null, 1)),
  );
  assert.equal(indented.resourceVersion, '7');
  assert.deepEqual(indented.metadata, { name: 'a', resourceVersion: '7' });
  assert.throws(() => new WriteAnswer(Buffer.from('not json')), SyntaxError);
});
