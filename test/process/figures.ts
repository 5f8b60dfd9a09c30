// The figures tests print (and docs/reliability.md quotes): summaries of samples, and where they go.
import { writeFileSync } from 'node:fs';

/** Summary figures of a series of samples. */
export function stats(values: readonly number[]): { min: number; max: number; median: number } {
  const sorted = [...values].sort((a, b) => a - b);
  return { min: sorted[0] ?? NaN, max: sorted.at(-1) ?? NaN, median: sorted[Math.floor(sorted.length / 2)] ?? NaN };
}

/** Prints a figure both as a test diagnostic and to a shared file, so the documented figures can be collected. */
export function figure(t: { diagnostic(message: string): void }, text: string): void {
  t.diagnostic(text);
  const file = process.env['FAULTS_FIGURES'];
  if (file) writeFileSync(file, `${text}\n`, { flag: 'a' });
}
