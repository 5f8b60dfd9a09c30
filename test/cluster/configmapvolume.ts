// A folder laid out as the kubelet lays out a ConfigMap (or Secret) volume, updated the way the
// kubelet updates it: a new versioned folder, and the ..data symlink swapped to it.
import { mkdirSync, mkdtempSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A folder laid out as the kubelet lays out a ConfigMap volume: <file> → ..data/<file>, ..data → ..<version>. */
export class ConfigMapVolume {
  readonly dir = mkdtempSync(join(tmpdir(), 'labeller-volume-'));
  readonly path: string;
  readonly #file: string;
  #version = 0;

  constructor(text: string, file = 'kinds.yaml') {
    this.#file = file;
    this.path = join(this.dir, file);
    this.update(text);
    symlinkSync(`..data/${file}`, this.path);
  }

  /** Swaps the content in, as the kubelet does when the ConfigMap changes. */
  update(text: string): void {
    const version = `..v${++this.#version}`;
    mkdirSync(join(this.dir, version));
    writeFileSync(join(this.dir, version, this.#file), text);
    symlinkSync(version, join(this.dir, '..data_tmp'));
    renameSync(join(this.dir, '..data_tmp'), join(this.dir, '..data'));
  }
}
