// The build of what users run: src/cli.ts and everything it imports, dependencies included, bundled
// by esbuild into plain ESM in dist/ (bench/README.md, "The shipped build", says why esbuild and
// why everything is bundled). The package and the image then need no node_modules, and
// `--splitting` keeps each dynamic import() a chunk of its own that loads only when reached, so
// `--help` never loads what only a cluster run needs. The version and the commit (from git) are
// stamped in: `labeller --version` prints `0.1.0 (abc1234)`.
//
//   npm run build            (image/build.sh runs it; scripts/pack.ts builds the same into its stage)
//   npm run build -- --sourcemap   the same with .js.map files, for reading --cpu-prof profiles
//                                  (bench/profile.ts); the next plain build removes them
//   npm run build -- --metafile FILE   also writes esbuild's metafile (what went in) to FILE:
//                                  image/sbom.ts lists the bundled packages from it
import { build, type BuildOptions, type Metafile, type Plugin } from 'esbuild';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join, relative } from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { gitCommit, shortCommit } from '../src/cli/revision.ts';

const root = fileURLToPath(new URL('..', import.meta.url));

const BUILTIN = 'node-builtin';

/**
 * Node's built-in modules taken with require(), not `import`: an ES module import of a built-in
 * builds its namespace by reading every export, and the lazy ones load what they stand for.
 * `import 'node:http'` alone loads Node's bundled undici, http2, zlib and worker_threads (113
 * modules against 38, 8 MiB of RSS in a script that imports nothing else; `node:fs` and
 * `node:util` 34 against none). labeller at rest: 70 → 67 MiB.
 */
const builtinsByRequire: Plugin = {
  name: 'builtins-by-require',
  setup(build) {
    const names = new Set(builtinModules);
    build.onResolve({ filter: /^[a-z_/:]+$/ }, (args) => {
      const name = args.path.replace(/^node:/, '');
      if (!names.has(name)) return undefined;
      // The stand-in's own require() stays as it is, and so does an import(): a CommonJS stand-in
      // would give it only a default export.
      if (args.namespace === BUILTIN || args.kind === 'dynamic-import') return { path: `node:${name}`, external: true };
      return { path: name, namespace: BUILTIN };
    });
    build.onLoad(
      { filter: /.*/, namespace: BUILTIN },
      (args) => ({ contents: `module.exports = require(${JSON.stringify(`node:${args.path}`)});`, loader: 'js' }),
    );
  },
};

/** The version in package.json, stamped into the build (src/cli/version.ts). */
function packageVersion(): string {
  return (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version;
}

/** The commit stamped into the build: short, as `--version` prints it; empty outside a git work tree. */
export function buildCommit(): string {
  const commit = gitCommit(root);
  return commit === undefined ? '' : shortCommit(commit);
}

/** `external`: leave node_modules packages out of the bundle (only bench/startup.ts compares that). */
export function buildOptions(outdir: string, external = false): BuildOptions {
  return {
    absWorkingDir: root,
    entryPoints: ['src/cli.ts'],
    outdir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node22.19',
    chunkNames: '[name]-[hash]',
    packages: external ? 'external' : 'bundle',
    // Names stay (error and class names, readable stack traces); whitespace and syntax go:
    // a third smaller and about 2 MiB less RSS at start than unminified.
    minifyWhitespace: true,
    minifySyntax: true,
    legalComments: 'eof',
    // CommonJS dependencies (undici, fast-json-patch) call require() for Node's
    // built-ins, which an ES module has no binding for.
    banner: {
      js:
        "import { createRequire as __labellerRequire } from 'node:module'; const require = __labellerRequire(import.meta.url);",
    },
    plugins: [builtinsByRequire],
    define: {
      'Intl.Segmenter': 'LazySegmenter',
      LABELLER_VERSION: JSON.stringify(packageVersion()),
      LABELLER_COMMIT: JSON.stringify(buildCommit()),
    },
    inject: ['scripts/lazysegmenter.ts'],
    logLevel: 'warning',
  };
}

/** Builds into `outdir` (emptied first); returns what went in, for the licence file. */
export async function buildDist(outdir: string, external = false, sourcemap = false): Promise<Metafile> {
  rmSync(outdir, { recursive: true, force: true });
  const { metafile } = await build({ ...buildOptions(outdir, external), metafile: true, sourcemap });
  return metafile;
}

export interface BundledPackage {
  readonly name: string;
  readonly version: string;
  /** package.json's licence (an SPDX expression), if it has one. */
  readonly license: string | undefined;
  /** Its folder under node_modules. */
  readonly dir: string;
}

/** The npm packages a build bundles, by name, from its metafile. */
export function bundledPackages(metafile: Metafile): BundledPackage[] {
  const dirs = new Map<string, string>();
  for (const input of Object.keys(metafile.inputs)) {
    // esbuild's paths are relative to the root, with forward slashes.
    const at = input.lastIndexOf('node_modules/');
    if (at < 0) continue;
    // The package folder: node_modules/<name> or node_modules/@scope/<name>.
    const rest = input.slice(at + 'node_modules/'.length).split('/');
    const name = rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
    dirs.set(name, join(root, input.slice(0, at), 'node_modules', name));
  }
  return [...dirs].sort(([a], [b]) => (a < b ? -1 : 1)).map(([name, dir]) => {
    const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version: string; license?: string };
    return { name, version: pkg.version, license: pkg.license, dir };
  });
}

/** One file with the licence of every package bundled, as their licences require. */
export function thirdPartyLicenses(metafile: Metafile): string {
  const sections = bundledPackages(metafile).map(({ name, version, license, dir }) => {
    const file = ['LICENSE', 'LICENSE.md', 'LICENSE.txt', 'LICENCE', 'license'].map((f) => join(dir, f)).find((f) =>
      existsSync(f)
    );
    const text = file
      ? readFileSync(file, 'utf8').trim()
      : `(no licence file; package.json says ${license ?? 'nothing'})`;
    return `${name}@${version} (${license ?? 'unknown'})\n\n${text}\n`;
  });
  return `dist/ bundles these packages:\n\n${sections.join(`\n${'-'.repeat(72)}\n\n`)}`;
}

/** The shipped build in `outdir`: the bundle and THIRD_PARTY_LICENSES.txt. Logs its size; returns the metafile. */
export async function buildShipped(outdir: string, sourcemap = false): Promise<Metafile> {
  const metafile = await buildDist(outdir, false, sourcemap);
  writeFileSync(join(outdir, 'THIRD_PARTY_LICENSES.txt'), thirdPartyLicenses(metafile));
  const outputs = Object.entries(metafile.outputs).filter(([name]) => !name.endsWith('.map'));
  const bytes = outputs.reduce((sum, [, o]) => sum + o.bytes, 0);
  console.error(
    `${relative(root, outdir) || '.'}/: ${outputs.length} files, ${(bytes / 1024 / 1024).toFixed(1)} MiB, ${
      Object.keys(metafile.inputs).length
    } modules bundled, ${packageVersion()} (${buildCommit() || 'commit unknown'})`,
  );
  return metafile;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  let values: { sourcemap: boolean; metafile?: string | undefined };
  try {
    ({ values } = parseArgs({
      options: { sourcemap: { type: 'boolean', default: false }, metafile: { type: 'string' } },
      strict: true,
    }));
  } catch (error) {
    console.error(`build: ${(error as Error).message}; the options are --sourcemap and --metafile FILE`);
    process.exit(2);
  }
  const metafile = await buildShipped(join(root, 'dist'), values.sourcemap);
  if (values.metafile !== undefined) writeFileSync(values.metafile, JSON.stringify(metafile));
}
