// Where the buckets of the namespace hash space begin and end. The API server's shardRange()
// hashes a namespace with 64-bit FNV-1a, which barely stirs its last bytes into the high bits:
// names that differ only at the end (`team-1` … `team-999`) hash close together, so equal buckets
// over the space hold them in a handful (1,000 such names in 12 of 256). A layout therefore cuts
// the space where the namespaces are: each bucket's edges are quantiles of a blend of the
// namespaces' hashes seen and the uniform space, so each bucket holds about as many of today's
// namespaces as any other, and a namespace created later lands in proportion to the gaps.
//
// Every member must cut alike, so one member (membership.ts: the oldest) works the layout out
// and publishes it; the others use what it published. The uniform layout, equal buckets by the
// hash's top byte, is what a member uses before it knows better, or when it cannot list namespaces.
import { createHash } from 'node:crypto';
import { BUCKETS, fnv1a64, rangesOf } from './ranges.ts';

const SPACE = 1n << 64n;
const BUCKET_BITS = 56n;

export class Layout {
  /** Where buckets 1 … BUCKETS-1 begin, strictly increasing (bucket 0 begins at 0). */
  readonly #starts: readonly bigint[];
  /** Each namespace's bucket, hashed once. */
  readonly #buckets = new Map<string, number>();
  /** A short digest for logs and comparisons; `uniform` for the uniform layout. */
  readonly id: string;

  private constructor(starts: readonly bigint[], id: string) {
    this.#starts = starts;
    this.id = id;
  }

  static readonly uniform = new Layout(
    Array.from({ length: BUCKETS - 1 }, (_, index) => BigInt(index + 1) << BUCKET_BITS),
    'uniform',
  );

  /**
   * The layout for `namespaces`: bucket edges at the quantiles of F = (1 − w)·uniform + w·empirical,
   * w = n/(n + BUCKETS). Each bucket then holds at most about (n + BUCKETS)/BUCKETS of the n
   * namespaces, however their hashes cluster, and every bucket has a width (F rises everywhere).
   */
  static of(namespaces: Iterable<string>): Layout {
    const hashes = [...new Set(namespaces)].map(fnv1a64).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const n = hashes.length;
    if (n === 0) return Layout.uniform;
    const w = n / (n + BUCKETS);
    const space = Number(SPACE);
    // F just below hash k: the uniform part up to it, plus the k namespaces before it.
    const below = (k: number) => (1 - w) * (Number(hashes[k]!) / space) + (w * k) / n;
    const starts: bigint[] = [];
    let k = 0;
    for (let bucket = 1; bucket < BUCKETS; bucket++) {
      const target = bucket / BUCKETS;
      while (k < n && below(k) + w / n <= target) k++;
      let start: bigint;
      if (k < n && below(k) <= target) {
        // Within hash k's step: the bucket begins with namespace k.
        start = hashes[k]!;
      } else {
        // Between hash k-1 (or 0) and hash k (or the end): on the uniform slope.
        const from = k === 0 ? 0n : hashes[k - 1]!;
        const fromF = k === 0 ? 0 : below(k - 1) + w / n;
        start = from + BigInt(Math.floor(((target - fromF) / (1 - w)) * space));
      }
      const previous = starts.at(-1) ?? 0n;
      starts.push(start > previous ? (start < SPACE ? start : SPACE - 1n) : previous + 1n);
    }
    return Layout.#made(starts);
  }

  /** The layout last read back: every member publishes the group's on each renewal. */
  static #lastRead: { readonly text: string; readonly layout: Layout } | undefined;

  /** A layout published by encode(); undefined when the text is not one. */
  static decode(text: string | undefined): Layout | undefined {
    if (text === undefined || text === '' || text === 'uniform') return text === undefined ? undefined : Layout.uniform;
    if (Layout.#lastRead?.text === text) return Layout.#lastRead.layout;
    if (text.length !== (BUCKETS - 1) * 16 || !/^[0-9a-f]+$/.test(text)) return undefined;
    const starts = Array.from(
      { length: BUCKETS - 1 },
      (_, index) => BigInt(`0x${text.slice(index * 16, index * 16 + 16)}`),
    );
    if (starts[0] === 0n || starts.some((start, index) => index > 0 && start <= starts[index - 1]!)) return undefined;
    const layout = Layout.#made(starts);
    Layout.#lastRead = { text, layout };
    return layout;
  }

  static #made(starts: bigint[]): Layout {
    const text = encode(starts);
    return text === encode(Layout.uniform.#starts)
      ? Layout.uniform
      : new Layout(starts, createHash('sha256').update(text).digest('hex').slice(0, 10));
  }

  /** The layout as a member publishes it: `uniform`, or every bucket's start in 16 hex digits. */
  encode(): string {
    return this === Layout.uniform ? 'uniform' : encode(this.#starts);
  }

  /** The bucket `namespace` hashes into. */
  bucketOf(namespace: string): number {
    let bucket = this.#buckets.get(namespace);
    if (bucket === undefined) this.#buckets.set(namespace, bucket = this.#bucketOfHash(fnv1a64(namespace)));
    return bucket;
  }

  /** How many of `namespaces` the fullest bucket holds. */
  fullest(namespaces: Iterable<string>): number {
    const counts = new Map<number, number>();
    for (const namespace of new Set(namespaces)) {
      const bucket = this.#bucketOfHash(fnv1a64(namespace));
      counts.set(bucket, (counts.get(bucket) ?? 0) + 1);
    }
    return Math.max(0, ...counts.values());
  }

  /** The shardSelector of `buckets` over `field` (e.g. object.metadata.namespace); undefined for none. */
  selectorOf(field: string, buckets: ReadonlySet<number>): string | undefined {
    const ranges = rangesOf(buckets);
    if (ranges.length === 0) return undefined;
    return ranges.map(([start, end]) => `shardRange(${field}, '${this.#boundary(start)}', '${this.#boundary(end)}')`)
      .join(' || ');
  }

  #bucketOfHash(hash: bigint): number {
    // Buckets begun at or before the hash.
    let low = 0;
    let high = this.#starts.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (this.#starts[middle]! <= hash) low = middle + 1;
      else high = middle;
    }
    return low;
  }

  /** Where `bucket` begins, as the selector writes it: 16 hex digits (17 for the end of the space). */
  #boundary(bucket: number): string {
    const at = bucket === 0 ? 0n : bucket === BUCKETS ? SPACE : this.#starts[bucket - 1]!;
    return `0x${at.toString(16).padStart(16, '0')}`;
  }
}

function encode(starts: readonly bigint[]): string {
  return starts.map((start) => start.toString(16).padStart(16, '0')).join('');
}
