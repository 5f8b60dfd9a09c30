// What labeller remembers of each source across restarts: a sketch of its last good key set, so
// that an outage answering 200 (a CMDB in maintenance serving one key, a proxy's error page as
// JSON) is refused at the first read after a restart as it is while running. Without it, a
// process started during the outage would take the outage for the source's content and strip
// the labels of every key it lacks.
//
// The sketch is the key count and the smallest SKETCH_SIZE of the keys' 32-bit hashes (a
// bottom-k sample): exact for a source of up to SKETCH_SIZE keys, an unbiased estimate of the
// share of keys dropped above that, and never more than about 1.4 KB per source. The sketches
// are annotations on one Lease in labeller's namespace (the Lease RBAC every mode grants), one
// per source origin, keyed by a hash of the origin, so neither a URL's token nor a key is stored.
// Only a process that may write records (the field-manager guard's Lease held: leader and
// standalone alike); one that cannot read or write the Lease says so once and goes on as before.
import { createHash } from 'node:crypto';
import type { Lease, LeaseApi } from '../kube/lease.ts';
import { isForbidden } from '../kube/errors.ts';
import { nameSlug } from '../kube/names.ts';
import type { Writable } from '../labelling/ports.ts';
import type { Logger } from '../util/log.ts';
import { dropsMost, type SourceContent } from './content.ts';

/** How many key hashes a sketch keeps. */
export const SKETCH_SIZE = 256;
const ANNOTATION_PREFIX = 'labeller/source.';

/** A source's key set, as remembered. */
export interface KeySketch {
  /** How many keys the content had. */
  readonly keys: number;
  /** The smallest SKETCH_SIZE key hashes, ascending (all of them when there are no more). */
  readonly sample: readonly number[];
}

export function sketchOf(content: SourceContent): KeySketch {
  const hashes = [...content.keys()].map(keyHash).sort((a, b) => a - b);
  return { keys: content.size, sample: hashes.slice(0, SKETCH_SIZE) };
}

/** How many of the sketch's keys `after` lacks: exact up to SKETCH_SIZE keys, else estimated from the sample. */
export function removedSince(before: KeySketch, after: SourceContent): number {
  if (before.sample.length === 0) return 0;
  const present = new Set([...after.keys()].map(keyHash));
  const missing = before.sample.filter((hash) => !present.has(hash)).length;
  return before.sample.length === before.keys ? missing : Math.round((missing / before.sample.length) * before.keys);
}

/** Why `after`, a source's first read since labeller started, looks like an outage against what it had before; undefined when it does not. */
export function outageSinceRestart(before: KeySketch | undefined, after: SourceContent): string | undefined {
  if (before === undefined) return undefined;
  const removed = removedSince(before, after);
  if (!dropsMost(removed, before.keys)) return undefined;
  const about = before.sample.length === before.keys ? '' : 'about ';
  return `it drops ${about}${removed} of the ${before.keys} keys it had before labeller started`;
}

/** The Lease that holds the sketches: one per leader-election group, else one per field manager. */
export function memoryLeaseName(fieldManager: string, groupLeaseName: string | undefined): string {
  if (groupLeaseName) return `${groupLeaseName}-sources`;
  const slug = nameSlug(fieldManager, 40);
  return `sources-${slug ? `${slug}-` : ''}${sha256(fieldManager).slice(0, 10)}`;
}

/** What the source set asks of the memory. */
export interface SourceMemory {
  /** The sketch remembered for `origin` (a source's identity), or undefined when there is none or it cannot be read. */
  recall(origin: string): Promise<KeySketch | undefined>;
  /** Records `sketch` for `origin` in the background: the last one asked for wins. */
  remember(origin: string, source: string, sketch: KeySketch): void;
  /** Gives up records still waiting for write permission; resolves once a write under way is done. */
  close(): Promise<void>;
}

export interface LeaseMemoryOptions {
  readonly namespace: string;
  readonly name: string;
  /** Records wait for it: only a process that may write records. */
  readonly writable?: Writable | undefined;
  readonly log: Logger;
}

/** Sketches as annotations on a Lease. */
export class LeaseMemory implements SourceMemory {
  readonly #api: LeaseApi;
  readonly #options: LeaseMemoryOptions;
  readonly #pending = new Map<string, string>();
  #writing: Promise<void> | undefined;
  /** The Lease as last read or written. */
  #lease: Lease | undefined;
  /** Whether #lease is as written by this process last: else it is read again before a write. */
  #fresh = false;
  #read: Promise<void> | undefined;
  #warned = false;
  readonly #closed = new AbortController();

  constructor(api: LeaseApi, options: LeaseMemoryOptions) {
    this.#api = api;
    this.#options = options;
  }

