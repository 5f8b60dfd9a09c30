// The namespace hash space and how it is split. The API server's shard selector (KEP-5866) hashes
// a field with 64-bit FNV-1a and keeps `start <= hash < end`; the space is cut into BUCKETS
// buckets (where, layout.ts says), and each bucket goes to one member by rendezvous hashing (the
// member with the highest hash of itself and the bucket). A member that joins takes only the
// buckets it now wins, about 1/n of them; one that leaves gives only its own; nobody else's move.
// A member's buckets, merged where they are adjacent, are its ranges on the wire.

/** Buckets of the hash space: enough to split it evenly over tens of members, few enough to keep a selector short. */
export const BUCKETS = 256;
const MASK64 = (1n << 64n) - 1n;
const FNV_OFFSET = 0xcbf29ce484222325n;
const FNV_PRIME = 0x100000001b3n;
const encoder = new TextEncoder();

/** 64-bit FNV-1a of the UTF-8 bytes of `value`, as the API server's shardRange() hashes a field. */
export function fnv1a64(value: string): bigint {
  let hash = FNV_OFFSET;
  for (const byte of encoder.encode(value)) hash = ((hash ^ BigInt(byte)) * FNV_PRIME) & MASK64;
  return hash;
}

/**
 * A member's score for a bucket: FNV-1a mixes its last bytes into the high bits weakly, so
 * neighbouring buckets would score alike (and go to one member in long runs); splitmix64's
 * finalizer spreads every input bit over the result.
 */
function scoreOf(member: string, bucket: number): bigint {
  let z = fnv1a64(`${member}\n${bucket}`);
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK64;
  return z ^ (z >> 31n);
}

/** The member that wins `bucket` among `members` (rendezvous hashing); undefined when there are none. */
export function winner(members: Iterable<string>, bucket: number): string | undefined {
  let best: string | undefined;
  let bestScore = -1n;
  for (const member of members) {
    const score = scoreOf(member, bucket);
    if (score > bestScore || (score === bestScore && best !== undefined && member < best)) {
      best = member;
      bestScore = score;
    }
  }
  return best;
}

/** The buckets `member` wins among `members` (which it need not be in: then none). */
export function bucketsOf(member: string, members: Iterable<string>): Set<number> {
  const all = [...new Set(members)];
  const won = new Set<number>();
  for (let bucket = 0; bucket < BUCKETS; bucket++) if (winner(all, bucket) === member) won.add(bucket);
  return won;
}

/** `[start, end)` over the hash space, as numbers of buckets. */
export type BucketRange = readonly [start: number, end: number];

/** Adjacent buckets merged into ranges, in order. */
export function rangesOf(buckets: ReadonlySet<number>): BucketRange[] {
  const ranges: [number, number][] = [];
  for (const bucket of [...buckets].sort((a, b) => a - b)) {
    const last = ranges.at(-1);
    if (last && last[1] === bucket) last[1] = bucket + 1;
    else ranges.push([bucket, bucket + 1]);
  }
  return ranges;
}

/** Ranges for people: `0-63,128-191` (bucket numbers, both ends included). */
export function describeRanges(buckets: ReadonlySet<number>): string {
  return rangesOf(buckets).map(([start, end]) => end - start === 1 ? `${start}` : `${start}-${end - 1}`).join(',');
}

/** Buckets as a compact string (a bitmap in hex), as a member publishes them on its Lease. */
export function encodeBuckets(buckets: ReadonlySet<number>): string {
  const bytes = new Uint8Array(BUCKETS / 8);
  for (const bucket of buckets) bytes[bucket >> 3]! |= 1 << (bucket & 7);
  return Buffer.from(bytes).toString('hex');
}

/** encodeBuckets read back; anything malformed reads as no buckets. */
export function decodeBuckets(text: string | undefined): Set<number> {
  const buckets = new Set<number>();
  if (!text || !/^[0-9a-f]*$/.test(text) || text.length !== BUCKETS / 4) return buckets;
  const bytes = Buffer.from(text, 'hex');
  for (let bucket = 0; bucket < BUCKETS; bucket++) if (bytes[bucket >> 3]! & (1 << (bucket & 7))) buckets.add(bucket);
  return buckets;
}
