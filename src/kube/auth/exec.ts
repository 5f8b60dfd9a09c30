// kubeconfig `exec` credential plugins (client.authentication.k8s.io ExecCredential), as
// client-go runs them: the plugin's token or certificate is kept until shortly before its
// `expirationTimestamp`, then the plugin runs again, once however many requests wait; a 401
// makes it run again at once (Refreshing does the single flight).
import { KubeConfigError } from '../../apimachinery/errors.ts';
import { type KeyPair, keyPair } from './credentialfiles.ts';
import { Refreshing } from './refreshing.ts';

/** The kubeconfig's `users[].user.exec`. */
export interface ExecConfig {
  readonly command: string;
  readonly args?: readonly string[];
  readonly env?: readonly { readonly name: string; readonly value: string }[];
  readonly apiVersion?: string;
  readonly installHint?: string;
  readonly provideClusterInfo?: boolean;
  readonly interactiveMode?: string;
}

/** What a plugin run gave: a token, a client certificate, or both. */
export interface ExecCredential {
  readonly token: string | undefined;
  readonly pair: KeyPair | undefined;
  /** Epoch ms; undefined when the plugin gave no expiry (kept until a 401). */
  readonly expiresAt: number | undefined;
}

/** Run the plugin again this long before the reported expiry (less for very short-lived credentials). */
export const EXPIRY_MARGIN_MS = 10_000;
/** A plugin that hangs must not stall every request for ever. */
const PLUGIN_TIMEOUT_MS = 60_000;

/** Until when a credential obtained at `obtainedAt` is used: the expiry less a margin, at most half its lifetime. */
export function freshUntil(expiresAt: number | undefined, obtainedAt: number): number {
  if (expiresAt === undefined) return Infinity;
  const margin = Math.min(EXPIRY_MARGIN_MS, Math.max(0, expiresAt - obtainedAt) / 2);
  return expiresAt - margin;
}

/** Parses and checks a plugin's stdout (an ExecCredential object). */
export function parseExecCredential(stdout: string, apiVersion: string, command: string): ExecCredential {
  const fail = (problem: string): never => {
    throw new KubeConfigError(
      `exec plugin ${command}: ${problem}. Check the plugin and users[].user.exec in the kubeconfig`,
    );
  };
  let parsed: unknown;
  try {
    parsed = JSON.parse(stdout);
  } catch {
    return fail(`its output is not JSON (${JSON.stringify(stdout.slice(0, 80))})`);
  }
  if (!parsed || typeof parsed !== 'object') return fail('its output is not an ExecCredential object');
  const credential = parsed as { apiVersion?: unknown; kind?: unknown; status?: Record<string, unknown> };
  if (credential.kind !== 'ExecCredential') {
    fail(`it returned kind ${JSON.stringify(credential.kind)}, not ExecCredential`);
  }
  if (credential.apiVersion !== apiVersion) {
    fail(`it returned apiVersion ${JSON.stringify(credential.apiVersion)}, but the kubeconfig asks for ${apiVersion}`);
  }
  const status = credential.status ?? {};
  const text = (field: string): string | undefined => {
    const value = status[field];
    if (value === undefined || value === null || value === '') return undefined;
    return typeof value === 'string' ? value : fail(`status.${field} is not a string`);
  };
  const token = text('token');
  const cert = text('clientCertificateData');
  const key = text('clientKeyData');
  if ((cert === undefined) !== (key === undefined)) {
    fail('it returned only one of status.clientCertificateData and status.clientKeyData');
  }
  if (token === undefined && cert === undefined) fail('it returned neither status.token nor a client certificate');
  const expiry = text('expirationTimestamp');
  const expiresAt = expiry === undefined ? undefined : Date.parse(expiry);
  if (expiresAt !== undefined && Number.isNaN(expiresAt)) {
    fail(`status.expirationTimestamp ${JSON.stringify(expiry)} is not a time`);
  }
  return {
    token,
    pair: cert !== undefined && key !== undefined ? keyPair(cert, key, `from exec plugin ${command}`) : undefined,
    expiresAt,
  };
}

/** The cluster as a plugin with `provideClusterInfo` sees it (ExecCredential spec.cluster). */
export interface ExecClusterInfo {
  readonly server: string;
  readonly 'certificate-authority-data'?: string;
  readonly 'insecure-skip-tls-verify'?: boolean;
  readonly 'tls-server-name'?: string;
}

/** A plugin's credential, run again before it expires or when it was rejected. */
export function execSource(
  config: ExecConfig,
  cluster: ExecClusterInfo,
  now: () => number = Date.now,
): Refreshing<ExecCredential> {
  const apiVersion = config.apiVersion ?? 'client.authentication.k8s.io/v1';
  if (config.interactiveMode === 'Always') {
    throw new KubeConfigError(
      `exec plugin ${config.command} needs a terminal (interactiveMode: Always), which labeller never gives it. Use a plugin or mode that works non-interactively`,
    );
  }
  const info = {
    apiVersion,
    kind: 'ExecCredential',
    spec: { interactive: false, ...(config.provideClusterInfo ? { cluster } : {}) },
  };
  const env = {
    ...process.env,
    ...Object.fromEntries((config.env ?? []).map((e) => [e.name, e.value])),
    KUBERNETES_EXEC_INFO: JSON.stringify(info),
  };
  return new Refreshing<ExecCredential>(async () => {
    const stdout = await run(config, env);
    const credential = parseExecCredential(stdout, apiVersion, config.command);
    return { value: credential, freshUntil: freshUntil(credential.expiresAt, now()) };
  }, now);
}

async function run(config: ExecConfig, env: NodeJS.ProcessEnv): Promise<string> {
  // Loaded when a plugin first runs: in-cluster and with token or certificate kubeconfigs it never does.
  const { execFile } = await import('node:child_process');
  return new Promise((resolve, reject) => {
    execFile(config.command, [...(config.args ?? [])], {
      env,
      timeout: PLUGIN_TIMEOUT_MS,
      maxBuffer: 1 << 20,
      encoding: 'utf8',
    }, (error, stdout, stderr) => {
      if (!error) return resolve(stdout);
      const code = (error as NodeJS.ErrnoException).code;
      const why = code === 'ENOENT'
        ? `not found${config.installHint ? ` (${config.installHint.trim()})` : ''}`
        : error.killed
        ? `no answer in ${PLUGIN_TIMEOUT_MS / 1000} s`
        : `failed (${String(code ?? error.message)}): ${stderr.trim().slice(-500) || 'no output'}`;
      reject(new KubeConfigError(`exec plugin ${config.command}: ${why}. Check users[].user.exec in the kubeconfig`));
    });
  });
}
