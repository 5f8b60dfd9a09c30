// The chart's test kit: helm and kubectl from test/cluster/tools.ts, rendering with values,
// applying manifests, and access reviews for an identity.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after } from 'node:test';
import { loadAll } from 'js-yaml';
import { KubeClient } from '../../src/kube/client.ts';
import { ensureTools } from '../cluster/tools.ts';
import { adminClient, kubeconfig } from './cluster.ts';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const CHART = join(ROOT, 'chart');
export const EXAMPLES = ['cluster-wide', 'namespaced', 'crd', 'ha', 'every-kind', 'sharded'].map((name) =>
  join(CHART, 'examples', `${name}.yaml`)
);
export const SIDECAR = join(CHART, 'examples', 'sidecar.yaml');

const tools = ensureTools();
const dir = mkdtempSync(join(tmpdir(), 'labeller-chart-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

/** Writes `text` to a file of this test file's temp dir and returns its path. */
export function tempFile(name: string, text: string): string {
  const path = join(dir, `${files++}-${name}`);
  writeFileSync(path, text);
  return path;
}

export interface Manifest {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly namespace?: string; readonly labels?: Record<string, string> };
  readonly [field: string]: unknown;
}

export interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a tool (helm or kubectl from the tools folder); never throws on a non-zero exit. */
export function tool(name: 'helm' | 'kubectl', args: readonly string[], input?: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = execFile(join(tools, name), args, { cwd: ROOT, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      if (error && typeof error.code !== 'number') reject(error);
      else resolve({ code: error ? Number(error.code) : 0, stdout, stderr });
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

export interface RenderOptions {
  readonly release?: string;
  readonly namespace?: string;
  /** Values files, then `values` (as a file, so types survive) on top. */
  readonly files?: readonly string[];
  readonly values?: object;
}

function valueArgs(options: RenderOptions): string[] {
  const files = [...(options.files ?? [])];
  if (options.values) files.push(tempFile('values.json', JSON.stringify(options.values)));
  return files.flatMap((file) => ['-f', file]);
}

/** `helm template`; resolves with its result whether it rendered or not. */
export function template(options: RenderOptions = {}): Promise<Run> {
  return tool('helm', [
    'template',
    options.release ?? 'labeller',
    CHART,
    '--namespace',
    options.namespace ?? 'labeller',
    ...valueArgs(options),
  ]);
}

/** `helm lint --strict` with the values. */
export function lint(options: RenderOptions = {}): Promise<Run> {
  return tool('helm', [
    'lint',
    '--strict',
    CHART,
    '--namespace',
    options.namespace ?? 'labeller',
    ...valueArgs(options),
  ]);
}

export interface InstallOptions extends RenderOptions {
  readonly release: string;
  readonly namespace: string;
  /** The chart: this checkout's (default), or a reference such as oci://host/charts/labeller. */
  readonly chart?: string;
  /** More flags for helm install, e.g. --version, --plain-http. */
  readonly flags?: readonly string[];
}

/** `helm install` into the shared cluster (as admin, nothing waited for); uninstalled when the file's tests end. */
export async function install(options: InstallOptions): Promise<void> {
  const kubeconfigArgs = ['--kubeconfig', kubeconfig(), '--namespace', options.namespace];
  const run = await tool('helm', [
    'install',
    options.release,
    options.chart ?? CHART,
    ...(options.flags ?? []),
    ...kubeconfigArgs,
    ...valueArgs(options),
  ]);
  if (run.code !== 0) throw new Error(`helm install ${options.release} failed: ${run.stderr}`);
  after(() => tool('helm', ['uninstall', options.release, ...kubeconfigArgs]));
}

/** Renders the chart into its objects; throws with helm's message if it fails. */
export async function render(options: RenderOptions = {}): Promise<Manifest[]> {
  const run = await template(options);
  if (run.code !== 0) throw new Error(`helm template failed: ${run.stderr}`);
  return parseManifests(run.stdout);
}

export function parseManifests(text: string): Manifest[] {
  return loadAll(text).filter((doc): doc is Manifest => typeof doc === 'object' && doc !== null);
}

/** The one object of `kind` (and `name`, if given); throws if there is not exactly one. */
export function only(manifests: readonly Manifest[], kind: string, name?: string): Manifest {
  const found = manifests.filter((m) => m.kind === kind && (name === undefined || m.metadata.name === name));
  if (found.length !== 1) throw new Error(`expected one ${kind}${name ? ` ${name}` : ''}, found ${found.length}`);
  return found[0]!;
}

export interface Container {
  readonly name: string;
  readonly args?: string[];
  readonly command?: string[];
  readonly env?: { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[];
  readonly [field: string]: unknown;
}

/** The containers of a Deployment's pod template. */
export function containers(deployment: Manifest): Container[] {
  return (deployment['spec'] as { template: { spec: { containers: Container[] } } }).template.spec.containers;
}

/** `kubectl apply` (as admin) of objects; `extra` adds flags such as --dry-run=server. */
export async function apply(manifests: readonly Manifest[], extra: readonly string[] = []): Promise<Run> {
  const list = JSON.stringify({ apiVersion: 'v1', kind: 'List', items: manifests });
  const run = await tool('kubectl', ['--kubeconfig', kubeconfig(), 'apply', ...extra, '-f', '-'], list);
  if (run.code !== 0) throw new Error(`kubectl apply ${extra.join(' ')} failed: ${run.stderr}`);
  return run;
}

/** Deletes cluster-scoped objects (ClusterRoles, bindings) when the file's tests end. */
export function deleteAfter(manifests: readonly Manifest[]): void {
  const clusterScoped = manifests.filter((m) => m.kind === 'ClusterRole' || m.kind === 'ClusterRoleBinding');
  after(async () => {
    const client = await adminClient();
    for (const m of clusterScoped) {
      const plural = m.kind === 'ClusterRole' ? 'clusterroles' : 'clusterrolebindings';
      await client.request('DELETE', `/apis/rbac.authorization.k8s.io/v1/${plural}/${m.metadata.name}`).catch(() => {});
    }
  });
}

export interface Access {
  readonly verb: string;
  readonly group?: string;
  readonly resource: string;
  readonly subresource?: string;
  /** Empty or absent: cluster-wide (all namespaces). */
  readonly namespace?: string;
  readonly name?: string;
}

export function describeAccess(a: Access): string {
  const what = `${a.resource}${a.subresource ? `/${a.subresource}` : ''}${a.group ? `.${a.group}` : ''}${
    a.name ? `/${a.name}` : ''
  }`;
  return `${a.verb} ${what} ${a.namespace ? `in ${a.namespace}` : 'cluster-wide'}`;
}

/** Asks the API server (SelfSubjectAccessReview) what the identity of `kubeconfigPath` may do. */
export async function accessReview(kubeconfigPath: string, checks: readonly Access[]): Promise<Map<Access, boolean>> {
  const client = await KubeClient.load({ kubeconfig: kubeconfigPath, userAgent: 'labeller-e2e' });
  try {
    const answers = await Promise.all(
      checks.map(async (check) => {
        const review = await client.json<{ status: { allowed: boolean } }>(
          'POST',
          '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
          {
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({
              apiVersion: 'authorization.k8s.io/v1',
              kind: 'SelfSubjectAccessReview',
              spec: { resourceAttributes: { group: '', ...check } },
            }),
          },
        );
        return [check, review.status.allowed] as const;
      }),
    );
    return new Map(answers);
  } finally {
    await client.close();
  }
}

/** A flag's value in an argument list (`--flag=value`), or undefined. */
export function flagValue(args: readonly string[], flag: string): string | undefined {
  const arg = args.find((a) => a === flag || a.startsWith(`${flag}=`));
  return arg === undefined ? undefined : arg.slice(flag.length + 1);
}

/** The sources' memory key the pod would mount, in a file: the rendered Secret's, else a random one. */
function memoryKeyFile(manifests: readonly Manifest[]): string {
  const secret = manifests.find((m) => m.kind === 'Secret' && m.metadata.name.endsWith('-sources-memory'));
  const data = (secret?.['data'] as Record<string, string> | undefined)?.['key'];
  return tempFile(
    'sources-memory.key',
    data ? Buffer.from(data, 'base64').toString() : randomBytes(32).toString('base64'),
  );
}

const LEADER_FLAGS = [
  '--leader-elect',
  '--leader-elect-resource-namespace',
  '--leader-elect-resource-name',
  '--leader-elect-lease-duration',
  '--leader-elect-renew-deadline',
  '--leader-elect-retry-period',
];

/**
 * The chart's container arguments for a local run: --config names the rendered ConfigMap's
 * kinds.yaml written to a file, --sources-memory-key-file the key of the rendered Secret (else one
 * of its own) written to a file, the harness sets --log-format, leader election only when asked.
 * Every other argument is passed as the chart renders it, so a flag the binary does not take fails.
 */
export function localArgs(
  manifests: readonly Manifest[],
  options: { leaderElection: boolean; httpPort?: number },
): string[] {
  const configFile = tempFile(
    'kinds.yaml',
    (only(manifests, 'ConfigMap')['data'] as Record<string, string>)['kinds.yaml'] ?? '',
  );
  const args: string[] = [];
  for (const arg of containers(only(manifests, 'Deployment'))[0]?.args ?? []) {
    const flag = arg.split('=')[0] ?? '';
    if (flag === '--config') args.push(`--config=${configFile}`);
    else if (flag === '--sources-memory-key-file') args.push(`--sources-memory-key-file=${memoryKeyFile(manifests)}`);
    else if (flag === '--log-format' || (LEADER_FLAGS.includes(flag) && !options.leaderElection)) continue;
    else if (flag === '--http-port') args.push(`--http-port=${options.httpPort ?? 0}`);
    else args.push(arg);
  }
  return args;
}
