// chart/README.md, generated from the chart itself, as helm-docs does: every value from
// values.yaml with its description (the `# --` comment above it, continued by the comment lines
// that follow), its type and allowed values from values.schema.json, and its default; the
// sections are values.yaml's banners; the header comes from Chart.yaml and the examples' first
// comments. A value without a `# --` comment of its own or of an enclosing value is an error:
// every value is documented.
//
//   npm run chartdocs                    writes chart/README.md
//   npm run chartdocs -- --check         exits 1 when chart/README.md is not what it would write (CI)
//   npm run chartdocs -- --chart DIR     another copy of the chart (scripts/release.sh's, whose image is set)
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { load } from 'js-yaml';

const root = fileURLToPath(new URL('..', import.meta.url));

interface Section {
  readonly title: string;
  readonly text: string;
  readonly rows: Row[];
}

interface Row {
  readonly path: readonly string[];
  readonly description: string;
}

/** The `# --` descriptions of values.yaml by key path, in the sections its banners make. */
export function describedValues(text: string): Section[] {
  const sections: Section[] = [{ title: '', text: '', rows: [] }];
  const stack: { indent: number; key: string }[] = [];
  let pending: string[] | undefined;
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (/^# -{20,}$/.test(line)) {
      // A banner: `# ---`, a title line, text lines, `# ---`.
      const body: string[] = [];
      while (++i < lines.length && !/^# -{20,}$/.test(lines[i]!)) body.push(lines[i]!.replace(/^# ?/, ''));
      sections.push({ title: body[0] ?? '', text: body.slice(1).join(' '), rows: [] });
      pending = undefined;
      continue;
    }
    const start = /^\s*# -- (.*)$/.exec(line);
    if (start) {
      pending = [start[1]!];
      continue;
    }
    const comment = /^\s*#(?: (.*))?$/.exec(line);
    if (comment) {
      pending?.push(comment[1] ?? '');
      continue;
    }
    const key = /^(\s*)([A-Za-z0-9_]+):/.exec(line);
    if (!key) {
      pending = undefined;
      continue;
    }
    const indent = key[1]!.length;
    while (stack.length > 0 && stack.at(-1)!.indent >= indent) stack.pop();
    stack.push({ indent, key: key[2]! });
    if (pending) {
      sections.at(-1)!.rows.push({ path: stack.map((s) => s.key), description: pending.join(' ').trim() });
    }
    pending = undefined;
  }
  return sections.filter((s) => s.rows.length > 0);
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Schema = { [key: string]: Json };

/** The schema of the value at `path`, following properties and local $refs; undefined if it says nothing. */
function schemaAt(schema: Schema, path: readonly string[]): Schema | undefined {
  const deref = (node: Schema): Schema => {
    const ref = node['$ref'];
    if (typeof ref !== 'string') return node;
    const target = ref.replace(/^#\//, '').split('/').reduce<Json | undefined>(
      (at, part) => (at && typeof at === 'object' && !Array.isArray(at) ? at[part] : undefined),
      schema,
    );
    return { ...(target as Schema), ...Object.fromEntries(Object.entries(node).filter(([k]) => k !== '$ref')) };
  };
  let node: Schema | undefined = deref(schema);
  for (const key of path) {
    const properties = node?.['properties'] as Record<string, Schema> | undefined;
    const next: Schema | undefined = properties?.[key];
    node = next === undefined ? undefined : deref(next);
  }
  return node;
}

/** The type column: the schema's type, its allowed values and bounds. */
function typeOf(schema: Schema | undefined, value: unknown): string {
  const type = schema?.['type'];
  const types = Array.isArray(type)
    ? type.join(' or ')
    : typeof type === 'string'
    ? type
    : value === null
    ? 'null'
    : Array.isArray(value)
    ? 'array'
    : typeof value;
  const notes: string[] = [];
  const choices = schema?.['enum'];
  if (Array.isArray(choices)) notes.push(`one of ${choices.map((c) => `\`${String(c)}\``).join(', ')}`);
  if (typeof schema?.['minimum'] === 'number') notes.push(`≥ ${schema['minimum']}`);
  if (typeof schema?.['maximum'] === 'number') notes.push(`≤ ${schema['maximum']}`);
  return notes.length > 0 ? `${types}, ${notes.join(', ')}` : types;
}

/** Text for a table cell: pipes escaped, and angle brackets outside code spans (`<key>` is no HTML tag). */
const cell = (text: string): string =>
  text.replaceAll('|', '\\|').replaceAll('\n', ' ').split('`').map((part, i) =>
    i % 2 === 0 ? part.replaceAll('<', '&lt;').replaceAll('>', '&gt;') : part
  ).join('`');