  async recall(origin: string): Promise<KeySketch | undefined> {
    // Read once for every source of the config; later (a source restarted by a reload), what
    // this process recorded since counts, written or still waiting to be.
    this.#read ??= this.#api.get(this.#options.namespace, this.#options.name, this.#closed.signal).then(
      (lease) => void (this.#lease = lease),
      (error: unknown) => {
        if (!this.#closed.signal.aborted) this.#cannot('read', error);
      },
    );
    await this.#read;
    const key = annotation(origin);
    const value = this.#pending.get(key) ?? this.#lease?.metadata.annotations?.[key];
    return value === undefined ? undefined : parseSketch(value);
  }

  remember(origin: string, source: string, sketch: KeySketch): void {
    this.#pending.set(annotation(origin), formatSketch(source, sketch));
    this.#flush();
  }

  /** One write at a time; a record that came as one ended is written next. */
  #flush(): void {
    this.#writing ??= this.#write().finally(() => {
      this.#writing = undefined;
      if (this.#pending.size > 0 && !this.#closed.signal.aborted) this.#flush();
    });
  }

  async close(): Promise<void> {
    this.#closed.abort();
    await this.#writing;
  }

  async #write(): Promise<void> {
    const { namespace, name, writable } = this.#options;
    const signal = this.#closed.signal;
    try {
      await writable?.(signal);
      // A lost race (409) reads the Lease again; a few tries, then the next record tries again.
      for (let attempt = 0; attempt < 5 && this.#pending.size > 0; attempt++) {
        if (!this.#fresh) this.#lease = await this.#api.get(namespace, name, signal);
        this.#fresh = true;
        const current = this.#lease;
        const records = new Map(this.#pending);
        const annotations = { ...current?.metadata.annotations };
        for (const [key, value] of records) annotations[key] = value;
        if (current && [...records].every(([key, value]) => current.metadata.annotations?.[key] === value)) {
          this.#settled(records);
          return;
        }
        const written = current
          ? await this.#api.update({ metadata: { ...current.metadata, annotations }, spec: current.spec }, signal)
          : await this.#api.create({ metadata: { name, namespace, annotations }, spec: {} }, signal);
        // A lost race: read it again.
        this.#fresh = written !== undefined;
        if (written) {
          this.#lease = written;
          this.#settled(records);
        }
      }
    } catch (error) {
      this.#fresh = false;
      this.#pending.clear();
      if (!signal.aborted) this.#cannot('write', error);
    }
  }

  /** Drops the records written, unless a newer one came meanwhile. */
  #settled(records: ReadonlyMap<string, string>): void {
    for (const [key, value] of records) if (this.#pending.get(key) === value) this.#pending.delete(key);
  }

  #cannot(what: 'read' | 'write', error: unknown): void {
    if (this.#warned) return;
    this.#warned = true;
    const { namespace, name } = this.#options;
    this.#options.log.warn(
      `cannot ${what} the sources' memory; an outage that a source answers with 200 is caught while labeller runs, not at its first read after a restart${
        isForbidden(error) ? `: grant get, create and update on leases in ${namespace}` : ''
      }`,
      { lease: `${namespace}/${name}`, error: error instanceof Error ? error.message : String(error) },
    );
  }
}

/** A source's identity for the memory: its origin, hashed (a URL may carry a token). */
export function originKey(origin: object): string {
  return sha256(JSON.stringify(origin)).slice(0, 16);
}

const annotation = (origin: string) => `${ANNOTATION_PREFIX}${origin}`;

/** A record: the source's name (for whoever reads the Lease), its key count and sample. */
export function formatSketch(source: string, { keys, sample }: KeySketch): string {
  const bytes = Buffer.alloc(sample.length * 4);
  sample.forEach((hash, i) => bytes.writeUInt32BE(hash, i * 4));
  return JSON.stringify({ source, keys, sample: bytes.toString('base64') });
}

/** A record as written by formatSketch; undefined when it is not one (edited by hand, another version). */
export function parseSketch(value: string): KeySketch | undefined {
  try {
    const record = JSON.parse(value) as { keys?: unknown; sample?: unknown };
    if (typeof record.keys !== 'number' || typeof record.sample !== 'string') return undefined;
    const bytes = Buffer.from(record.sample, 'base64');
    const sample = Array.from({ length: Math.floor(bytes.length / 4) }, (_, i) => bytes.readUInt32BE(i * 4));
    return { keys: record.keys, sample };
  } catch {
    return undefined;
  }
}

function keyHash(key: string): number {
  return createHash('sha256').update(key).digest().readUInt32BE(0);
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
