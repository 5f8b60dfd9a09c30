// Where a labeller process spent its CPU: reads a V8 CPU profile (`--cpu-prof`) and prints the
// busy samples by where their code comes from, mapping the bundle's frames back to the sources
// through the build's source maps (`npm run build -- --sourcemap`). Idle samples are left out, so
// the shares are of the time the main thread was busy; time blocked in a write (a pipe whose reader
// lags) counts as busy, as V8 cannot tell it from work.
//
//   npm run build -- --sourcemap
//   npm run bench -- --n 10k --build dist --cold-only --no-memory --kinds configmaps \
//     --v8-flags=--cpu-prof,--cpu-prof-dir=/tmp/prof
//   node --import tsx bench/profile.ts /tmp/prof/*.cpuprofile [--top 30]
//
// Exit status: 0 when printed, 2 for bad options or an unreadable profile.
import { existsSync, readFileSync } from 'node:fs';
import { SourceMap, type SourceMapPayload } from 'node:module';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const USAGE = 'usage: bench/profile.ts PROFILE.cpuprofile [--top N]';

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  /** 0-based, as in the bundle. */
  readonly lineNumber: number;
  readonly columnNumber: number;
}

interface Profile {
  readonly nodes: readonly {
    readonly id: number;
    readonly callFrame: CallFrame;
    readonly children?: readonly number[];
  }[];
  readonly samples: readonly number[];
}

/** Where a frame's code comes from, and the function as a reader finds it. */
interface Origin {
  readonly group: string;
  readonly layer: 'labeller' | 'packages' | "Node's JavaScript" | 'V8 and native';
  readonly where: string;
}

const maps = new Map<string, SourceMap | undefined>();

function sourceMapOf(url: string): SourceMap | undefined {
  if (!maps.has(url)) {
    const file = `${fileURLToPath(url)}.map`;
    maps.set(
      url,
      existsSync(file) ? new SourceMap(JSON.parse(readFileSync(file, 'utf8')) as SourceMapPayload) : undefined,
    );
  }
  return maps.get(url);
}

function origin(frame: CallFrame): Origin {
  const name = frame.functionName || '(anonymous)';
  if (frame.url.startsWith('node:')) {
    // node:internal/streams/readable → node:streams; node:_http_client stays itself.
    const module = frame.url.slice('node:'.length).replace(/^internal\//, '').split('/')[0] ?? '';
    return { group: `node:${module}`, layer: "Node's JavaScript", where: `${frame.url} ${name}` };
  }
  if (frame.url.startsWith('file:')) {
    const entry = sourceMapOf(frame.url)?.findEntry(frame.lineNumber, frame.columnNumber);
    if (!entry || !('originalSource' in entry)) {
      return { group: `${frame.url.split('/').pop()} (no source map)`, layer: 'labeller', where: name };
    }
    const source = entry.originalSource;
    const line = entry.originalLine + 1;
    const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)\/(.*)$/.exec(source);
    if (pkg) return { group: pkg[1]!, layer: 'packages', where: `${pkg[1]}/${pkg[2]}:${line} ${name}` };
    const file = source.replace(/^.*?\/(src|scripts)\//, '$1/');
    return { group: file, layer: 'labeller', where: `${file}:${line} ${name}` };
  }
  // Builtins and the VM: (garbage collector), (program), writeUtf8String (socket and pipe
  // writes, TLS included), parse (JSON.parse where V8 shows it apart from its caller).
  return { group: name, layer: 'V8 and native', where: name };
}

/**
 * A native frame named with the nearest caller in the bundle: writeUtf8String under src/util/log.ts
 * is the log line's pipe write, under src/kube/client.ts a request's socket write.
 */
function nativeCaller(id: number, frames: Map<number, CallFrame>, parents: Map<number, number>): string | undefined {
  for (let at = parents.get(id); at !== undefined; at = parents.get(at)) {
    const frame = frames.get(at);
    if (frame?.url.startsWith('file:')) return origin(frame).group;
  }
  return undefined;
}

function table(title: string, counts: Map<string, number>, busy: number, top: number): string {
  const rows = [...counts].sort((a, b) => b[1] - a[1]).slice(0, top);
  const lines = rows.map(([key, n]) => `| ${(100 * n / busy).toFixed(1)} % | ${key.replaceAll('|', '\\|')} |`);
  return [`| share | ${title} |`, '|---|---|', ...lines].join('\n');
}

function main(argv: string[]): void {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { top: { type: 'string', default: '30' }, help: { type: 'boolean', default: false } },
    });
  } catch (error) {
    throw new UsageError(`${error instanceof Error ? error.message : String(error)}\n${USAGE}`);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  const top = Number(values.top);
  if (positionals.length !== 1 || !Number.isInteger(top) || top < 1) throw new UsageError(USAGE);
  const file = positionals[0]!;
  let profile: Profile;
  try {
    profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
  } catch (error) {
    throw new UsageError(`${file}: not a readable CPU profile (${error instanceof Error ? error.message : error})`);
  }

  const frames = new Map(profile.nodes.map((node) => [node.id, node.callFrame]));
  const parents = new Map(profile.nodes.flatMap((node) => (node.children ?? []).map((child) => [child, node.id])));
  const perNode = new Map<number, number>();
  for (const id of profile.samples) perNode.set(id, (perNode.get(id) ?? 0) + 1);
  const layers = new Map<string, number>();
  const groups = new Map<string, number>();
  const functions = new Map<string, number>();
  let busy = 0;
  let idle = 0;
  for (const [id, n] of perNode) {
    const frame = frames.get(id);
    if (!frame) continue;
    if (frame.functionName === '(idle)') {
      idle += n;
      continue;
    }
    busy += n;
    let o = origin(frame);
    const caller = o.layer === 'V8 and native' && !frame.functionName.startsWith('(')
      ? nativeCaller(id, frames, parents)
      : undefined;
    if (caller) o = { ...o, group: `${o.group} ← ${caller}`, where: `${o.where} ← ${caller}` };
    layers.set(o.layer, (layers.get(o.layer) ?? 0) + n);
    groups.set(o.group, (groups.get(o.group) ?? 0) + n);
    functions.set(o.where, (functions.get(o.where) ?? 0) + n);
  }
  if (busy === 0) throw new UsageError(`${file}: no busy samples`);
  if (![...maps.values()].some(Boolean)) {
    process.stderr.write('no source maps next to the bundle: `npm run build -- --sourcemap` before profiling\n');
  }
  process.stdout.write(
    [
      `${busy} busy samples (${(100 * busy / (busy + idle)).toFixed(0)} % of ${busy + idle})`,
      '',
      table('layer', layers, busy, top),
      '',
      table('code', groups, busy, top),
      '',
      table('function (self)', functions, busy, top),
      '',
    ].join('\n'),
  );
}

class UsageError extends Error {}

try {
  main(process.argv.slice(2));
} catch (error) {
  if (!(error instanceof UsageError)) throw error;
  process.stderr.write(`profile: ${error.message}\n`);
  process.exitCode = 2;
}
