// Command-line flags and LABELLER_* environment variables, merged into typed options.
// Precedence: flags > environment > config file > defaults. The config file's part (kinds,
// labels, conflicts) is merged by buildConfig; this file handles everything else.
import yargs from 'yargs';
import { LEVELS, type Level } from './log.ts';
import type { ConflictPolicy } from './labeller/config.ts';

/** Bad flags or environment: exit status 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export interface Options {
  readonly kinds: readonly string[] | undefined;
  readonly config: string | undefined;
  readonly labels: readonly string[] | undefined;
  readonly namespaces: readonly string[] | undefined;
  readonly selector: string | undefined;
  readonly conflicts: ConflictPolicy | undefined;
  readonly kubeconfig: string | undefined;
  readonly context: string | undefined;
  readonly fieldManager: string;
  readonly concurrency: number;
  readonly requeueAfterMs: number;
  readonly gracePeriodMs: number;
  readonly dryRun: boolean;
  readonly once: boolean;
  readonly logLevel: Level;
  readonly logFormat: 'json' | 'text' | 'auto';
  readonly watchTimeoutSeconds: number;
  readonly httpPort: number;
  readonly ignoreFieldManagerGuard: boolean;
  readonly leaderElect: boolean;
  readonly leaderElectionNamespace: string | undefined;
  readonly leaderElectionId: string;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
}

type Kind = 'list' | 'string' | 'duration' | 'count' | 'port' | 'boolean';

interface Spec {
  readonly kind: Kind;
  readonly describe: string;
  readonly default?: string;
  readonly choices?: readonly string[];
  readonly alias?: string;
}

/** Every option, named as on the command line; the environment variable is LABELLER_ + its upper snake case. */
const SPECS = {
  kinds: { kind: 'list', describe: 'resource kinds to label, kubectl-style (deploy, services, deployments.apps, a CRD plural)' },
  config: { kind: 'string', alias: 'c', describe: 'kinds.yaml with labels and kinds' },
  label: { kind: 'list', describe: 'a label for every kind, key=value; repeatable (overrides the config file\'s global labels)' },
  namespace: { kind: 'list', alias: 'n', describe: 'namespaces to watch (default: all); repeatable or comma-separated' },
  selector: { kind: 'string', describe: 'label selector: only label objects that match it' },
  conflicts: { kind: 'string', choices: ['force', 'skip'], describe: 'when another field manager owns a label: take it over (force, the default) or leave it (skip)' },
  kubeconfig: { kind: 'string', describe: 'kubeconfig file (default: $KUBECONFIG, ~/.kube/config, then in-cluster)' },
  context: { kind: 'string', describe: 'kubeconfig context to use' },
  'field-manager': { kind: 'string', default: 'labeller', describe: 'server-side apply field manager that owns labeller\'s labels' },
  'ignore-field-manager-guard': { kind: 'boolean', describe: 'write even when a running labeller with another config holds --field-manager (the two will remove each other\'s labels)' },
  concurrency: { kind: 'count', default: '8', describe: 'objects reconciled at the same time, per kind' },
  'requeue-after': { kind: 'duration', default: '5m', describe: 'period of the re-check of every object (jittered ±10 %); 0 disables it' },
  'grace-period': { kind: 'duration', default: '30s', describe: 'on SIGTERM, how long running patches may take to finish' },
  'dry-run': { kind: 'boolean', describe: 'write nothing; print the label changes that would be made' },
  once: { kind: 'boolean', describe: 'converge every matching object once, print a summary and exit (0: all done, 1: failures)' },
  'log-level': { kind: 'string', default: 'info', choices: LEVELS, describe: 'least severe level logged' },
  'log-format': { kind: 'string', default: 'auto', choices: ['auto', 'json', 'text'], describe: 'json lines, or readable text (auto: text on a terminal)' },
  'watch-timeout': { kind: 'duration', default: '290s', describe: 'server-side timeout of each watch; a watch silent for longer (plus a margin) is treated as dead and reopened' },
  'http-port': { kind: 'port', default: '0', describe: 'port for /healthz, /readyz and /metrics on all interfaces; 0 turns the server off' },
  'leader-elect': { kind: 'boolean', describe: 'run several replicas: only the holder of a Lease writes' },
  'leader-election-namespace': { kind: 'string', describe: 'namespace of the Lease (default: the pod\'s namespace in a cluster, else the kubeconfig context\'s, else default)' },
  'leader-election-id': { kind: 'string', default: 'labeller', describe: 'name of the Lease' },
  'lease-duration': { kind: 'duration', default: '15s', describe: 'how long a standby waits before taking over a lease that is no longer renewed' },
  'renew-deadline': { kind: 'duration', default: '10s', describe: 'how long the leader retries renewing before it gives up leadership and exits' },
  'retry-period': { kind: 'duration', default: '2s', describe: 'how often leader election acts' },
} as const satisfies Record<string, Spec>;

