// The layers of src/, bottom up: each folder may import its own and lower layers only, so the
// generic machinery (runtime) knows nothing of labels and API access (kube) nothing of either.
// Within the layers, no file reaches itself again through its imports (no circles, inside a
// folder too). The config, the labelling logic and the admission policies take the API's
// vocabulary (apimachinery) and never the client (kube), so they never reach an HTTP client: by
// structure, and checked through every import too. Each folder's README.md says what it owns
// and, on its "May use:" line, the folders below it that it does use.
import assert from 'node:assert/strict';
import { existsSync, globSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';

/** The layers, bottom up: each may import its own and the ones before it. */
const LAYERS: readonly (readonly string[])[] = [
  ['util'],
  ['apimachinery'],
  ['kube'],
  ['lease'],
  ['runtime'],
  ['metrics', 'shard'],
  ['config'],
  ['labelling'],
  ['admission', 'events'],
  ['related', 'sources'],
  ['kinds'],
  ['guard', 'preflight', 'policies', 'reports'],
  ['commands'],
  ['cli'],
];
const FOLDERS = LAYERS.flat();
const below = (folder: string): string[] => LAYERS.slice(0, LAYERS.findIndex((l) => l.includes(folder))).flat();
/** Folders that must not reach an HTTP client, even through another folder; they never import the client. */
const NO_HTTP = ['config', 'labelling', 'admission'];
const CLIENT = 'kube';
const HTTP_MODULES = /^(node:)?(http|https|http2|net|tls)$|^undici$|^@kubernetes\/client-node$/;

const src = resolve('src');
const folderOf = (file: string): string => relative(src, file).split('/')[0]!;
const sources = globSync('src/*/**/*.ts').map((path) => resolve(path));
const code = sources.filter((file) => !file.endsWith('.test.ts') && !file.includes('/testing/'));

/** Each file's imports: relative ones resolved to files, packages as named. */
function importsOf(file: string): { files: string[]; packages: string[]; valueFiles: string[] } {
  const files: string[] = [];
  const valueFiles: string[] = [];
  const packages: string[] = [];
  const text = readFileSync(file, 'utf8');
  for (
    const [statement, typeOnly, specifier] of text.matchAll(
      /(?:^|\n)\s*(?:import|export)\s+(type\s+)?[^'"]*?from\s+'([^']+)'|import\(\s*'([^']+)'\s*\)/g,
    )
  ) {
    const target = specifier ?? statement.match(/import\(\s*'([^']+)'/)?.[1];
    if (!target) continue;
    if (target.startsWith('.')) {
      const path = join(dirname(file), target);
      files.push(path);
      if (!typeOnly) valueFiles.push(path);
    } else packages.push(target);
  }
  return { files, packages, valueFiles };
}

test('src/ holds the layers and the entry point; each layer opens with a README naming what it may use', () => {
  const top = globSync('src/*').map((path) => relative('src', path)).sort();
  assert.deepEqual(top, [...FOLDERS, 'cli.ts'].sort());
  const wrong: string[] = [];
  for (const folder of FOLDERS) {
    const readme = join('src', folder, 'README.md');
    if (!existsSync(readme)) {
      wrong.push(`${readme} is missing`);
      continue;
    }
    const line = readFileSync(readme, 'utf8').match(/^May use: (.*)$/m)?.[1];
    const named = line === undefined || line.startsWith('nothing') ? [] : line.replace(/\.$/, '').split(/,\s*/);
    const used = below(folder).filter((other) => usedBy(folder).has(other));
    if (named.join() !== used.join()) {
      wrong.push(`${readme}: "May use: ${line}", but it uses ${used.join(', ') || 'nothing else in src/'}`);
    }
  }
  assert.deepEqual(wrong, []);
});

/** The other folders the files of `folder` (tests included) import. */
function usedBy(folder: string): Set<string> {
  const used = new Set<string>();
  for (const file of sources.filter((f) => folderOf(f) === folder)) {
    for (const target of importsOf(file).files) if (folderOf(target) !== folder) used.add(folderOf(target));
  }
  return used;
}

test('the config, the labelling logic and the admission policies import the vocabulary, never the client', () => {
  const wrong = sources.filter((file) => NO_HTTP.includes(folderOf(file))).flatMap((file) =>
    importsOf(file).files.filter((target) => folderOf(target) === CLIENT).map((target) =>
      `${relative(src, file)} imports ${relative(src, target)}`
    )
  );
  assert.deepEqual(wrong, []);
});

test('no layer imports a layer above it', () => {
  const wrong: string[] = [];
  for (const file of sources) {
    const folder = folderOf(file);
    for (const target of importsOf(file).files) {
      const other = folderOf(target);
      if (other !== folder && !below(folder).includes(other)) {
        wrong.push(`${relative(src, file)} imports ${relative(src, target)} (${folder} → ${other})`);
      }
    }
  }
  assert.deepEqual(wrong, []);
});

test('no file reaches itself through its imports, inside a folder or across folders', () => {
  const graph = new Map(code.map((file) => [file, importsOf(file).files]));
  const circles: string[] = [];
  const done = new Set<string>();
  const path: string[] = [];
  const visit = (file: string): void => {
    const at = path.indexOf(file);
    if (at !== -1) {
      circles.push([...path.slice(at), file].map((f) => relative(src, f)).join(' → '));
      return;
    }
    if (done.has(file)) return;
    path.push(file);
    for (const next of graph.get(file) ?? []) visit(next);
    path.pop();
    done.add(file);
  };
  for (const file of graph.keys()) visit(file);
  assert.deepEqual(circles, []);
});

test('the config, the labelling logic and the admission policies never reach an HTTP client', () => {
  const reaches = new Map<string, string | undefined>();
  /** The chain of value imports from `file` to an HTTP module, if there is one. */
  const httpChain = (file: string): string | undefined => {
    if (reaches.has(file)) return reaches.get(file);
    reaches.set(file, undefined);
    const { packages, valueFiles } = importsOf(file);
    const direct = packages.find((name) => HTTP_MODULES.test(name));
    let chain = direct;
    for (const next of valueFiles) {
      if (chain) break;
      const further = httpChain(next);
      if (further) chain = `${relative(src, next)} → ${further}`;
    }
    reaches.set(file, chain);
    return chain;
  };
  const wrong = code.filter((file) => NO_HTTP.includes(folderOf(file)))
    .map((file) => [relative(src, file), httpChain(file)] as const)
    .filter(([, chain]) => chain !== undefined)
    .map(([file, chain]) => `${file} → ${chain}`);
  assert.deepEqual(wrong, []);
});
