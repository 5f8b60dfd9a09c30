// The last step of image/build.sh: crane has built one image per architecture into the OCI layout
// image/out/oci; this sets the OCI annotations (source, version, revision, licences, created,
// title, description) on each image's manifest, makes the multi-architecture index of them, the
// one thing the layout then names, and writes the SBOM beside it: image/out/sbom.spdx.json, and
// image/out/sbom, an OCI layout of the SBOM as an artifact whose subject is the index (what
// `crane push`, and so scripts/release.sh, pushes as the index's referrer). Prints the layers.
//
//   node --import tsx image/assemble.ts OUT METAFILE ARCH…
//   (OUT: image/out, with oci/ and rootfs.sh's folders rootfs-ARCH/; METAFILE: the build's)
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Metafile } from 'esbuild';
import { bundledPackages } from '../scripts/build.ts';
import { gitCommit } from '../src/cli/revision.ts';
import { type Descriptor, type ImageConfig, type Index, Layout, type Manifest, MEDIA } from './layout.ts';
import { type LayerName, type PlatformInput, SPDX_MEDIA_TYPE, spdxDocument } from './sbom.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const LAYERS: readonly LayerName[] = ['base', 'node', 'app'];

interface Package {
  readonly name: string;
  readonly version: string;
  readonly description: string;
  readonly license: string;
  readonly repository: { readonly url: string };
}

/** The repository's address for people: git+https://github.com/x/y.git → https://github.com/x/y. */
export function sourceUrl(repository: string): string {
  return repository.replace(/^git\+/, '').replace(/\.git$/, '');
}

/** When the commit was made (so the same commit gives the same image), else now. */
function createdAt(): string {
  try {
    const time = execFileSync('git', ['log', '-1', '--format=%cI', 'HEAD'], {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
    return new Date(time).toISOString().replace(/\.000Z$/, 'Z');
  } catch {
    return new Date().toISOString();
  }
}

const mib = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

function assemble(out: string, metafile: Metafile, arches: readonly string[]): void {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as Package;
  const revision = gitCommit(root);
  const created = createdAt();
  const source = sourceUrl(pkg.repository.url);
  const annotations: Record<string, string> = {
    'org.opencontainers.image.title': pkg.name,
    'org.opencontainers.image.description': pkg.description,
    'org.opencontainers.image.version': pkg.version,
    ...(revision === undefined ? {} : { 'org.opencontainers.image.revision': revision }),
    'org.opencontainers.image.source': source,
    'org.opencontainers.image.licenses': pkg.license,
    'org.opencontainers.image.created': created,
  };

  const layout = new Layout(join(out, 'oci'));
  const pulled = layout.index().manifests.map((descriptor) => ({
    descriptor,
    arch: layout.json<ImageConfig>(layout.json<Manifest>(descriptor.digest).config.digest).architecture,
  }));
  const platforms: PlatformInput[] = [];
  for (const arch of arches) {
    const found = pulled.filter((p) => p.arch === arch).map((p) => p.descriptor);
    if (found.length !== 1) throw new Error(`${layout.dir}: ${found.length} images for ${arch}, expected one`);
    const old = found[0]!;
    const manifest = layout.json<Manifest>(old.digest);
    if (manifest.layers.length !== LAYERS.length) {
      throw new Error(`${arch}: ${manifest.layers.length} layers, expected ${LAYERS.join(', ')}`);
    }
    const annotated = layout.put(
      MEDIA.manifest,
      JSON.stringify({ ...manifest, annotations: { ...manifest.annotations, ...annotations } }),
    );
    if (annotated.digest !== old.digest) layout.drop(old.digest);
    platforms.push({
      arch,
      manifest: { ...annotated, platform: { os: 'linux', architecture: arch } },
      layers: manifest.layers.map((descriptor, i) => ({ name: LAYERS[i]!, descriptor })),
      rootfs: join(out, `rootfs-${arch}`),
    });
  }
  const index: Index = {
    schemaVersion: 2,
    mediaType: MEDIA.index,
    manifests: platforms.map((p) => p.manifest),
    annotations,
  };
  const indexDescriptor = layout.put(MEDIA.index, JSON.stringify(index));
  layout.setIndex([{ ...indexDescriptor, annotations: { 'org.opencontainers.image.ref.name': pkg.version } }]);

  // The SBOM: a file, and an artifact that refers to the index (OCI 1.1 referrers).
  const sbom = `${
    JSON.stringify(
      spdxDocument({
        name: pkg.name,
        version: pkg.version,
        license: pkg.license,
        source,
        revision,
        created,
        index: indexDescriptor,
        platforms,
        bundled: bundledPackages(metafile),
      }),
      null,
      2,
    )
  }\n`;
  writeFileSync(join(out, 'sbom.spdx.json'), sbom);
  const artifact = Layout.create(join(out, 'sbom'));
  const config: Descriptor = { ...artifact.put(MEDIA.empty, '{}'), data: Buffer.from('{}').toString('base64') };
  const layer = artifact.put(SPDX_MEDIA_TYPE, sbom);
  const manifest: Manifest = {
    schemaVersion: 2,
    mediaType: MEDIA.manifest,
    artifactType: SPDX_MEDIA_TYPE,
    config,
    layers: [{ ...layer, annotations: { 'org.opencontainers.image.title': 'sbom.spdx.json' } }],
    subject: indexDescriptor,
    annotations: { 'org.opencontainers.image.created': created },
  };
  artifact.setIndex([{ ...artifact.put(MEDIA.manifest, JSON.stringify(manifest)), artifactType: SPDX_MEDIA_TYPE }]);

  for (const p of platforms) {
    const manifest = layout.json<Manifest>(p.manifest.digest);
    const size = manifest.layers.reduce((sum, l) => sum + l.size, 0);
    console.log(
      `linux/${p.arch}: ${mib(size)} compressed in ${manifest.layers.length} layers (${
        p.layers.map((l) => `${l.name} ${mib(l.descriptor.size)}`).join(', ')
      }) ${p.manifest.digest.slice(0, 19)}`,
    );
  }
  const packages = (JSON.parse(sbom) as { packages: unknown[] }).packages.length;
  console.log(`index ${indexDescriptor.digest} (${pkg.version}, ${revision?.slice(0, 7) ?? 'no commit'}, ${created})`);
  console.log(`SBOM: ${join(out, 'sbom.spdx.json')}, SPDX 2.3, ${packages} packages`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const [out, metafile, ...arches] = process.argv.slice(2);
  if (out === undefined || metafile === undefined || arches.length === 0) {
    console.error('usage: node --import tsx image/assemble.ts OUT METAFILE ARCH…');
    process.exit(2);
  }
  assemble(out, JSON.parse(readFileSync(metafile, 'utf8')) as Metafile, arches);
}
