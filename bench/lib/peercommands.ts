// The controllers --peers sets side by side, and how each is started: the three labellers of
// bench/peers/ and the Node floor (over HTTP/1.1, and over one HTTP/2 session), built and cached
// by bench/peers/build.sh, labeller's build as the image runs it
// (the V8 flags and environment of image/build.sh), and labeller installed from its npm tarball
// as a user runs it (`npm run package`, then a global install into a temporary prefix, as
// test/e2e/shipped.test.ts does).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { pack } from '../../scripts/pack.ts';
import { describeExit } from '../../test/process/child.ts';
import { executable } from '../../test/process/runtime.ts';
import { startChild } from './children.ts';
import type { Log } from './cli.ts';
import type { ControllerCommand } from './outside.ts';

/** What every controller is told: the namespace, the label, the field manager, the concurrency. */
export interface Assignment {
  readonly namespace: string;
  readonly key: string;
  readonly value: string;
  readonly concurrency: number;
}

/** A controller of the comparison, started for one assignment. */
export interface Contender {
  /** Its short name, as `--without` takes it. */
  readonly id: ContenderId;
  readonly name: string;
  command(assignment: Assignment): ControllerCommand;
}

export const CONTENDERS = [
  'kube-rs',
  'node-floor',
  'node-floor-http2',
  'node-floor-image',
  'controller-runtime',
  'client-node',
  'labeller-image',
  'labeller-installed',
] as const;
export type ContenderId = typeof CONTENDERS[number];

const node = executable('node');
// npm and `#!/usr/bin/env node` find this Node 24 first, whatever the machine's own Node is.
const PATH = `${dirname(node)}${delimiter}${process.env['PATH'] ?? ''}`;

/** Runs `command` to its end; its stderr is passed on (build progress), its stdout answered. */
async function run(command: string, args: readonly string[], env: Record<string, string> = {}): Promise<string> {
  const exit = await startChild(command, args, {
    env: { PATH, npm_config_update_notifier: 'false', ...env },
    onStderr: (chunk) => process.stderr.write(chunk),
  }).exited;
  if (exit.code !== 0) {
    throw new Error(`${command} ${args.join(' ')} exited with ${describeExit(exit)}\n${exit.stderr.slice(-3000)}`);
  }
  return exit.stdout;
}

/** Builds the peers (or finds them cached): each name's command. */
async function buildPeers(): Promise<Map<string, string[]>> {
  const out = await run('bash', ['bench/peers/build.sh']);
  return new Map(
    out.trim().split('\n').map((line) => {
      const [name = '', ...command] = line.split(' ');
      return [name, command];
    }),
  );
}

/**
 * The npm package of this checkout (scripts/pack.ts builds and packs it) installed globally into
 * a temporary prefix: its `labeller`, and its dist/ (the build the image ships, fresh from the
 * sources, never a dist/ left from an earlier build).
 */
async function installLabeller(): Promise<{ bin: string; cli: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'labeller-peers-'));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  const { tarball } = await pack(dir);
  const prefix = join(dir, 'prefix');
  await run('npm', ['install', '--global', '--prefix', prefix, '--no-audit', '--no-fund', tarball]);
  return {
    bin: join(prefix, 'bin', 'labeller'),
    cli: join(prefix, 'lib', 'node_modules', 'labeller', 'dist', 'cli.js'),
  };
}

/** The image's V8 flags and environment, from image/build.sh's `crane mutate` (the Dockerfile says the same). */
export function imageSettings(): { v8Flags: string[]; env: Record<string, string> } {
  const script = readFileSync('image/build.sh', 'utf8');
  const entrypoint = /--entrypoint \/usr\/local\/bin\/node,(\S+),\/app\/dist\/cli\.js/.exec(script);
  const env = [...script.matchAll(/--env (\w+)=(\S+)/g)].map(([, k, v]) => [k!, v!] as const);
  if (!entrypoint || env.length === 0) {
    throw new Error(
      "image/build.sh: no `--entrypoint /usr/local/bin/node,…,/app/dist/cli.js` or `--env` to read the image's settings from",
    );
  }
  return { v8Flags: entrypoint[1]!.split(','), env: Object.fromEntries(env) };
}

const peerArgs = (a: Assignment, fieldManager: string): string[] => [
  '--namespace',
  a.namespace,
  '--label',
  `${a.key}=${a.value}`,
  '--field-manager',
  fieldManager,
  '--concurrency',
  String(a.concurrency),
];