type Name = keyof typeof SPECS;

export const ENV_PREFIX = 'LABELLER_';

export function envName(name: string): string {
  return ENV_PREFIX + name.toUpperCase().replaceAll('-', '_');
}

/**
 * Parses argv and the environment. Returns undefined when --help or --version printed
 * something and there is nothing to run.
 */
export async function parseOptions(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, version: string): Promise<Options | undefined> {
  let exited = false;
  const parser = yargs([...argv])
    .scriptName('labeller')
    .usage('$0 [options]\n\nKeeps labels right on Kubernetes objects, metadata-only, with server-side apply.\nEvery option can also be set as LABELLER_<OPTION> (e.g. LABELLER_KINDS=deploy,svc); flags win over the environment, which wins over --config.')
    .example('$0 --kinds deployments,services --label team=platform', 'label two kinds in all namespaces')
    .example('$0 --config kinds.yaml --once --dry-run', 'show what would change, then exit')
    .parserConfiguration({ 'camel-case-expansion': false })
    .strict()
    .exitProcess(false)
    .version(version)
    .help()
    .wrap(Math.min(110, process.stdout.columns || 110))
    .fail((message: string | undefined, error: Error | undefined) => {
      throw new UsageError(`${message ?? error?.message ?? 'invalid arguments'}. Run labeller --help for the options`);
    });
  for (const [name, spec] of Object.entries(SPECS) as [Name, Spec][]) {
    parser.option(name, {
      type: spec.kind === 'list' ? 'array' : spec.kind === 'boolean' ? 'boolean' : 'string',
      describe: `${spec.describe} [env: ${envName(name)}]${spec.default ? ` [default: ${spec.default}]` : ''}`,
      ...(spec.alias ? { alias: spec.alias } : {}),
      ...(spec.choices ? { choices: [...spec.choices] } : {}),
      ...(spec.kind === 'list' ? { string: true } : {}),
    });
  }
  parser.showHelpOnFail(false);
  const parsed = (await parser.parseAsync(argv as string[], {}, (error: Error | undefined, _argv: unknown, output: string) => {
    if (output && !error) {
      exited = true;
      process.stdout.write(`${output}\n`);
    }
  })) as Record<string, unknown>;
  if (exited) return undefined;
  if (parsed['_'] && (parsed['_'] as unknown[]).length > 0) {
    throw new UsageError(`unexpected argument ${JSON.stringify(String((parsed['_'] as unknown[])[0]))}: options start with --, e.g. --kinds ${String((parsed['_'] as unknown[])[0])}`);
  }

  /** The flag's value, else the environment's, else the default; undefined when none is set. */
  const raw = (name: Name): string | readonly string[] | boolean | undefined => {
    const flag = parsed[name];
    if (flag !== undefined) return flag as string | string[] | boolean;
    const fromEnv = env[envName(name)];
    if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
    const spec: Spec = SPECS[name];
    return spec.default;
  };
  const where = (name: Name): string => (parsed[name] !== undefined ? `--${name}` : env[envName(name)] ? envName(name) : `--${name} default`);
  const string = (name: Name): string | undefined => {
    const value = raw(name);
    if (value === undefined) return undefined;
    const text = String(value);
    const choices: readonly string[] | undefined = (SPECS[name] as Spec).choices;
    if (choices && !choices.includes(text)) {
      throw new UsageError(`${where(name)}: "${text}" is not one of ${choices.join(', ')}`);
    }
    return text;
  };
  const list = (name: Name): readonly string[] | undefined => {
    const value = raw(name);
    if (value === undefined) return undefined;
    const items = (Array.isArray(value) ? value : [String(value)]).flatMap((v) => String(v).split(',')).map((v) => v.trim()).filter(Boolean);
    return items.length > 0 ? items : undefined;
  };
  const flag = (name: Name): boolean => {
    const value = raw(name);
    if (typeof value === 'boolean' || value === undefined) return value ?? false;
    if (/^(1|true|yes)$/i.test(String(value))) return true;
    if (/^(0|false|no)?$/i.test(String(value))) return false;
    throw new UsageError(`${where(name)}: "${String(value)}" is not a boolean; use true or false`);
  };
  const count = (name: Name): number => {
    const text = string(name) ?? '';
    const n = Number(text);
    if (!Number.isInteger(n) || n < 1) throw new UsageError(`${where(name)}: "${text}" is not a positive whole number`);
    return n;
  };
  const port = (name: Name): number => {
    const text = string(name) ?? '';
    const n = Number(text);
    if (!Number.isInteger(n) || n < 0 || n > 65535) throw new UsageError(`${where(name)}: "${text}" is not a port number (0 to 65535)`);
    return n;
  };
  const duration = (name: Name): number => {
    const text = string(name) ?? '';
    const ms = parseDuration(text);
    if (ms === undefined) throw new UsageError(`${where(name)}: "${text}" is not a duration; use e.g. 30s, 5m, 1h30m or 500ms`);
    return ms;
  };

  const [lease, renew, retry] = [duration('lease-duration'), duration('renew-deadline'), duration('retry-period')];
  if (!(retry < renew && renew < lease)) {
    throw new UsageError(`leader election needs --retry-period < --renew-deadline < --lease-duration (got ${retry / 1000}s, ${renew / 1000}s, ${lease / 1000}s)`);
  }

  return {
    kinds: list('kinds'),
    config: string('config'),
    labels: list('label'),
    namespaces: list('namespace'),
    selector: string('selector'),
    conflicts: string('conflicts') as ConflictPolicy | undefined,
    kubeconfig: string('kubeconfig'),
    context: string('context'),
    fieldManager: string('field-manager') ?? 'labeller',
    ignoreFieldManagerGuard: flag('ignore-field-manager-guard'),
    concurrency: count('concurrency'),
    requeueAfterMs: duration('requeue-after'),
    gracePeriodMs: duration('grace-period'),
    dryRun: flag('dry-run'),
    once: flag('once'),
    logLevel: string('log-level') as Level,
    logFormat: string('log-format') as Options['logFormat'],
    watchTimeoutSeconds: Math.max(1, Math.round(duration('watch-timeout') / 1000)),
    httpPort: port('http-port'),
    leaderElect: flag('leader-elect'),
    leaderElectionNamespace: string('leader-election-namespace'),
    leaderElectionId: string('leader-election-id') ?? 'labeller',
    leaseDurationMs: lease,
    renewDeadlineMs: renew,
    retryPeriodMs: retry,
  };
}

const UNITS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Go-style durations ("1h30m", "45s", "500ms"); a bare number is seconds. */
export function parseDuration(text: string): number | undefined {
  const trimmed = text.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Number(trimmed) * 1000;
  if (!/^(\d+(\.\d+)?(ms|s|m|h))+$/.test(trimmed)) return undefined;
  let total = 0;
  for (const [, amount, unit] of trimmed.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)) total += Number(amount) * (UNITS[unit ?? 's'] ?? 0);
  return total;
}

/** LABELLER_* variables that name no option, ignoring those Kubernetes injects for a Service named "labeller". */
export function unknownEnv(env: Readonly<Record<string, string | undefined>>): string[] {
  const known = new Set(Object.keys(SPECS).map(envName));
  return Object.keys(env).filter(
    (name) => name.startsWith(ENV_PREFIX) && !known.has(name) && !/^LABELLER_(SERVICE_HOST|SERVICE_PORT|PORT)(_|$)/.test(name),
  );
}
