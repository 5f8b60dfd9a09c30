// image/build.sh's output as the tests read it: built (again) when it is older than what goes into
// it, then parsed from its OCI layout (the index, each architecture's manifest, config and
// layers), with a root filesystem per architecture unpacked from the layers. Only
// test/e2e/shipped.test.ts uses it, so that one file alone ever rebuilds image/out.
import { execFileSync } from 'node:child_process';
import { globSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Descriptor, Index, Manifest } from '../../image/layout.ts';
import { Layout } from '../../image/layout.ts';
import { ROOT } from './helm.ts';

export const OUT = join(ROOT, 'image', 'out');
export const ARCHES = ['amd64', 'arm64'] as const;
export type Arch = (typeof ARCHES)[number];

export interface ImageConfig {
  readonly architecture: string;
  readonly os: string;
  readonly config: {
    readonly Entrypoint: string[];
    readonly Env?: string[];
    readonly User: string;
    readonly WorkingDir: string;
  };
}

export interface PlatformImage {
  readonly arch: Arch;
  readonly descriptor: Descriptor;
  readonly manifest: Manifest;
  readonly config: ImageConfig;
}

export interface BuiltImage {
  readonly layout: Layout;
  /** The index, as the layout names it. */
  readonly descriptor: Descriptor;
  readonly index: Index;
  readonly platforms: Readonly<Record<Arch, PlatformImage>>;
  /** How it came to be: `image/build.sh: N s; ` when this run built it, else ''. */
  readonly built: string;
}

/** The commit checked out, or undefined without git. */
export function headCommit(): string | undefined {
  try {
    return execFileSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
  } catch {
    return undefined;
  }
}

/** image/out was built from this commit, after the last change to what goes into it. */
function isCurrent(): boolean {
  const layout = new Layout(join(OUT, 'oci'));
  const built = statSync(join(layout.dir, 'index.json'), { throwIfNoEntry: false })?.mtimeMs;
  if (built === undefined || statSync(join(OUT, 'sbom.spdx.json'), { throwIfNoEntry: false }) === undefined) {
    return false;
  }
  const index = layout.json<Index>(layout.index().manifests[0]!.digest);
  if (index.annotations?.['org.opencontainers.image.revision'] !== headCommit()) return false;
  const inputs = [
    'package.json',
    'package-lock.json',
    'LICENSE',
    // Patterns, not a function: the function is asked about `out` by name, and keeps image/out
    // itself, which build.sh touches after writing index.json.
    ...['src', 'scripts', 'image'].flatMap((dir) =>
      globSync(`${dir}/**/*`, { cwd: ROOT, exclude: ['image/out', 'image/out/**'] })
    ),
  ];
  return inputs.every((f) => statSync(join(ROOT, f)).mtimeMs < built);
}

let image: BuiltImage | undefined;

/** The image, built first if it is not current. */
export function builtImage(): BuiltImage {
  if (image) return image;
  let built = '';
  if (!isCurrent()) {
    const started = performance.now();
    execFileSync('bash', [join(ROOT, 'image', 'build.sh')], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
    built = `image/build.sh: ${((performance.now() - started) / 1000).toFixed(0)} s; `;
  }
  const layout = new Layout(join(OUT, 'oci'));
  const descriptor = layout.index().manifests[0]!;
  const index = layout.json<Index>(descriptor.digest);
  const platform = (arch: Arch): PlatformImage => {
    const found = index.manifests.find((m) => m.platform?.os === 'linux' && m.platform.architecture === arch);
    if (!found) throw new Error(`image/out/oci: the index has no linux/${arch} image`);
    const manifest = layout.json<Manifest>(found.digest);
    return { arch, descriptor: found, manifest, config: layout.json<ImageConfig>(manifest.config.digest) };
  };
  image = { layout, descriptor, index, platforms: { amd64: platform('amd64'), arm64: platform('arm64') }, built };
  return image;
}

/** Unpacks the layers of `arch`'s image into `dir` (created), as a container runtime would. */
export function unpack(arch: Arch, dir: string): void {
  const { layout, platforms } = builtImage();
  mkdirSync(dir, { recursive: true });
  for (const layer of platforms[arch].manifest.layers) {
    execFileSync('tar', ['-xzf', layout.path(layer.digest), '-C', dir]);
  }
}

/** The image's environment (config Env) as a map. */
export function imageEnv(config: ImageConfig): Record<string, string> {
  return Object.fromEntries(
    (config.config.Env ?? []).map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
  );
}

/** The SBOM file beside the image. */
export function sbomFile(): string {
  return join(OUT, 'sbom.spdx.json');
}

/** The package.json of the checkout. */
export function packageJson(): Record<string, unknown> & { version: string; repository: { url: string } } {
  return JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Record<string, unknown> & {
    version: string;
    repository: { url: string };
  };
}
