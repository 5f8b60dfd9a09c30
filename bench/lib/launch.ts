// How the benches start labeller: the runtime, the sources or a build, V8 flags (their shared
// command-line options), the runner settings a long run over many objects needs, the main
// bench's labels and command line, and credentials as a pod has them.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inClusterWrapper } from '../../test/cluster/incluster.ts';
import type { ControlPlane } from '../../test/controlplane/controlplane.ts';
import { describeExit } from '../../test/process/child.ts';
import { Labeller, type LabellerOptions, sourceEntry } from '../../test/process/labeller.ts';
import { host, type Runtime } from '../../test/process/runtime.ts';
import type { KindSpec } from './objects.ts';

/** How labeller is started, shared by the benches: the runtime, the sources or a build, V8 flags. */
export interface Launch {
  readonly runtime: Runtime;
  /** What runs: the sources, or a build folder's cli.js. */
  readonly entry: string;
  readonly build: string | undefined;
  readonly v8Flags: readonly string[];
  /** Added to labeller's environment, e.g. the image's MALLOC_ARENA_MAX=1. */
  readonly env: Readonly<Record<string, string>>;
}

/** The parseArgs options behind Launch. */
export const LAUNCH_OPTIONS = {
  'labeller-runtime': { type: 'string', default: host },
  build: { type: 'string' },
  'v8-flags': { type: 'string' },
  env: { type: 'string' },
} as const;

export const LAUNCH_USAGE = `  --labeller-runtime R    node or deno: what runs labeller (default: this runtime)
  --build DIR             run the shipped build (DIR/cli.js, e.g. --build dist after \`npm run build\`)
                          instead of the sources (bin/labeller.js, or src/cli.ts on Deno)
  --v8-flags F            comma-separated V8 flags for labeller, e.g. --max-semi-space-size=1
  --env K=V,…             comma-separated environment for labeller, e.g. MALLOC_ARENA_MAX=1 (the image's)`;

export function launch(
  values: {
    readonly 'labeller-runtime'?: string | undefined;
    readonly build?: string | undefined;
    readonly 'v8-flags'?: string | undefined;
    readonly env?: string | undefined;
  },
): Launch {
  const runtime = values['labeller-runtime'] ?? host;
  if (runtime !== 'node' && runtime !== 'deno') throw new Error(`--labeller-runtime ${runtime}: expected node or deno`);
  const build = values.build?.replace(/\/+$/, '');
  return {
    runtime,
    entry: build === undefined ? sourceEntry(runtime) : builtEntry(build),
    build,
    v8Flags: values['v8-flags'] ? values['v8-flags'].split(',').filter(Boolean) : [],
    env: parseEnv(values.env),
  };
}

/** `--env NAME=VALUE,…` as a record. */
export function parseEnv(list: string | undefined): Record<string, string> {
  return Object.fromEntries(
    (list ?? '').split(',').filter(Boolean).map((pair) => {
      const at = pair.indexOf('=');
      if (at < 1) throw new Error(`--env ${pair}: expected NAME=VALUE`);
      return [pair.slice(0, at), pair.slice(at + 1)];
    }),
  );
}

/** The shipped build's entry point in `dir` (`npm run build` writes dist/cli.js); throws if it is not built. */
function builtEntry(dir: string): string {
  const entry = `${dir}/cli.js`;
  if (!existsSync(entry)) {
    throw new Error(
      `--build ${dir}: ${entry} does not exist; run \`npm run build\` first, or leave --build out to measure the sources`,
    );
  }
  const newer = newestUnder('src');
  if (newer !== undefined && newer.mtimeMs > statSync(entry).mtimeMs) {
    throw new Error(
      `--build ${dir}: ${entry} is older than ${newer.path}, so it would measure an earlier build; run \`npm run build\` first`,
    );
  }
  return entry;
}

/** The most recently modified file under `dir`. */
function newestUnder(dir: string): { path: string; mtimeMs: number } | undefined {
  let newest: { path: string; mtimeMs: number } | undefined;
  for (const name of readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
    const path = join(dir, name);
    const { mtimeMs } = statSync(path);
    if (newest === undefined || mtimeMs > newest.mtimeMs) newest = { path, mtimeMs };
  }
  return newest;
}

