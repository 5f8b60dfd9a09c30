import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { FILE_REREAD_MS, tokenFile } from './credentialfiles.ts';

test('a token file: the same value while unchanged, the last good one while the file is missing or empty, errors before any', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'labeller-token-'));
  const path = join(dir, 'token');
  let now = 0;
  await assert.rejects(tokenFile(path, () => now).get(), /cannot read .*token: ENOENT/);
  writeFileSync(path, 'abc\n');
  const token = tokenFile(path, () => now);
  assert.equal(await token.get(), 'abc');
  rmSync(path);
  now += FILE_REREAD_MS;
  assert.equal(await token.get(), 'abc');
  writeFileSync(path, '\n');
  now += FILE_REREAD_MS;
  assert.equal(await token.get(), 'abc');
  writeFileSync(path, 'def');
  now += FILE_REREAD_MS;
  assert.equal(await token.get(), 'def');
  writeFileSync(path, '');
  await assert.rejects(tokenFile(path).get(), /token file .* is empty/);
});
