// The npm package: builds into a staging folder and packs that folder, whose package.json is the
// published manifest (what a user's npm reads: name, version, bin, engines, licence, repository)
// without the development scripts, devDependencies or any install-time script. npm 11 warns on
// installing a package with an install script ("not yet covered by allowScripts"), and a user
// has no use for `npm test` in an installed package.
//
// Why a staging folder rather than `prepack`/`postpack` rewriting package.json in place: the
// checkout's package.json is never touched (a failed or interrupted pack cannot leave it
// rewritten, and `npm install` running meanwhile reads the real one), and the build goes into
// the stage too, so packing never rewrites dist/ under the image build. `npm pack` at the top of
// the checkout is refused (its `prepack`) for the same reason `npm publish` there must be.
//
//   npm run package                           labeller-<version>.tgz in the checkout
//   npm run package -- --destination DIR      …in DIR; prints the tarball's path
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { buildShipped } from './build.ts';

const root = fileURLToPath(new URL('..', import.meta.url));

/** The fields of the checkout's package.json that a user's npm and the registry read. */
const PUBLISHED = [
  'name',
  'version',
  'description',
  'keywords',
  'homepage',
  'bugs',
  'repository',
  'license',
  'type',
  'bin',
  'files',
  'engines',
] as const;

/** The package.json the tarball carries: the checkout's, less everything for development. */
export function publishedManifest(pkg: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const missing = PUBLISHED.filter((field) => !(field in pkg));
  if (missing.length > 0) {
    throw new Error(`package.json lacks ${missing.join(', ')}, which the published manifest needs`);
  }
  return Object.fromEntries(PUBLISHED.map((field) => [field, pkg[field]]));
}

export interface Packed {
  /** The tarball's path. */
  readonly tarball: string;
  /** The files in it, as `npm pack --json` lists them. */
  readonly files: readonly string[];
  readonly size: number;
  readonly unpackedSize: number;
}

/** Builds, stages and packs into `destination`; returns the tarball. */
export async function pack(destination: string): Promise<Packed> {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as Record<string, unknown>;
  const manifest = publishedManifest(pkg);
  const stage = mkdtempSync(join(tmpdir(), 'labeller-pack-'));
  try {
    await buildShipped(join(stage, 'dist'));
    // Every file `files` names but dist/ (built above), and what npm always ships.
    const copied = (manifest['files'] as string[]).filter((f) => f !== 'dist/').concat(['README.md', 'LICENSE']);
    for (const file of copied) {
      mkdirSync(dirname(join(stage, file)), { recursive: true });
      copyFileSync(join(root, file), join(stage, file));
    }
    writeFileSync(join(stage, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
    mkdirSync(destination, { recursive: true });
    // In the stage, so that npm reads the stage's package.json and no project config of the checkout.
    const out = execFileSync('npm', ['pack', '--json', '--pack-destination', resolve(destination)], {
      cwd: stage,
      encoding: 'utf8',
      env: { ...process.env, npm_config_update_notifier: 'false' },
    });
    const [packed] = JSON.parse(out) as {
      filename: string;
      size: number;
      unpackedSize: number;
      files: { path: string }[];
    }[];
    if (!packed) throw new Error('npm pack wrote no tarball');
    return {
      tarball: join(resolve(destination), packed.filename),
      files: packed.files.map((f) => f.path).sort(),
      size: packed.size,
      unpackedSize: packed.unpackedSize,
    };
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  let destination: string;
  try {
    const { values } = parseArgs({ options: { destination: { type: 'string', default: root } }, strict: true });
    destination = values.destination;
  } catch (error) {
    console.error(`pack: ${(error as Error).message}; the only option is --destination DIR`);
    process.exit(2);
  }
  const packed = await pack(destination);
  console.error(
    `pack: ${packed.files.length} files, ${(packed.size / 1024).toFixed(0)} KiB, ${
      (packed.unpackedSize / 1024 / 1024).toFixed(1)
    } MiB unpacked: ${packed.files.join(', ')}`,
  );
  console.log(packed.tarball);
}