/** How labeller runs as in a pod (bench/run.ts --credentials in-cluster): no kubeconfig, a wrapper, its environment. */
export type PodLaunch = Required<Pick<LabellerOptions, 'kubeconfig' | 'wrapper' | 'env'>>;

/**
 * What labeller sees in a pod: the control plane's token and CA as a service-account folder at
 * the kubelet's mount point (for labeller's process only) and KUBERNETES_SERVICE_*, no kubeconfig.
 */
export function podCredentials(kubeconfig: string, namespace: string): PodLaunch {
  const config = JSON.parse(readFileSync(kubeconfig, 'utf8')) as {
    clusters: { cluster: { server: string; 'certificate-authority-data': string } }[];
    users: { user: { token: string } }[];
  };
  const cluster = config.clusters[0]!.cluster;
  const dir = mkdtempSync(join(tmpdir(), 'labeller-bench-serviceaccount-'));
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'token'), config.users[0]!.user.token);
  writeFileSync(join(dir, 'ca.crt'), Buffer.from(cluster['certificate-authority-data'], 'base64'));
  writeFileSync(join(dir, 'namespace'), namespace);
  const server = new URL(cluster.server);
  return {
    kubeconfig: '',
    wrapper: inClusterWrapper(dir),
    env: { KUBERNETES_SERVICE_HOST: server.hostname, KUBERNETES_SERVICE_PORT: server.port, KUBECONFIG: '', HOME: dir },
  };
}

/** The labels the main bench has labeller apply; TEAM's value is what convergence and latency watch for. */
export const LABELS = { 'bench.example.com/team': 'platform', 'bench.example.com/tier': 'gold' } as const;
export const TEAM = 'bench.example.com/team';
export const FIELD_MANAGER = 'labeller';

/** labeller's command line in the main bench: `kinds` of `namespace`, LABELS, `concurrency` per kind. */
export function labellerArgs(
  kubeconfig: string | undefined,
  namespace: string,
  kinds: readonly KindSpec[],
  concurrency: number,
): string[] {
  return [
    ...(kubeconfig === undefined ? [] : ['--kubeconfig', kubeconfig]),
    '--kinds',
    kinds.map((k) => k.resource).join(','),
    ...Object.entries(LABELS).flatMap(([k, v]) => ['--label', `${k}=${v}`]),
    '--namespace',
    namespace,
    '--concurrency',
    String(concurrency),
    '--field-manager',
    FIELD_MANAGER,
    '--grace-period',
    '10s',
  ];
}

/**
 * Starts labeller as `launch` says. Only the log lines the bench reads are kept (a "labels applied"
 * line per object at debug is not), and the last 4000 characters of its output, so a 50k-object
 * run holds neither.
 */
export function startLabeller(
  launch: Pick<Launch, 'runtime' | 'entry' | 'v8Flags' | 'env'>,
  args: readonly string[],
  pod?: PodLaunch,
): Labeller {
  return new Labeller(args, {
    ...pod,
    env: { ...pod?.env, ...launch.env },
    runtime: launch.runtime,
    entry: launch.entry,
    v8Flags: launch.v8Flags,
    keep: (line) => line.msg !== 'labels applied',
    outputLimit: 4000,
  });
}

/**
 * Starts labeller as `launch` says with `config` (kinds.yaml), written as `name` in the control
 * plane's folder, over `namespaces`, `concurrency` per kind.
 */
export function startWithConfig(
  launch: Pick<Launch, 'runtime' | 'entry' | 'v8Flags' | 'env'>,
  controlPlane: Pick<ControlPlane, 'kubeconfig' | 'dir'>,
  name: string,
  config: string,
  namespaces: readonly string[],
  concurrency: number,
): Labeller {
  const path = join(controlPlane.dir, name);
  writeFileSync(path, config);
  return startLabeller(launch, [
    '--kubeconfig',
    controlPlane.kubeconfig,
    '--config',
    path,
    '--namespace',
    namespaces.join(','),
    '--concurrency',
    String(concurrency),
    '--grace-period',
    '10s',
  ]);
}

/** Stops labeller with SIGTERM (SIGKILL after 15 s); an exit other than 0 throws, with its output. */
export async function stopLabeller(labeller: Labeller): Promise<void> {
  const exit = await labeller.stop('SIGTERM', 15_000);
  if (exit.code !== 0) throw new Error(`labeller exited with ${describeExit(exit)} on SIGTERM\n${labeller.stderr}`);
}
