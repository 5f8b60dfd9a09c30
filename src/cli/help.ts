// `labeller --help`: the options in their sections, each with its value's type, default and
// environment variable, then examples. Rendered from flags.ts, so it cannot drift from the parser.
// Not yargs's .help(): src/cli.ts answers --help before yargs loads, in a quarter of the time and
// 16 MiB less than with yargs's help (from dist/: 0.04 s and 47 MiB against 0.16 s and 63 MiB), and
// yargs shows no option's value (<duration>, <host:port>) beside its name.
import { COMMANDS, COMPLETION, envName, EXAMPLES, GROUPS, type Kind, type Spec, SPECS } from './flags.ts';

const PLACEHOLDER: Readonly<Record<Kind, string>> = {
  list: '<list>',
  string: '<string>',
  duration: '<duration>',
  count: '<n>',
  address: '<host:port>',
  port: '<port>',
  boolean: '',
};

function switches(name: string, spec: Spec): string {
  const value = spec.choices ? `<${spec.choices.join('|')}>` : (spec.value ?? PLACEHOLDER[spec.kind]);
  return [spec.short ? `-${spec.short}, ` : '    ', `--${name}`, value ? ` ${value}` : ''].join('');
}

function notes(name: string, spec: Spec): string {
  const parts = [
    ...(spec.default !== undefined ? [`default ${spec.default}`] : []),
    envName(name),
    ...(spec.aliases ?? []).map((alias) => `was --${alias}`),
  ];
  return `(${parts.join('; ')})`;
}

/** Wraps `text` to `width` columns, every line after the first indented by `indent`. */
function wrap(text: string, width: number, indent: number): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && line.length + 1 + word.length > width - indent) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  lines.push(line);
  return lines.join(`\n${' '.repeat(indent)}`);
}

export function formatHelp(width = Math.min(110, process.stdout.columns || 110)): string {
  const entries = Object.entries(SPECS) as [string, Spec][];
  const column = Math.max(...entries.map(([name, spec]) => switches(name, spec).length)) + 4;
  const out = [
    'Usage: labeller [command] [options]',
    '',
    'Keeps labels right on Kubernetes objects, metadata-only, with server-side apply.',
    '',
    'Commands:',
    '  (none)'.padEnd(column) + 'label: keep the labels right until stopped, or converge once with --once',
    ...Object.entries(COMMANDS).map(([name, what]) => `  ${name}`.padEnd(column) + wrap(what, width, column)),
    `  ${COMPLETION.usage}`.padEnd(column) + wrap(COMPLETION.describe, width, column),
    '',
    'Every option can also be set as LABELLER_<OPTION>; flags win over the environment, which wins over --config.',
    'Durations are Go-style (30s, 5m, 1h30m, 500ms); lists are comma-separated or repeated.',
  ];
  for (const group of GROUPS) {
    out.push('', `${group}:`);
    for (const [name, spec] of entries.filter(([, s]) => s.group === group)) {
      const left = `  ${switches(name, spec)}`.padEnd(column);
      out.push(left + wrap(`${spec.describe} ${notes(name, spec)}`, width, column));
    }
  }
  out.push(
    '',
    'Other:',
    '  -h, --help'.padEnd(column) + 'show this help',
    '      --version'.padEnd(column) + 'show the version',
    '',
    'Examples:',
  );
  for (const [command, what] of EXAMPLES) out.push(`  ${command}`, `      ${what}`);
  return `${out.join('\n')}\n`;
}
