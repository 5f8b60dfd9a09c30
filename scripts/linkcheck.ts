// `npm run linkcheck` (part of `npm run lint`): every relative link of the project's Markdown
// (README.md, CHANGELOG.md, docs/, bench/README.md, chart/README.md) points at a file that exists,
// and every `#anchor` at a heading of its target, as GitHub renders them. External links are
// not fetched: CI must not depend on other sites being up.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The Markdown files checked, relative to the repository. */
export function documents(): string[] {
  const docs = readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`);
  return ['README.md', 'CHANGELOG.md', 'bench/README.md', 'chart/README.md', ...docs].filter((f) =>
    existsSync(join(root, f))
  );
}

/** GitHub's anchor of a heading: lowercased, punctuation dropped, spaces to hyphens; repeats get -1, -2… */
export function anchors(markdown: string): Set<string> {
  const found = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^(```|~~~)/.test(line)) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const slug = heading[1]!
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    found.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return found;
}

/** The broken links of one document, as `file:line: problem`. */
export function brokenLinks(file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8');
  const problems: string[] = [];
  let fenced = false;
  for (const [index, line] of text.split('\n').entries()) {
    if (/^(```|~~~)/.test(line)) fenced = !fenced;
    if (fenced) continue;
    // Inline code holds examples, not links.
    const prose = line.replace(/`[^`]*`/g, '');
    for (const [, target] of prose.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target!)) continue;
      const problem = check(file, target!);
      if (problem) problems.push(`${file}:${index + 1}: ${problem}`);
    }
  }
  return problems;
}

function check(from: string, target: string): string | undefined {
  const hash = target.indexOf('#');
  const path = hash === -1 ? target : target.slice(0, hash);
  const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
  const file = path === '' ? join(root, from) : resolve(dirname(join(root, from)), path);
  if (!existsSync(file)) return `${target}: no such file ${relative(root, file)}`;
  if (anchor === undefined) return undefined;
  if (statSync(file).isDirectory() || !file.endsWith('.md')) {
    return `${target}: an anchor into a file that is not Markdown`;
  }
  if (!anchors(readFileSync(file, 'utf8')).has(anchor)) {
    return `${target}: no heading "#${anchor}" in ${relative(root, file)}`;
  }
  return undefined;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const problems = documents().flatMap(brokenLinks);
  for (const problem of problems) console.error(problem);
  if (problems.length > 0) {
    console.error(
      `linkcheck: ${problems.length} broken link${problems.length === 1 ? '' : 's'}: fix the target or the text`,
    );
    process.exit(1);
  }
  console.log(`linkcheck: ${documents().length} documents, every relative link resolves`);
}
