import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compareResourceVersions } from './resourceversion.ts';

test('resourceVersions compare as positive integers of any length; anything else is not comparable', () => {
  assert.equal(compareResourceVersions('9', '10'), -1);
  assert.equal(compareResourceVersions('123456789012345678901234567890', '123456789012345678901234567891'), -1);
  assert.equal(compareResourceVersions('20', '3'), 1);
  assert.equal(compareResourceVersions('42', '42'), 0);
  for (const [a, b] of [['0', '1'], ['01', '1'], ['1a', '2'], ['', '1'], ['-1', '1'], ['1.5', '2']]) {
    assert.equal(compareResourceVersions(a!, b!), undefined, `${a} ${b}`);
  }
});
