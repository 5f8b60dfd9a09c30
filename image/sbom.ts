// The image's SBOM: an SPDX 2.3 JSON document of every layer's contents, per architecture: the
// Debian packages of the base layer (from their dpkg records, as scanners read them), Node in the
// node layer (from the npm package it came from), labeller and the npm packages its build bundles
// in the app layer (from esbuild's metafile, with their licences). Layers and images are packages
// of their own with their digests, so the document says which layer holds what. Everything in it
// derives from the inputs (its date is the commit's), so the same image gives the same SBOM.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BundledPackage } from '../scripts/build.ts';
import type { Descriptor } from './layout.ts';

export const SPDX_MEDIA_TYPE = 'application/spdx+json';

export type LayerName = 'base' | 'node' | 'app';

export interface PlatformInput {
  /** Debian's name: amd64, arm64. */
  readonly arch: string;
  readonly manifest: Descriptor;
  /** The layers in order, named as image/build.sh names them. */
  readonly layers: readonly { readonly name: LayerName; readonly descriptor: Descriptor }[];
  /** image/rootfs.sh's output for this architecture: base/, node/, app/ and node-package.json. */
  readonly rootfs: string;
}

export interface SbomInput {
  readonly name: string;
  readonly version: string;
  readonly license: string;
  /** The source repository (https://…). */
  readonly source: string;
  readonly revision: string | undefined;
  /** RFC 3339. */
  readonly created: string;
  readonly index: Descriptor;
  readonly platforms: readonly PlatformInput[];
  readonly bundled: readonly BundledPackage[];
}

interface ExternalRef {
  readonly referenceCategory: string;
  readonly referenceType: string;
  readonly referenceLocator: string;
}

interface SpdxPackage {
  readonly SPDXID: string;
  readonly name: string;
  readonly versionInfo?: string;
  readonly downloadLocation: string;
  readonly filesAnalyzed: false;
  readonly licenseConcluded: string;
  readonly licenseDeclared: string;
  readonly copyrightText: 'NOASSERTION';
  readonly supplier?: string;
  readonly primaryPackagePurpose?: string;
  readonly checksums?: readonly { algorithm: 'SHA256'; checksumValue: string }[];
  readonly externalRefs?: readonly ExternalRef[];
  readonly description?: string;
  readonly comment?: string;
}

interface Relationship {
  readonly spdxElementId: string;
  readonly relationshipType: 'DESCRIBES' | 'CONTAINS';
  readonly relatedSpdxElement: string;
}

/** Letters, digits, '.' and '-' only, as SPDX identifiers require. */
const id = (...parts: string[]): string => `SPDXRef-${parts.join('-').replace(/[^A-Za-z0-9.-]/g, '-')}`;
const purl = (type: string, name: string, version: string, qualifiers = ''): ExternalRef[] => [{
  referenceCategory: 'PACKAGE-MANAGER',
  referenceType: 'purl',
  referenceLocator: `pkg:${type}/${name.split('/').map(encodeURIComponent).join('/')}@${
    encodeURIComponent(version)
  }${qualifiers}`,
}];
const hex = (digest: string): string => digest.slice('sha256:'.length);

/** The fields of a dpkg record (control file format; continuation lines joined). */
function controlFields(text: string): Record<string, string> {
  const fields: Record<string, string> = {};
  let last = '';
  for (const line of text.split('\n')) {
    if (/^\s/.test(line) && last) fields[last] += `\n${line.trim()}`;
    else if (line.includes(':')) {
      last = line.slice(0, line.indexOf(':'));
      fields[last] = line.slice(line.indexOf(':') + 1).trim();
    }
  }
  return fields;
}

/** /usr/lib/os-release's VERSION_ID (12 for bookworm), for the purls' distro qualifier. */
function debianVersion(base: string): string {
  const release = readFileSync(join(base, 'usr', 'lib', 'os-release'), 'utf8');
  return /^VERSION_ID="?([^"\n]*)"?$/m.exec(release)?.[1] ?? 'unknown';
}

