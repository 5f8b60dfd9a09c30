// Comparing resourceVersions. Long opaque to clients, they are comparable since Kubernetes 1.35
// (KEP-5504, GA): for objects of one resource, a positive decimal integer without leading zeros,
// larger meaning later (client-go's resourceversion.CompareResourceVersion). Every etcd-backed API
// server has served them so before; one that does not gets undefined, and the caller does without.
const INTEGER = /^[1-9][0-9]*$/;

/** -1, 0 or 1 as `a` is older than, the same as or newer than `b`; undefined when either is not comparable. */
export function compareResourceVersions(a: string, b: string): -1 | 0 | 1 | undefined {
  if (!INTEGER.test(a) || !INTEGER.test(b)) return undefined;
  // Longer is larger (no leading zeros); equal lengths compare as text, digit by digit.
  if (a.length !== b.length) return a.length < b.length ? -1 : 1;
  return a === b ? 0 : a < b ? -1 : 1;
}
