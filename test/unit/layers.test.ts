// The layers of src/, bottom up: each folder may import its own and lower layers only, so the
// generic machinery (runtime) knows nothing of labels and API access (kube) nothing of either.
// A static or dynamic import that reaches up fails here, naming the file and the import.
import assert from 'node:assert/strict';
import { globSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';

/** Each layer with the layers it may import besides its own. */
const ALLOWED: Readonly<Record<string, readonly string[]>> = {
  util: [],
  kube: ['util'],
  runtime: ['util', 'kube'],
  labeller: ['util', 'kube', 'runtime'],
  metrics: ['util', 'kube', 'runtime'],
  app: ['util', 'kube', 'runtime', 'labeller', 'metrics'],
  cli: ['util', 'kube', 'runtime', 'labeller', 'metrics', 'app'],
};

const src = resolve('src');
const layerOf = (file: string): string => relative(src, file).split('/')[0]!;

test('src/ holds only the layers and the entry point', () => {
  const top = globSync('src/*').map((path) => relative('src', path)).sort();
  assert.deepEqual(top, [...Object.keys(ALLOWED), 'cli.ts'].sort());
});

test('no layer imports a layer above it', () => {
  const wrong: string[] = [];
  for (const file of globSync('src/*/**/*.ts').map((path) => resolve(path))) {
    const layer = layerOf(file);
    for (const [, specifier] of readFileSync(file, 'utf8').matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)) {
      const target = layerOf(join(dirname(file), specifier!));
      if (target !== layer && !ALLOWED[layer]?.includes(target)) {
        wrong.push(`${relative(src, file)} imports ${specifier} (${layer} → ${target})`);
      }
    }
  }
  assert.deepEqual(wrong, []);
});
