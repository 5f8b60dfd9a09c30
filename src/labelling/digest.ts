// What labeller keeps of an annotation it writes: not the value (an annotation may be large, and
// templates do not read it), a digest of it, enough to tell whether it is the value wanted.
import { createHash } from 'node:crypto';

/**
 * 52 bits of the value's SHA-256, as a number (a double holds 53 bits exactly). A keyed or
 * cryptographic hash because whoever may edit the object chooses the value: with a weak one they
 * could pick a value of theirs that labeller takes for its own.
 */
export function digest(value: string): number {
  const bytes = createHash('sha256').update(value).digest();
  return (bytes.readUInt32BE(0) & 0xfffff) * 2 ** 32 + bytes.readUInt32BE(4);
}
