import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { watchFile } from './filewatch.ts';

/** Resolves with the next `count` reports. */
function reports(count: number, start: (report: (value: string | Error) => void) => void): Promise<(string | Error)[]> {
  const seen: (string | Error)[] = [];
  return new Promise((resolve) =>
    start((value) => {
      seen.push(value);
      if (seen.length === count) resolve(seen);
    })
  );
}

test('a file written in place, and a ConfigMap-style symlink swap (..data renamed), are each reported once', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'filewatch-'));
  const stop = new AbortController();
  try {
    // kubelet's layout: kinds.yaml → ..data/kinds.yaml, ..data → ..<timestamp>
    const version = (n: number, text: string) => {
      mkdirSync(join(dir, `..v${n}`));
      writeFileSync(join(dir, `..v${n}`, 'kinds.yaml'), text);
      symlinkSync(`..v${n}`, join(dir, '..data_tmp'));
      renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
    };
    version(1, 'one');
    symlinkSync('..data/kinds.yaml', join(dir, 'kinds.yaml'));
    const path = join(dir, 'kinds.yaml');
    const seen = reports(2, (report) => watchFile(path, 'one', report, { signal: stop.signal, pollMs: 60_000 }));
    await new Promise((resolve) => setTimeout(resolve, 50));
    version(2, 'two');
    await new Promise((resolve) => setTimeout(resolve, 300));
    version(3, 'two'); // same content: not reported
    await new Promise((resolve) => setTimeout(resolve, 300));
    version(4, 'three');
    assert.deepEqual(await seen, ['two', 'three']);
  } finally {
    stop.abort();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a file that cannot be read is reported once as an error, then its content when it is back', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'filewatch-'));
  const stop = new AbortController();
  try {
    const path = join(dir, 'kinds.yaml');
    writeFileSync(path, 'one');
    const seen = reports(2, (report) => watchFile(path, 'one', report, { signal: stop.signal, pollMs: 100 }));
    rmSync(path);
    await new Promise((resolve) => setTimeout(resolve, 500));
    writeFileSync(path, 'two');
    const [error, back] = await seen;
    assert.ok(error instanceof Error && /ENOENT/.test(error.message));
    assert.equal(back, 'two');
  } finally {
    stop.abort();
    rmSync(dir, { recursive: true, force: true });
  }
});
