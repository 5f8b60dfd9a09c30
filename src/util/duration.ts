// Durations as Kubernetes components write them: Go-style ("1h30m", "45s", "500ms"), no longer
// than a timer can wait: Node and Deno fire a timer of 2^31 ms or more at once, so a longer
// interval would poll in a hot loop instead of rarely.
const UNITS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Go-style durations ("1h30m", "45s", "500ms"); a bare number is seconds. */
export function parseDuration(text: string): number | undefined {
  const trimmed = text.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Number(trimmed) * 1000;
  if (!/^(\d+(\.\d+)?(ms|s|m|h))+$/.test(trimmed)) return undefined;
  let total = 0;
  for (const [, amount, unit] of trimmed.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)) {
    total += Number(amount) * (UNITS[unit ?? 's'] ?? 0);
  }
  return total;
}

/** The longest duration a timer can wait: 2^31 - 1 ms, about 596 hours (24.8 days). */
export const MAX_DURATION_MS = 2 ** 31 - 1;

/** Why `ms` cannot be waited for by a timer, or undefined. */
export function durationProblem(ms: number): string | undefined {
  return ms > MAX_DURATION_MS
    ? `longer than the ${Math.floor(MAX_DURATION_MS / 3_600_000)}h a timer can wait: use at most ${
      Math.floor(MAX_DURATION_MS / 3_600_000)
    }h`
    : undefined;
}

/** `ms` as a Go-style duration in its largest whole unit ("10m", "90s", "250ms"), for messages. */
export function formatDuration(ms: number): string {
  for (const [unit, size] of [['h', 3_600_000], ['m', 60_000], ['s', 1000]] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
