import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BUCKETS, bucketsOf, decodeBuckets, describeRanges, encodeBuckets, fnv1a64, rangesOf } from './ranges.ts';

test('fnv1a64 hashes as Go hash/fnv New64a (the API server): known values', () => {
  // From Go: fnv.New64a() over []byte(value).
  assert.equal(fnv1a64('').toString(16), 'cbf29ce484222325');
  assert.equal(fnv1a64('default').toString(16), 'ebada5168620c5fe');
  assert.equal(fnv1a64('kube-system').toString(16), 'df65c7bc1d82b35e');
  assert.equal(fnv1a64('é').toString(16).padStart(16, '0'), '0ac21707b7181e01');
});

test('bucketsOf: every bucket goes to exactly one member, about evenly, scattered over the space', () => {
  // Identities as the CLI makes them: a host name and a random suffix, alike but for a few characters.
  for (const members of [['a', 'b', 'c'], ['vm_b64a9b22', 'vm_5a159d85'], ['pod-0_01', 'pod-1_01', 'pod-2_01']]) {
    const shares = members.map((member) => bucketsOf(member, members));
    const all = shares.flatMap((share) => [...share]);
    assert.equal(all.length, BUCKETS);
    assert.equal(new Set(all).size, BUCKETS);
    const fair = BUCKETS / members.length;
    for (const share of shares) {
      assert.ok(share.size > fair * 0.8 && share.size < fair * 1.2, `${members}: ${share.size} of ${BUCKETS}`);
      // Not one run: a member's buckets lie all over the space.
      assert.ok(rangesOf(share).length > 10, `${members}: ${describeRanges(share)}`);
    }
  }
  assert.equal(bucketsOf('z', ['a', 'b']).size, 0);
});

test('bucketsOf: a member that joins takes only buckets it wins; one that leaves gives only its own', () => {
  const before = ['a', 'b', 'c'];
  const after = [...before, 'd'];
  const joined = bucketsOf('d', after);
  for (const member of before) {
    const was = bucketsOf(member, before);
    const is = bucketsOf(member, after);
    for (const bucket of is) assert.ok(was.has(bucket), 'nobody gains from a join but the joiner');
    for (const bucket of was) if (!is.has(bucket)) assert.ok(joined.has(bucket), 'what is lost goes to the joiner');
  }
  // d leaves again: each keeps what it had, and takes a share of d's.
  for (const member of before) {
    for (const bucket of bucketsOf(member, after)) assert.ok(bucketsOf(member, before).has(bucket));
  }
});

test('rangesOf and describeRanges: adjacent buckets merge', () => {
  const buckets = new Set([0, 1, 2, 7, 255]);
  assert.deepEqual(rangesOf(buckets), [[0, 3], [7, 8], [255, 256]]);
  assert.equal(describeRanges(buckets), '0-2,7,255');
});

test('encodeBuckets and decodeBuckets round-trip; malformed text reads as none', () => {
  const buckets = new Set([0, 9, 128, 255]);
  assert.deepEqual(decodeBuckets(encodeBuckets(buckets)), buckets);
  assert.equal(encodeBuckets(new Set()).length, BUCKETS / 4);
  assert.equal(decodeBuckets('zz').size, 0);
  assert.equal(decodeBuckets(undefined).size, 0);
});