export function spdxDocument(input: SbomInput): object {
  const packages = new Map<string, SpdxPackage>();
  const relationships: Relationship[] = [];
  const add = (parent: string, pkg: SpdxPackage): string => {
    packages.set(pkg.SPDXID, pkg);
    relationships.push({ spdxElementId: parent, relationshipType: 'CONTAINS', relatedSpdxElement: pkg.SPDXID });
    return pkg.SPDXID;
  };
  const download = input.revision === undefined
    ? `git+${input.source}.git`
    : `git+${input.source}.git@${input.revision}`;

  const image = id('image');
  packages.set(image, {
    SPDXID: image,
    name: input.name,
    versionInfo: input.version,
    downloadLocation: download,
    filesAnalyzed: false,
    licenseConcluded: 'NOASSERTION',
    licenseDeclared: input.license,
    copyrightText: 'NOASSERTION',
    primaryPackagePurpose: 'CONTAINER',
    checksums: [{ algorithm: 'SHA256', checksumValue: hex(input.index.digest) }],
    externalRefs: purl('oci', input.name, input.index.digest, `?tag=${input.version}`),
    description: `the image index of ${input.platforms.map((p) => `linux/${p.arch}`).join(' and ')}`,
  });
  relationships.push({ spdxElementId: 'SPDXRef-DOCUMENT', relationshipType: 'DESCRIBES', relatedSpdxElement: image });

  for (const platform of input.platforms) {
    const { arch } = platform;
    const manifest = add(image, {
      SPDXID: id('image', arch),
      name: `${input.name} linux/${arch}`,
      versionInfo: input.version,
      downloadLocation: 'NOASSERTION',
      filesAnalyzed: false,
      licenseConcluded: 'NOASSERTION',
      licenseDeclared: 'NOASSERTION',
      copyrightText: 'NOASSERTION',
      primaryPackagePurpose: 'CONTAINER',
      checksums: [{ algorithm: 'SHA256', checksumValue: hex(platform.manifest.digest) }],
      externalRefs: purl('oci', input.name, platform.manifest.digest, `?arch=${arch}`),
    });
    for (const { name, descriptor } of platform.layers) {
      // A layer both architectures share (the app's) is one package, in both images.
      const layer = id('layer', hex(descriptor.digest).slice(0, 12));
      relationships.push({ spdxElementId: manifest, relationshipType: 'CONTAINS', relatedSpdxElement: layer });
      if (packages.has(layer)) continue;
      packages.set(layer, {
        SPDXID: layer,
        name: `${name} layer${name === 'app' ? '' : ` linux/${arch}`}`,
        downloadLocation: 'NOASSERTION',
        filesAnalyzed: false,
        licenseConcluded: 'NOASSERTION',
        licenseDeclared: 'NOASSERTION',
        copyrightText: 'NOASSERTION',
        primaryPackagePurpose: 'ARCHIVE',
        checksums: [{ algorithm: 'SHA256', checksumValue: hex(descriptor.digest) }],
        comment: `image layer ${descriptor.digest}, ${descriptor.mediaType}`,
      });
      if (name === 'base') addDebian(layer, platform.rootfs, add);
      else if (name === 'node') addNode(layer, platform, add);
      else addApp(layer, input, download, add);
    }
  }

  return {
    spdxVersion: 'SPDX-2.3',
    dataLicense: 'CC0-1.0',
    SPDXID: 'SPDXRef-DOCUMENT',
    name: `${input.name}-${input.version}-image`,
    documentNamespace: `${input.source}/spdx/${input.name}-${input.version}-${hex(input.index.digest)}`,
    creationInfo: { created: input.created, creators: [`Tool: ${input.name}-image/sbom.ts-${input.version}`] },
    packages: [...packages.values()],
    relationships,
  };
}

type Add = (parent: string, pkg: SpdxPackage) => string;

/** The Debian packages of the base layer, from the dpkg records rootfs.sh keeps in it. */
function addDebian(layer: string, rootfs: string, add: Add): void {
  const base = join(rootfs, 'base');
  const distro = `debian-${debianVersion(base)}`;
  const records = join(base, 'var', 'lib', 'dpkg', 'status.d');
  for (const file of readdirSync(records).sort()) {
    const fields = controlFields(readFileSync(join(records, file), 'utf8'));
    const [name, version, arch] = [fields['Package']!, fields['Version']!, fields['Architecture']!];
    add(layer, {
      SPDXID: id('deb', name, arch, version),
      name,
      versionInfo: version,
      downloadLocation: 'NOASSERTION',
      filesAnalyzed: false,
      // Debian's copyright files are not all machine-readable: the file is in the image.
      licenseConcluded: 'NOASSERTION',
      licenseDeclared: 'NOASSERTION',
      copyrightText: 'NOASSERTION',
      supplier: 'Organization: Debian',
      externalRefs: purl('deb', `debian/${name}`, version, `?arch=${arch}&distro=${distro}`),
      comment: `licence: /usr/share/doc/${name}/copyright in the image${
        fields['Source'] ? `; source package ${fields['Source']}` : ''
      }`,
    });
  }
}

/** Node, from the manifest of the npm package its binary came from. */
function addNode(layer: string, platform: PlatformInput, add: Add): void {
  const pkg = JSON.parse(readFileSync(join(platform.rootfs, 'node-package.json'), 'utf8')) as {
    name: string;
    version: string;
    license: string;
  };
  add(layer, {
    SPDXID: id('node', platform.arch, pkg.version),
    name: 'node',
    versionInfo: pkg.version,
    downloadLocation: `https://registry.npmjs.org/${pkg.name}/-/${pkg.name}-${pkg.version}.tgz`,
    filesAnalyzed: false,
    licenseConcluded: 'NOASSERTION',
    licenseDeclared: pkg.license,
    copyrightText: 'NOASSERTION',
    primaryPackagePurpose: 'APPLICATION',
    externalRefs: purl('npm', pkg.name, pkg.version),
    description: `Node.js: /usr/local/bin/node, the binary of the npm package ${pkg.name}, stripped`,
  });
}

/** labeller (/app) and the npm packages its build bundles. */
function addApp(layer: string, input: SbomInput, download: string, add: Add): void {
  const app = add(layer, {
    SPDXID: id('npm', input.name, input.version),
    name: input.name,
    versionInfo: input.version,
    downloadLocation: download,
    filesAnalyzed: false,
    licenseConcluded: 'NOASSERTION',
    licenseDeclared: input.license,
    copyrightText: 'NOASSERTION',
    primaryPackagePurpose: 'APPLICATION',
    externalRefs: purl('npm', input.name, input.version),
    description: '/app: the bundle in /app/dist, its package.json and LICENSE',
  });
  for (const pkg of input.bundled) {
    add(app, {
      SPDXID: id('npm', pkg.name, pkg.version),
      name: pkg.name,
      versionInfo: pkg.version,
      downloadLocation: `https://registry.npmjs.org/${pkg.name}/-/${pkg.name.split('/').pop()}-${pkg.version}.tgz`,
      filesAnalyzed: false,
      licenseConcluded: 'NOASSERTION',
      licenseDeclared: pkg.license ?? 'NOASSERTION',
      copyrightText: 'NOASSERTION',
      primaryPackagePurpose: 'LIBRARY',
      externalRefs: purl('npm', pkg.name, pkg.version),
      comment: 'bundled into /app/dist; its licence text is in /app/dist/THIRD_PARTY_LICENSES.txt',
    });
  }
}
