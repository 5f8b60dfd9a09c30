// The bench's output: a markdown table (each figure next to its target, pass or miss), the JSON
// record, and bench/RESULTS.md, which keeps the latest table per object count and runtime.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';

export type Verdict = 'pass' | 'miss' | 'incomplete' | '';

export interface Row {
  readonly id: string;
  readonly measurement: string;
  readonly result: string;
  readonly target: string;
  readonly verdict: Verdict;
  /** Extra words after the verdict, e.g. the N the target is defined at. */
  readonly verdictNote?: string;
  /** 1-minute load average when the measurement ended. */
  readonly load: number | undefined;
}

/** The 1-minute load average now, for a row's load column. */
export const load1 = (): number => loadavg()[0] ?? 0;

/** `pass` when `ok`, else `miss`. */
export const verdict = (ok: boolean): Verdict => (ok ? 'pass' : 'miss');

export function bytes(n: number): string {
  const sign = n < 0 ? '−' : '';
  const abs = Math.abs(n);
  return abs < 1024 ? `${sign}${Math.round(abs)} B` : `${sign}${(abs / 1024).toFixed(2)} KiB`;
}

export function mib(n: number): string {
  return `${(n / 2 ** 20).toFixed(1)} MiB`;
}

export function seconds(s: number): string {
  return s < 10 ? `${s.toFixed(2)} s` : `${s.toFixed(1)} s`;
}

export function ms(value: number | undefined): string {
  if (value === undefined) return 'n/a';
  if (!Number.isFinite(value)) return '> 10 s (timed out)';
  return value < 10 ? `${value.toFixed(1)} ms` : `${Math.round(value)} ms`;
}

/** A markdown table of `rows` under `header`; `|` in a cell is escaped. */
export function markdownTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const line = (cells: readonly string[]): string => `| ${cells.map((c) => c.replaceAll('|', '\\|')).join(' | ')} |`;
  return [line(header), `|${header.map(() => '---|').join('')}`, ...rows.map(line)].join('\n');
}

export function table(rows: readonly Row[]): string {
  return markdownTable(
    ['#', 'measurement', 'result', 'target', 'verdict', 'load (1 min)'],
    rows.map((r) => [
      r.id,
      r.measurement,
      r.result,
      r.target,
      r.verdict === '' ? '' : `**${r.verdict}**${r.verdictNote ? ` ${r.verdictNote}` : ''}`,
      r.load === undefined ? '' : r.load.toFixed(2),
    ]),
  );
}

const HEADER = `# labeller benchmark results

The latest run of \`bench/run.ts\` per object count and runtime (\`npm run bench -- --n 10k\`,
\`deno run -A bench/run.ts --quick\`, …), each a section replaced by the next run with the same
N and runtime. Raw numbers of every run are in \`bench/results/*.json\` (not committed). Targets are
those of issues 5 and 9 and are never loosened; a miss is reported, not hidden.
`;

/** Replaces (or adds) the section `key` of bench/RESULTS.md; sections are kept sorted by key. */
export function updateResultsFile(path: string, key: string, section: string): void {
  const existing = existsSync(path) ? readFileSync(path, 'utf8') : HEADER;
  const marker = /<!-- bench (.+?) -->\n([\s\S]*?)<!-- \/bench \1 -->\n?/g;
  const sections = new Map<string, string>();
  for (const [, k, body] of existing.matchAll(marker)) sections.set(k!, body!);
  sections.set(key, `${section.trim()}\n`);
  const order = (k: string): number => Number(/n=(\d+)/.exec(k)?.[1] ?? 0);
  const keys = [...sections.keys()].sort((a, b) => order(a) - order(b) || a.localeCompare(b));
  const head = existing.split('<!-- bench ')[0]!.trimEnd();
  writeFileSync(
    path,
    `${head}\n\n${keys.map((k) => `<!-- bench ${k} -->\n${sections.get(k)}<!-- /bench ${k} -->\n`).join('\n')}`,
  );
}

export function writeJson(dir: string, name: string, data: unknown): string {
  mkdirSync(dir, { recursive: true });
  const path = `${dir}/${name}.json`;
  writeFileSync(path, `${JSON.stringify(data, null, 2)}\n`);
  return path;
}
