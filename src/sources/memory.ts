// What labeller remembers of each source across restarts: a sketch of its last good key set, so
// that an outage answering 200 (a CMDB in maintenance serving one key, a proxy's error page as
// JSON) is refused at the first read after a restart as it is while running. Without it, a
// process started during the outage would take the outage for the source's content and strip
// the labels of every key it lacks.
//
// The sketches are annotations on one Lease in labeller's namespace (the Lease RBAC every mode
// grants), one per source NAME (`sources.labeller/<name>`), so re-tuning a source (its interval,
// timeout, maxBytes, caFile…) keeps its record and nothing piles up; a record names a fingerprint
// of where the content comes from (the ConfigMap and key, the file, the URL), so a source pointed
// elsewhere starts afresh. The records of sources no longer in the config (told by the source
// set as each config takes effect: retain), and those of the format before
// (`labeller/source.<hash of the whole origin>`), are deleted as soon as they are seen.
//
// A record holds nothing from which keys can be recovered. With a secret key
// (--sources-memory-key-file, which the chart fills from a Secret of its own; never on the
// Lease), the sketch is the key count and the smallest SKETCH_SIZE of the keys' keyed hashes
// (HMAC-SHA-256 under the secret, cut to 32 bits: a bottom-k sample), exact for a source of up
// to SKETCH_SIZE keys and an unbiased estimate of the share dropped above that; the record also
// carries the key's id (an HMAC of a constant), so a record written under another key reads as
// none. Without a key, a record is the key count alone, and a drop is judged by count. A record
// is at most RECORD_MAX_BYTES.
// Only a process that may write records (the field-manager guard's Lease held: leader and
// standalone alike); one that cannot read or write the Lease says so once and goes on as before.
import { createHash, type Hash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { SourceOrigin } from '../config/sources.ts';
import type { Lease, LeaseApi } from '../kube/lease.ts';
import { isForbidden } from '../apimachinery/errors.ts';
import { nameSlug } from '../apimachinery/names.ts';
import type { Writable } from '../labelling/ports.ts';
import type { Logger } from '../util/log.ts';
import { UsageError } from '../util/usage.ts';
import { TimeSlice } from '../runtime/slices.ts';
import { dropsMost, type SourceContent } from './content.ts';

/** How many key hashes a sketch keeps. */
export const SKETCH_SIZE = 256;
/** The most a record's value takes: a full sample (SKETCH_SIZE × 4 bytes, base64) and the fields around it. */
export const RECORD_MAX_BYTES = 1_470;
/** The fewest bytes a secret key may have. */
export const MEMORY_KEY_MIN_BYTES = 16;
/** Each source's record: `sources.labeller/<source name>`. */
const RECORD_PREFIX = 'sources.labeller/';
/** The records of the format before, keyed by a hash of the whole origin: deleted at the next write. */
const OLD_RECORD_PREFIX = 'labeller/source.';
const FORMAT = 2;
/** A source name is a DNS-1123 label (config/sources.ts), so a valid annotation name as it is. */
const SOURCE_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** A source's key set, as remembered. */
export interface KeySketch {
  /** How many keys the content had. */
  readonly keys: number;
  /** The smallest SKETCH_SIZE keyed key hashes, ascending (all of them when there are no more); undefined: the count only (no key). */
  readonly sample?: readonly number[] | undefined;
}

/**
 * The secret the sample's hashes are keyed with: HMAC-SHA-256, its inner and outer states
 * computed once and copied for each key (about a third of what createHmac costs per key).
 */
export class MemoryKey {
  /** The key's id, stored with each record: an HMAC of a constant, from which the key cannot be had. */
  readonly id: string;
  readonly #inner: Hash;
  readonly #outer: Hash;
  /** The inner state with the prefix of a source key's message. */
  readonly #keyInner: Hash;

  constructor(secret: Uint8Array) {
    const block = Buffer.alloc(64);
    (secret.length > 64 ? createHash('sha256').update(secret).digest() : Buffer.from(secret)).copy(block);
    const [inner, outer] = [block.map((byte) => byte ^ 0x36), block.map((byte) => byte ^ 0x5c)];
    this.#inner = createHash('sha256').update(inner);
    this.#outer = createHash('sha256').update(outer);
    for (const bytes of [block, inner, outer]) bytes.fill(0);
    this.#keyInner = this.#inner.copy().update('key\0');
    this.id = this.mac('labeller sources memory key id').toString('hex', 0, 8);
  }

  /** HMAC-SHA-256(secret, text). */
  mac(text: string): Buffer {
    return this.#outer.copy().update(this.#inner.copy().update(text).digest()).digest();
  }

  /** A source key's 32-bit keyed hash: HMAC-SHA-256(secret, "key\0" + key), cut. */
  keyHash(key: string): number {
    return this.#outer.copy().update(this.#keyInner.copy().update(key).digest()).digest().readUInt32BE(0);
  }
}

/** The secret key in `path` (--sources-memory-key-file): its bytes, trailing white space cut. */
export function readMemoryKey(path: string): MemoryKey {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new UsageError(
      `--sources-memory-key-file ${path}: cannot read it (${
        code ?? String(error)
      }); give a file holding a random secret, e.g. from head -c 32 /dev/urandom | base64`,
    );
  }
  let end = bytes.length;
  while (end > 0 && [0x20, 0x09, 0x0a, 0x0d].includes(bytes[end - 1]!)) end--;
  const secret = bytes.subarray(0, end);
  if (secret.length < MEMORY_KEY_MIN_BYTES) {
    throw new UsageError(
      `--sources-memory-key-file ${path}: it holds ${secret.length} bytes; the key needs at least ${MEMORY_KEY_MIN_BYTES} random ones, e.g. from head -c 32 /dev/urandom | base64`,
    );
  }
  const key = new MemoryKey(secret);
  bytes.fill(0);
  return key;
}

