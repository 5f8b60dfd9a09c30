/** A Kubernetes MicroTime (Leases, Events): RFC 3339 with microseconds. */
export function microTime(epochMs: number = Date.now()): string {
  return new Date(epochMs).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}
