import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Layout } from './layout.ts';
import { BUCKETS, fnv1a64 } from './ranges.ts';

const names = (count: number, name: (index: number) => string) => Array.from({ length: count }, (_, i) => name(i));

test('the uniform layout: equal buckets by the hash top byte; its selector names them in 16 hex digits, the end 17', () => {
  const layout = Layout.uniform;
  assert.equal(layout.bucketOf('default'), 0xeb);
  assert.equal(
    layout.selectorOf('object.metadata.namespace', new Set([0, 1, 2, 7, 255])),
    "shardRange(object.metadata.namespace, '0x0000000000000000', '0x0300000000000000') || " +
      "shardRange(object.metadata.namespace, '0x0700000000000000', '0x0800000000000000') || " +
      "shardRange(object.metadata.namespace, '0xff00000000000000', '0x10000000000000000')",
  );
  assert.equal(layout.selectorOf('object.metadata.namespace', new Set()), undefined);
  assert.equal(layout.encode(), 'uniform');
  assert.equal(Layout.decode('uniform'), Layout.uniform);
  assert.equal(Layout.of([]), Layout.uniform);
});

test('Layout.of: names that differ only at the end, crowded into a few equal buckets, are spread over all', () => {
  for (
    const namespaces of [
      names(1000, (i) => `tenant-${i}`),
      names(1000, (i) => `x-${String(i).padStart(4, '0')}`),
      names(300, (i) => `t${i}`),
      names(5000, (i) => `ns${i}`),
    ]
  ) {
    assert.ok(Layout.uniform.fullest(namespaces) > 3 * Math.ceil(namespaces.length / BUCKETS), 'crowded at first');
    const layout = Layout.of(namespaces);
    const fair = (namespaces.length + BUCKETS) / BUCKETS;
    assert.ok(layout.fullest(namespaces) <= Math.ceil(fair) + 1, `${namespaces[0]}: ${layout.fullest(namespaces)}`);
    // Every bucket is a range of its own: selectors stay valid, later namespaces find a bucket.
    const used = new Set(namespaces.map((namespace) => layout.bucketOf(namespace)));
    assert.ok(used.size >= Math.min(namespaces.length, BUCKETS) / 2, `${used.size} buckets in use`);
    assert.equal(Layout.decode(layout.encode())?.id, layout.id, 'published and read back alike');
  }
});

test('Layout.of: few namespaces, one to a bucket; the selector of a bucket keeps exactly its namespaces', () => {
  const namespaces = ['default', 'kube-system', 'kube-public', 'team-a', 'team-b'];
  const layout = Layout.of(namespaces);
  assert.equal(layout.fullest(namespaces), 1);
  for (const namespace of namespaces) {
    const bucket = layout.bucketOf(namespace);
    const selector = layout.selectorOf('f', new Set([bucket]))!;
    const [, start, end] = /'(0x[0-9a-f]+)', '(0x[0-9a-f]+)'/.exec(selector)!;
    const hash = fnv1a64(namespace);
    assert.ok(BigInt(start!) <= hash && hash < BigInt(end!), `${namespace} within its bucket's range`);
  }
});

test('Layout.decode: what is not a layout reads as none', () => {
  assert.equal(Layout.decode(undefined), undefined);
  assert.equal(Layout.decode('zz'), undefined);
  assert.equal(Layout.decode('0'.repeat((BUCKETS - 1) * 16)), undefined, 'not increasing');
});