export function sketchOf(content: SourceContent, key: MemoryKey | undefined): KeySketch {
  if (!key) return { keys: content.size };
  const hashes = [...content.keys()].map((k) => key.keyHash(k)).sort((a, b) => a - b);
  return { keys: content.size, sample: hashes.slice(0, SKETCH_SIZE) };
}

/** sketchOf, letting the event loop in every few milliseconds (a large source, sketched in the background). */
async function sketchInSlices(content: SourceContent, key: MemoryKey | undefined): Promise<KeySketch> {
  if (!key) return { keys: content.size };
  const hashes: number[] = [];
  const slice = new TimeSlice();
  for (const k of content.keys()) {
    hashes.push(key.keyHash(k));
    if (slice.spent) await slice.next();
  }
  hashes.sort((a, b) => a - b);
  return { keys: content.size, sample: hashes.slice(0, SKETCH_SIZE) };
}

/**
 * How many of the sketch's keys `after` lacks: exact up to SKETCH_SIZE keys, else estimated from
 * the sample; by count (how many fewer keys it has) when the sketch has no sample.
 */
export function removedSince(before: KeySketch, after: SourceContent, key: MemoryKey | undefined): number {
  const { sample } = before;
  if (sample === undefined || !key) return Math.max(0, before.keys - after.size);
  if (sample.length === 0) return 0;
  const present = new Set([...after.keys()].map((k) => key.keyHash(k)));
  const missing = sample.filter((hash) => !present.has(hash)).length;
  return sample.length === before.keys ? missing : Math.round((missing / sample.length) * before.keys);
}

/** Why `after`, a source's first read since labeller started, looks like an outage against what it had before; undefined when it does not. */
export function outageSinceRestart(
  before: KeySketch | undefined,
  after: SourceContent,
  key: MemoryKey | undefined,
): string | undefined {
  if (before === undefined) return undefined;
  const removed = removedSince(before, after, key);
  if (!dropsMost(removed, before.keys)) return undefined;
  const said = `it drops ${removed} of the ${before.keys} keys it had before labeller started`;
  if (before.sample === undefined || !key) {
    return `${said}, by count (without --sources-memory-key-file the sources' memory keeps key counts only)`;
  }
  return before.sample.length === before.keys ? said : said.replace('drops ', 'drops about ');
}

