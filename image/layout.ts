// An OCI image layout on disk (https://github.com/opencontainers/image-spec/blob/main/image-layout.md):
// blobs by digest under blobs/sha256/, and index.json naming what the layout holds. What
// image/assemble.ts needs to annotate crane's images, index them and add the SBOM beside them.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const MEDIA = {
  index: 'application/vnd.oci.image.index.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  empty: 'application/vnd.oci.empty.v1+json',
} as const;

export interface Platform {
  readonly os: string;
  readonly architecture: string;
}

export interface Descriptor {
  readonly mediaType: string;
  readonly digest: string;
  readonly size: number;
  readonly annotations?: Readonly<Record<string, string>>;
  readonly platform?: Platform;
  readonly artifactType?: string;
  /** The blob itself, base64: the empty config's, so a registry need not be asked for 2 bytes. */
  readonly data?: string;
}

export interface Manifest {
  readonly schemaVersion: 2;
  readonly mediaType: string;
  readonly artifactType?: string;
  readonly config: Descriptor;
  readonly layers: readonly Descriptor[];
  readonly subject?: Descriptor;
  readonly annotations?: Readonly<Record<string, string>>;
}

export interface Index {
  readonly schemaVersion: 2;
  readonly mediaType: string;
  readonly manifests: readonly Descriptor[];
  readonly annotations?: Readonly<Record<string, string>>;
}

export interface ImageConfig {
  readonly os: string;
  readonly architecture: string;
  readonly config: Readonly<Record<string, unknown>>;
}

export class Layout {
  readonly dir: string;

  constructor(dir: string) {
    this.dir = dir;
  }

  /** An empty layout in `dir` (replaced). */
  static create(dir: string): Layout {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(join(dir, 'blobs', 'sha256'), { recursive: true });
    writeFileSync(join(dir, 'oci-layout'), `${JSON.stringify({ imageLayoutVersion: '1.0.0' })}\n`);
    const layout = new Layout(dir);
    layout.setIndex([]);
    return layout;
  }

  path(digest: string): string {
    const [algorithm, hex] = digest.split(':');
    if (algorithm !== 'sha256' || !/^[0-9a-f]{64}$/.test(hex ?? '')) throw new Error(`not a sha256 digest: ${digest}`);
    return join(this.dir, 'blobs', 'sha256', hex!);
  }

  blob(digest: string): Buffer {
    const bytes = readFileSync(this.path(digest));
    const actual = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
    if (actual !== digest) throw new Error(`${this.dir}: blob ${digest} holds ${actual}`);
    return bytes;
  }

  json<T>(digest: string): T {
    return JSON.parse(this.blob(digest).toString('utf8')) as T;
  }

  /** Stores `bytes` (JSON as given: its digest is of exactly these bytes); returns its descriptor. */
  put(mediaType: string, bytes: Buffer | string): Descriptor {
    const buffer = typeof bytes === 'string' ? Buffer.from(bytes) : bytes;
    const digest = `sha256:${createHash('sha256').update(buffer).digest('hex')}`;
    if (!existsSync(this.path(digest))) writeFileSync(this.path(digest), buffer);
    return { mediaType, digest, size: buffer.length };
  }

  /** A blob this layout has no more use for (a manifest replaced by its annotated copy). */
  drop(digest: string): void {
    rmSync(this.path(digest), { force: true });
  }

  index(): Index {
    return JSON.parse(readFileSync(join(this.dir, 'index.json'), 'utf8')) as Index;
  }

  setIndex(manifests: readonly Descriptor[]): void {
    const index: Index = { schemaVersion: 2, mediaType: MEDIA.index, manifests };
    writeFileSync(join(this.dir, 'index.json'), `${JSON.stringify(index, null, 2)}\n`);
  }
}
