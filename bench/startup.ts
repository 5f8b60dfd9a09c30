// How fast and how small `labeller --help` starts, for each way of running the code: the
// TypeScript sources (Node strips the types), tsc's emit, esbuild with node_modules left
// external, and esbuild bundling everything (what dist/ ships). Prints a markdown table: median
// wall time and max RSS over the runs (`/usr/bin/time`), and the size of the JavaScript built.
// The figures chose the build (bench/README.md, "The shipped build").
//
//   npm run bench:startup -- [--runs 7]
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, globSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { buildDist } from '../scripts/build.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const { values } = parseArgs({ options: { runs: { type: 'string', default: '7' } } });
const runs = Number(values.runs);
const TIME = '/usr/bin/time';
if (!existsSync(TIME)) {
  console.error(`bench/startup.ts: needs ${TIME} for the max RSS of each run (Debian: apt-get install time)`);
  process.exit(2);
}

// Built variants live under node_modules, so their bare imports find the tree's packages.
const work = mkdtempSync(join(root, 'node_modules', '.labeller-startup-'));
process.on('exit', () => rmSync(work, { recursive: true, force: true }));

interface Variant {
  readonly name: string;
  readonly entry: string;
  /** The JavaScript it runs: files and bytes (sources: none built). */
  readonly built?: { readonly files: number; readonly bytes: number };
  readonly needsNodeModules: boolean;
}

function sizeOf(files: readonly string[]): { files: number; bytes: number } {
  return { files: files.length, bytes: files.reduce((sum, f) => sum + statSync(f).size, 0) };
}

function variantDir(name: string): string {
  const dir = join(work, name);
  mkdirSync(dir, { recursive: true });
  // main.ts reads the version from ../package.json next to its output folder.
  copyFileSync(join(root, 'package.json'), join(dir, 'package.json'));
  return dir;
}

const variants: Variant[] = [{
  name: 'sources (type stripping)',
  entry: join(root, 'bin', 'labeller.js'),
  needsNodeModules: true,
}];

const tscDir = variantDir('tsc');
execFileSync(join(root, 'node_modules', '.bin', 'tsc'), [
  '-p',
  root,
  '--noEmit',
  'false',
  '--outDir',
  tscDir,
  '--rootDir',
  root,
  '--rewriteRelativeImportExtensions',
], { stdio: 'inherit' });
variants.push({
  name: 'tsc emit',
  entry: join(tscDir, 'src', 'cli.js'),
  built: sizeOf(
    globSync('src/**/*.js', { cwd: tscDir }).filter((f) => !f.endsWith('.test.js')).map((f) => join(tscDir, f)),
  ),
  needsNodeModules: true,
});

for (
  const [name, external] of [['esbuild, node_modules external', true], [
    'esbuild, everything bundled (dist/)',
    false,
  ]] as const
) {
  const dir = join(variantDir(external ? 'esbuild-external' : 'esbuild-bundle'), 'dist');
  const metafile = await buildDist(dir, external);
  variants.push({
    name,
    entry: join(dir, 'cli.js'),
    built: sizeOf(Object.keys(metafile.outputs).map((f) => join(root, f))),
    needsNodeModules: external,
  });
}

function measure(entry: string, args: readonly string[]): { wallMs: number; maxRssKiB: number } {
  const out = join(work, 'time.txt');
  const started = performance.now();
  const result = spawnSync(TIME, ['-f', '%M', '-o', out, process.execPath, entry, ...args], { encoding: 'utf8' });
  const wallMs = performance.now() - started;
  if (result.status !== 0) throw new Error(`${entry} ${args.join(' ')} exited ${result.status}: ${result.stderr}`);
  return { wallMs, maxRssKiB: Number(readFileSync(out, 'utf8').trim().split('\n').pop()) };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mib = (kib: number): string => `${(kib / 1024).toFixed(0)} MiB`;

console.log(
  `\nNode ${process.version}, ${runs} runs each (median), load average ${
    loadavg().map((l) => l.toFixed(2)).join(' ')
  }\n`,
);
console.log(
  '| variant | `--help` wall | `--help` max RSS | `--version` wall | `--version` max RSS | JavaScript built | needs node_modules |',
);
console.log('|---|---|---|---|---|---|---|');
for (const v of variants) {
  measure(v.entry, ['--help']); // warm the page cache
  const help = Array.from({ length: runs }, () => measure(v.entry, ['--help']));
  const version = Array.from({ length: runs }, () => measure(v.entry, ['--version']));
  const built = v.built ? `${v.built.files} files, ${(v.built.bytes / 1024 / 1024).toFixed(2)} MiB` : '—';
  console.log(
    `| ${v.name} | ${median(help.map((m) => m.wallMs)).toFixed(0)} ms | ${
      mib(median(help.map((m) => m.maxRssKiB)))
    } | ` +
      `${median(version.map((m) => m.wallMs)).toFixed(0)} ms | ${
        mib(median(version.map((m) => m.maxRssKiB)))
      } | ${built} | ${v.needsNodeModules ? 'yes' : 'no'} |`,
  );
}