/** What the memory holds of a source, as the source set uses it. */
export interface Remembered {
  /** How many keys it had. */
  readonly keys: number;
  /** Why `after`, the source's first read since labeller started, looks like an outage; undefined when it does not. */
  outage(after: SourceContent): string | undefined;
}

export function remembered(sketch: KeySketch, key: MemoryKey | undefined): Remembered {
  return { keys: sketch.keys, outage: (after) => outageSinceRestart(sketch, after, key) };
}

/** The Lease that holds the sketches: one per leader-election group, else one per field manager. */
export function memoryLeaseName(fieldManager: string, groupLeaseName: string | undefined): string {
  if (groupLeaseName) return `${groupLeaseName}-sources`;
  const slug = nameSlug(fieldManager, 40);
  return `sources-${slug ? `${slug}-` : ''}${sha256(fieldManager).slice(0, 10)}`;
}

/**
 * Where a source's content comes from, and only that: the ConfigMap (namespace, name, key), the
 * file, the URL (without its fragment; its query may choose the content, so it counts). How it
 * is read (interval, timeout, maxBytes, caFile, bearerTokenFile) does not.
 */
export function originOf(origin: SourceOrigin): string {
  switch (origin.type) {
    case 'configMap':
      return JSON.stringify(['configMap', origin.namespace, origin.name, origin.key ?? null]);
    case 'file':
      return JSON.stringify(['file', origin.path]);
    case 'url': {
      let url = origin.url;
      try {
        const parsed = new URL(url);
        parsed.hash = '';
        parsed.username = '';
        parsed.password = '';
        url = parsed.href;
      } catch {
        // Checked by the config: kept as written.
      }
      return JSON.stringify(['url', url]);
    }
  }
}

/** What the source set asks of the memory. */
export interface SourceMemory {
  /** What is remembered of source `name` while it reads `origin` (originOf); undefined when nothing, or it cannot be read. */
  recall(name: string, origin: string): Promise<Remembered | undefined>;
  /** Records source `name`'s good `content` read from `origin`, in the background: the last one asked for wins. */
  remember(name: string, origin: string, content: SourceContent): void;
  /** The sources of the config in force: the records of any other are deleted at the next write. */
  retain(names: Iterable<string>): void;
  /** Gives up records still waiting for write permission; resolves once a write under way is done. */
  close(): Promise<void>;
}

export interface LeaseMemoryOptions {
  readonly namespace: string;
  readonly name: string;
  /** The secret the samples are keyed with; none: key counts only. */
  readonly key?: MemoryKey | undefined;
  /** Records wait for it: only a process that may write records. */
  readonly writable?: Writable | undefined;
  readonly log: Logger;
}

/** A record waiting to be written. */
interface Pending {
  /** The fingerprint of the source's origin. */
  readonly origin: string;
  readonly content: SourceContent;
}

/** A record as stored. */
export interface SourceRecord extends KeySketch {
  /** The fingerprint of the source's origin (keyed, with a key). */
  readonly origin: string;
  /** The id of the key the sample is keyed with; undefined: no key, no sample. */
  readonly keyId?: string | undefined;
}

/** Sketches as annotations on a Lease. */
export class LeaseMemory implements SourceMemory {
  readonly #api: LeaseApi;
  readonly #options: LeaseMemoryOptions;
  /** By source name. */
  readonly #pending = new Map<string, Pending>();
  #writing: Promise<void> | undefined;
  /** The Lease as last read or written. */
  #lease: Lease | undefined;
  /** Whether #lease is as written by this process last: else it is read again before a write. */
  #fresh = false;
  #read: Promise<void> | undefined;
  /** The record keys of the sources of the config in force; undefined until told. */
  #retained: ReadonlySet<string> | undefined;
  /** Whether records of other sources (or of the old format) are to be deleted, as soon as seen. */
  #prune = false;
  #warned = false;
  readonly #closed = new AbortController();