const labellerArgs = (a: Assignment, kubeconfig: string): string[] => [
  '--kubeconfig',
  kubeconfig,
  '--kinds',
  'configmaps',
  '--label',
  `${a.key}=${a.value}`,
  '--namespace',
  a.namespace,
  '--concurrency',
  String(a.concurrency),
  '--field-manager',
  'labeller',
];

/** The peers' lines once their cache is filled; labeller's for its one kind (JSON or text). */
const PEER_SYNCED = /^synced: \d+ objects cached/;
const LABELLER_SYNCED = /initial list complete/;

/** Builds and installs what runs; the contenders in the order of the table. */
export async function contenders(kubeconfig: string, log: Log): Promise<Contender[]> {
  log('building the peers (bench/peers/build.sh, cached outside the repository)');
  const built = await buildPeers();
  log('npm run package (scripts/pack.ts) and a global install of labeller into a temporary prefix');
  const installed = await installLabeller();
  const image = imageSettings();
  /** A peer of bench/peers/ as build.sh prints it; `node main.js` runs on Node 24, the one that runs labeller. */
  /** `node` peers may run with V8 flags and an environment: the floor as labeller's image runs Node. */
  const peer = (
    name: string,
    title: string,
    id = name as ContenderId,
    extra: readonly string[] = [],
    settings: { v8Flags: readonly string[]; env: Record<string, string> } = { v8Flags: [], env: {} },
  ): Contender => {
    const [bin, ...rest] = built.get(name) ?? [];
    if (bin === undefined) throw new Error(`bench/peers/build.sh printed no command for ${name}`);
    const command: [string, ...string[]] = bin === 'node' ? [node, ...settings.v8Flags, ...rest] : [bin, ...rest];
    return {
      id,
      name: title,
      command: (a) => ({
        name: id,
        command,
        args: [...peerArgs(a, `${name}-labeller`), ...extra],
        env: settings.env,
        synced: PEER_SYNCED,
      }),
    };
  };
  const labeller = (
    id: ContenderId,
    name: string,
    title: string,
    command: [string, ...string[]],
    env: Record<string, string>,
  ): Contender => ({
    id,
    name: title,
    command: (a) => ({ name, command, args: labellerArgs(a, kubeconfig), env, synced: LABELLER_SYNCED }),
  });
  const version = (path: string, pattern: RegExp): string => pattern.exec(readFileSync(path, 'utf8'))?.[1] ?? '?';
  const ours = version('package.json', /"version": "([^"]+)"/);
  const kubeRs = version('bench/peers/kube-rs/Cargo.lock', /name = "kube"\nversion = "([^"]+)"/);
  const controllerRuntime = version(
    'bench/peers/controller-runtime/go.mod',
    /sigs\.k8s\.io\/controller-runtime v(\S+)/,
  );
  const clientNode = version(
    'bench/peers/client-node/package-lock.json',
    /"node_modules\/@kubernetes\/client-node": \{\s*"version": "([^"]+)"/,
  );
  const flags = `${image.v8Flags.join(' ')}, ${Object.entries(image.env).map(([k, v]) => `${k}=${v}`).join(' ')}`;
  return [
    peer('kube-rs', `kube-rs ${kubeRs}: metadata watcher, managedFields pruned`),
    peer('node-floor', `the Node floor (Node ${process.versions.node}): HTTP/1.1, one keep-alive agent`),
    peer('node-floor', `the Node floor (Node ${process.versions.node}): one HTTP/2 session`, 'node-floor-http2', [
      '--http2',
    ]),
    peer(
      'node-floor',
      `the Node floor (Node ${process.versions.node}): HTTP/1.1, with the image's flags (${flags})`,
      'node-floor-image',
      [],
      image,
    ),
    peer('controller-runtime', `controller-runtime ${controllerRuntime}: OnlyMetadata`),
    peer('client-node', `@kubernetes/client-node ${clientNode}: informer + server-side apply`),
    labeller(
      'labeller-image',
      'labeller (image flags)',
      `labeller ${ours}: dist/ with the image's flags (${flags})`,
      [node, ...image.v8Flags, installed.cli],
      image.env,
    ),
    labeller(
      'labeller-installed',
      'labeller (installed)',
      `labeller ${ours}: installed from the tarball, run as \`labeller\``,
      [
        installed.bin,
      ],
      {
        PATH,
      },
    ),
  ];
}
