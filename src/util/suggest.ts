/**
 * "Did you mean" for misspelt names in the config: the closest candidate by
 * case-insensitive edit distance, if it is close enough to be a likely typo.
 */
export function suggest(word: string, candidates: Iterable<string>): string | undefined {
  // One edit per three characters (at least one): enough for a typo or two,
  // too few for short words to match unrelated ones.
  const limit = Math.max(1, Math.floor(word.length / 3));
  const target = word.toLowerCase();
  let best: string | undefined;
  let bestDistance = limit + 1;
  for (const candidate of candidates) {
    const distance = editDistance(target, candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

/**
 * Edit distance counting insertions, deletions, substitutions and swaps of
 * adjacent letters (optimal string alignment): "nmae" is one edit from "name".
 */
function editDistance(a: string, b: string): number {
  const rows = Array.from(
    { length: a.length + 1 },
    (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  const at = (i: number, j: number): number => rows[i]?.[j] ?? 0;
  for (let i = 1; i <= a.length; i++) {
    const row = rows[i] ?? [];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let distance = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        distance = Math.min(distance, at(i - 2, j - 2) + 1);
      }
      row[j] = distance;
    }
  }
  return at(a.length, b.length);
}
