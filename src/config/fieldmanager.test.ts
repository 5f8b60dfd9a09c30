import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fieldManagerLabelValue, fieldManagerSelector } from './fieldmanager.ts';

test('a field manager is its own label value when it is one, else a hash that is one', () => {
  assert.equal(fieldManagerLabelValue('rel-labeller'), 'rel-labeller');
  assert.match(fieldManagerLabelValue('Team A:Labeller'), /^sha256-[0-9a-f]{56}$/);
  assert.ok(fieldManagerLabelValue('x'.repeat(100)).length <= 63);
  assert.equal(
    fieldManagerSelector('Team A:Labeller'),
    `labeller/field-manager=${fieldManagerLabelValue('Team A:Labeller')}`,
  );
});