function valueAt(values: unknown, path: readonly string[]): unknown {
  return path.reduce<unknown>((at, key) => (at as Record<string, unknown> | undefined)?.[key], values);
}

/** Paths of every value that is not a non-empty map: what must be described, by itself or a parent. */
function leaves(value: unknown, path: readonly string[] = []): string[][] {
  if (value !== null && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).length > 0) {
    return Object.entries(value).flatMap(([key, child]) => leaves(child, [...path, key]));
  }
  return [[...path]];
}

/** The README, or the errors that keep it from being written. */
export function chartReadme(chart: string): { readme: string; errors: string[] } {
  const valuesText = readFileSync(join(chart, 'values.yaml'), 'utf8');
  const values = load(valuesText);
  const schema = JSON.parse(readFileSync(join(chart, 'values.schema.json'), 'utf8')) as Schema;
  const meta = load(readFileSync(join(chart, 'Chart.yaml'), 'utf8')) as Record<string, string>;
  const sections = describedValues(valuesText);
  const described = sections.flatMap((s) => s.rows.map((r) => r.path.join('.')));
  const errors = leaves(values)
    .filter((path) => !path.some((_, i) => described.includes(path.slice(0, i + 1).join('.'))))
    .map((path) => `values.yaml: ${path.join('.')} has no \`# --\` description (nor has any value that holds it)`);

  const examples = readdirSync(join(chart, 'examples')).filter((f) => f.endsWith('.yaml')).sort().map((file) => {
    const text = readFileSync(join(chart, 'examples', file), 'utf8');
    const first = /^# (.*?)(?:[.:](?: |$)|$)/m.exec(text)?.[1] ?? '';
    return `| [\`examples/${file}\`](examples/${file}) | ${cell(first)} |`;
  });
  const out = [
    `# ${meta['name']} Helm chart`,
    '',
    '<!-- Generated by scripts/chartdocs.ts from Chart.yaml, values.yaml and values.schema.json: edit those, then `npm run chartdocs`. -->',
    '',
    meta['description'] ?? '',
    '',
    `Chart ${meta['version']}, labeller ${meta['appVersion']}, Kubernetes ${meta['kubeVersion']}.`,
    '',
    '## Install',
    '',
    '```sh',
    `helm install labeller oci://REGISTRY/charts/labeller --version ${meta['version']} \\`,
    '  -n labeller --create-namespace -f my-values.yaml',
    '```',
    '',
    'From a clone of the sources: `helm install labeller ./chart -n labeller --create-namespace -f my-values.yaml`.',
    '`kinds` is required: an install without it fails and says what to set. `helm template` shows the',
    'RBAC derived from the kinds before anything is installed.',
    '',
    '| example | |',
    '|---|---|',
    ...examples,
    '',
    '## Values',
  ];
  for (const section of sections) {
    out.push('');
    if (section.title) out.push(`### ${section.title}`, '');
    if (section.text) out.push(section.text, '');
    out.push('| value | type | default | description |', '|---|---|---|---|');
    for (const row of section.rows) {
      const value = valueAt(values, row.path);
      out.push(
        `| \`${row.path.join('.')}\` | ${cell(typeOf(schemaAt(schema, row.path), value))} | \`${
          cell(JSON.stringify(value))
        }\` | ${cell(row.description)} |`,
      );
    }
  }
  return { readme: `${out.join('\n')}\n`, errors };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  let values: { check: boolean; chart: string };
  try {
    ({ values } = parseArgs({
      options: { check: { type: 'boolean', default: false }, chart: { type: 'string', default: join(root, 'chart') } },
      strict: true,
    }));
  } catch (error) {
    console.error(`chartdocs: ${(error as Error).message}; the options are --check and --chart DIR`);
    process.exit(2);
  }
  const { readme, errors } = chartReadme(values.chart);
  if (errors.length > 0) {
    console.error(errors.map((e) => `chartdocs: ${e}`).join('\n'));
    process.exit(1);
  }
  const file = join(values.chart, 'README.md');
  const shown = relative(process.cwd(), file) || file;
  if (values.check) {
    let current = '';
    try {
      current = readFileSync(file, 'utf8');
    } catch {
      // No README yet: stale.
    }
    if (current !== readme) {
      console.error(`chartdocs: ${shown} is stale: run \`npm run chartdocs\` and commit it`);
      process.exit(1);
    }
  } else {
    writeFileSync(file, readme);
    console.error(`chartdocs: wrote ${shown}`);
  }
}