  constructor(api: LeaseApi, options: LeaseMemoryOptions) {
    this.#api = api;
    this.#options = options;
  }

  async recall(name: string, origin: string): Promise<Remembered | undefined> {
    // Read once for every source of the config; later (a source restarted by a reload), what
    // this process recorded since counts, written or still waiting to be.
    this.#read ??= this.#api.get(this.#options.namespace, this.#options.name, this.#closed.signal).then(
      (lease) => {
        this.#lease = lease;
        if (this.#prune && this.#stale(lease)) this.#flush();
      },
      (error: unknown) => {
        if (!this.#closed.signal.aborted) this.#cannot('read', error);
      },
    );
    await this.#read;
    const { key } = this.#options;
    const fingerprint = this.#fingerprint(origin);
    const pending = this.#pending.get(name);
    if (pending) return pending.origin === fingerprint ? remembered(sketchOf(pending.content, key), key) : undefined;
    const record = parseRecord(this.#lease?.metadata.annotations?.[recordKey(name)]);
    // Another origin, or written under another key (or none): nothing that can be compared.
    if (record === undefined || record.origin !== fingerprint || record.keyId !== key?.id) return undefined;
    return remembered(record, key);
  }

  remember(name: string, origin: string, content: SourceContent): void {
    if (this.#retained && !this.#retained.has(recordKey(name))) return;
    this.#pending.set(name, { origin: this.#fingerprint(origin), content });
    this.#flush();
  }

  retain(names: Iterable<string>): void {
    const retained = new Set([...names].map(recordKey));
    this.#retained = retained;
    for (const name of this.#pending.keys()) if (!retained.has(recordKey(name))) this.#pending.delete(name);
    this.#prune = true;
    // Once the Lease has been read: at start, the first read sees to it.
    if (this.#stale(this.#lease)) this.#flush();
  }

  /** One write at a time; a record that came as one ended is written next, and so is a prune asked for meanwhile. */
  #flush(): void {
    this.#writing ??= this.#write().finally(() => {
      this.#writing = undefined;
      if (this.#closed.signal.aborted) return;
      if (this.#pending.size > 0 || (this.#prune && this.#stale(this.#lease))) this.#flush();
    });
  }

  async close(): Promise<void> {
    this.#closed.abort();
    await this.#writing;
  }

  async #write(): Promise<void> {
    const { namespace, name, writable, key } = this.#options;
    const signal = this.#closed.signal;
    /** Each record's value, sketched once (a large source takes a while). */
    const formatted = new Map<Pending, string>();
    try {
      await writable?.(signal);
      // Until nothing waits; a lost race (409) reads the Lease again: a few, then the next record tries again.
      for (let lost = 0; lost < 5;) {
        const records = new Map(this.#pending);
        const retained = this.#retained;
        const values = new Map<string, string>();
        for (const [source, pending] of records) {
          let value = formatted.get(pending);
          if (value === undefined) {
            const sketch = await sketchInSlices(pending.content, key);
            value = formatRecord({ origin: pending.origin, keyId: key?.id, ...sketch });
            formatted.set(pending, value);
          }
          values.set(recordKey(source), value);
        }
        if (!this.#fresh) this.#lease = await this.#api.get(namespace, name, signal);
        this.#fresh = true;
        const current = this.#lease;
        const before = current?.metadata.annotations ?? {};
        const annotations: Record<string, string> = {};
        for (const [k, value] of Object.entries(before)) if (!isStale(k, retained)) annotations[k] = value;
        for (const [k, value] of values) annotations[k] = value;
        if (!sameRecords(before, annotations) && (current || values.size > 0)) {
          // Checked again as it is sent: the guard's Lease may have lapsed while the records were sketched.
          const lapsed = writable?.(signal);
          if (lapsed) {
            await lapsed;
            this.#fresh = false;
            continue;
          }
          const written = current
            ? await this.#api.update({ metadata: { ...current.metadata, annotations }, spec: current.spec }, signal)
            : await this.#api.create({ metadata: { name, namespace, annotations }, spec: {} }, signal);
          // A lost race: read it again.
          this.#fresh = written !== undefined;
          if (!written) {
            lost++;
            continue;
          }
          this.#lease = written;
        }
        this.#settled(records, retained);
        if (this.#pending.size === 0 && !(this.#prune && this.#stale(this.#lease))) return;
      }
    } catch (error) {
      this.#fresh = false;
      this.#pending.clear();
      this.#prune = false;
      if (!signal.aborted) this.#cannot('write', error);
    }
  }

  /** Drops the records written, unless a newer one came meanwhile; the prune is done unless the sources changed since. */
  #settled(records: ReadonlyMap<string, Pending>, retained: ReadonlySet<string> | undefined): void {
    for (const [source, pending] of records) if (this.#pending.get(source) === pending) this.#pending.delete(source);
    if (retained === this.#retained) this.#prune = false;
  }

  /** Whether `lease` holds records to delete. */
  #stale(lease: Lease | undefined): boolean {
    return Object.keys(lease?.metadata.annotations ?? {}).some((k) => isStale(k, this.#retained));
  }

  /** The origin's fingerprint: keyed with a key (a URL's query may hold a token), 64 bits. */
  #fingerprint(origin: string): string {
    const { key } = this.#options;
    return key ? key.mac(`origin\0${origin}`).toString('hex', 0, 8) : sha256(origin).slice(0, 16);
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

/** The annotation that holds source `name`'s record. */
export function recordKey(name: string): string {
  // Source names are checked by the config; any other string is hashed into a name no source has.
  return `${RECORD_PREFIX}${SOURCE_NAME.test(name) ? name : `hash.${sha256(name).slice(0, 16)}`}`;
}

/** Whether annotation `key` is a record to delete: of the old format, or of a source not in `retained`. */
function isStale(key: string, retained: ReadonlySet<string> | undefined): boolean {
  if (key.startsWith(OLD_RECORD_PREFIX)) return true;
  return retained !== undefined && key.startsWith(RECORD_PREFIX) && !retained.has(key);
}

function sameRecords(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => a[k] === b[k]);
}

/** A record: the format, the origin's fingerprint, the key's id, the key count and the sample (base64 of 32-bit hashes). */
export function formatRecord({ origin, keyId, keys, sample }: SourceRecord): string {
  const record: Record<string, unknown> = { v: FORMAT, origin };
  if (keyId !== undefined && sample !== undefined) {
    const bytes = Buffer.alloc(sample.length * 4);
    sample.forEach((hash, i) => bytes.writeUInt32BE(hash, i * 4));
    Object.assign(record, { keyId, keys, sample: bytes.toString('base64') });
  } else {
    record['keys'] = keys;
  }
  return JSON.stringify(record);
}

/** A record as written by formatRecord; undefined when it is not one (edited by hand, another version). */
export function parseRecord(value: string | undefined): SourceRecord | undefined {
  if (value === undefined) return undefined;
  try {
    const record = JSON.parse(value) as {
      v?: unknown;
      origin?: unknown;
      keyId?: unknown;
      keys?: unknown;
      sample?: unknown;
    };
    const { v, origin, keyId, keys, sample } = record;
    if (
      v !== FORMAT || typeof origin !== 'string' || typeof keys !== 'number' || !Number.isSafeInteger(keys) || keys < 0
    ) {
      return undefined;
    }
    if (keyId === undefined && sample === undefined) return { origin, keys };
    if (typeof keyId !== 'string' || typeof sample !== 'string') return undefined;
    const bytes = Buffer.from(sample, 'base64');
    const hashes = Array.from({ length: Math.floor(bytes.length / 4) }, (_, i) => bytes.readUInt32BE(i * 4));
    if (hashes.length > Math.min(keys, SKETCH_SIZE)) return undefined;
    return { origin, keyId, keys, sample: hashes };
  } catch {
    return undefined;
  }
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}
