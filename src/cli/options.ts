// Command-line flags and LABELLER_* environment variables, merged into typed options.
// Precedence: flags > environment > config file > defaults. The config file's part (kinds,
// labels, conflicts) is merged by buildConfig; this file handles everything else.
import yargs from 'yargs';
import { type Command, COMMANDS, ENV_PREFIX, envNames, type Name, type Spec, SPECS } from './flags.ts';
import { formatHelp } from './help.ts';
import type { Level } from '../util/log.ts';
import type { ConflictPolicy } from '../config/model.ts';
import type { ProtectMode } from '../config/protect.ts';
import { durationProblem, parseDuration } from '../util/duration.ts';
import { isDns1123Label } from '../apimachinery/names.ts';
import { UsageError } from '../util/usage.ts';
import type { BindAddress } from '../metrics/server.ts';

export type Output = 'table' | 'json' | 'yaml';

/** The outputs of the commands that print one, their default first. */
const OUTPUTS: Readonly<Partial<Record<Command, readonly Output[]>>> = {
  status: ['table', 'json'],
  explain: ['table', 'json'],
  admission: ['yaml', 'json'],
};

export interface Options {
  /** `label` (no command: the controller, or --once), or the command named. */
  readonly command: Command;
  /** prune: every listable and patchable kind from discovery. */
  readonly allKinds: boolean;
  /** status, explain (table, json) and admission (yaml, json): how the report is printed. */
  readonly output: Output;
  /** status: the share of objects carrying each configured label (--coverage). */
  readonly coverage: boolean;
  /** status, --once --dry-run: ask whether the identity has every right the controller needs (--preflight). */
  readonly preflight: boolean;
  /** Act as this user (--as). */
  readonly as: string | undefined;
  /** explain: the object, `<kind>/<name>`. */
  readonly target: string | undefined;
  readonly kinds: readonly string[] | undefined;
  /** With the '*' kind: kinds it leaves out. */
  readonly excludeKinds: readonly string[] | undefined;
  readonly config: string | undefined;
  readonly labels: readonly string[] | undefined;
  /** --annotation key=value, each. */
  readonly annotations: readonly string[] | undefined;
  readonly namespaces: readonly string[] | undefined;
  readonly selector: string | undefined;
  readonly conflicts: ConflictPolicy | undefined;
  /** --protect: the config's protection mode, or off. */
  readonly protect: ProtectMode | 'off' | undefined;
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
  /** Write Kubernetes Events (--events). */
  readonly events: boolean;
  /** Where /metrics is served; undefined: off. */
  readonly metricsBindAddress: BindAddress | undefined;
  /** Where /healthz and /readyz are served; undefined: off. The same address as metrics: one server. */
  readonly healthProbeBindAddress: BindAddress | undefined;
  /** The controller keeps the config's admission policies applied; prune and status treat them as labeller's (--admission-policies). */
  readonly admissionPolicies: boolean;
  /** What the policies depend on, kubectl-style `<kind>/<name>` (--admission-policies-owner). */
  readonly admissionPoliciesOwner: string | undefined;
  /** The controller keeps PolicyReports of what is not as the config wants (--policy-reports). */
  readonly policyReports: boolean;
  /** What the reports depend on, kubectl-style `<kind>/<name>` (--policy-reports-owner). */
  readonly policyReportsOwner: string | undefined;
  /** Write even when a running labeller with another config holds the field manager. */
  readonly ignoreFieldManagerGuard: boolean;
  readonly leaderElect: boolean;
  /** --shards auto: every replica writes its share of the namespaces (src/shard/). */
  readonly shards: boolean;
  readonly shardGroup: string;
  /** --shard-config-skew: how long members may run different configs before those behind give their buckets up. */
  readonly shardConfigSkewMs: number;
  readonly leaderElectionNamespace: string | undefined;
  readonly leaderElectionId: string;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  /** The secret key of the sources' memory (--sources-memory-key-file); none: key counts only. */
  readonly sourcesMemoryKeyFile: string | undefined;
}

/**
 * Parses argv and the environment. Returns undefined when --help or --version printed
 * something and there is nothing to run.
 */
export async function parseOptions(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  version: string,
): Promise<Options | undefined> {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(formatHelp());
    return undefined;
  }
  let exited = false;
  const parser = yargs([...argv])
    .scriptName('labeller')
    .parserConfiguration({ 'camel-case-expansion': false })
    .strictOptions()
    .exitProcess(false)
    .version(version)
    .help(false)
    .fail((message: string | undefined, error: Error | undefined) => {
      throw new UsageError(`${message ?? error?.message ?? 'invalid arguments'}. Run labeller --help for the options`);
    });
  for (const [name, spec] of Object.entries(SPECS) as [Name, Spec][]) {
    const aliases = [...(spec.short ? [spec.short] : []), ...(spec.aliases ?? [])];
    parser.option(name, {
      type: spec.kind === 'list' ? 'array' : spec.kind === 'boolean' ? 'boolean' : 'string',
      ...(aliases.length ? { alias: aliases } : {}),
      ...(spec.choices ? { choices: [...spec.choices] } : {}),
      ...(spec.kind === 'list' ? { string: true } : {}),
    });
  }
  parser.showHelpOnFail(false);
  const parsed =
    (await parser.parseAsync(argv as string[], {}, (error: Error | undefined, _argv: unknown, output: string) => {
      if (output && !error) {
        exited = true;
        process.stdout.write(`${output}\n`);
      }
    })) as Record<string, unknown>;
  if (exited) return undefined;
  const positional = ((parsed['_'] ?? []) as unknown[]).map(String);
  const command: Command = positional[0] !== undefined && Object.hasOwn(COMMANDS, positional[0])
    ? (positional.shift() as Command)
    : 'label';
  // explain names its object: `labeller explain deploy/web`.
  const target = command === 'explain' ? positional.shift() : undefined;
  if (command === 'explain' && (target === undefined || !/^[^/\s]+\/[^/\s]+$/.test(target))) {
    throw new UsageError(
      `labeller explain needs the object as <kind>/<name>, e.g. labeller explain deploy/web -n default${
        target === undefined ? '' : ` (got ${JSON.stringify(target)})`
      }`,
    );
  }
  if (positional.length > 0) {
    const commands = command === 'label' ? `commands are ${Object.keys(COMMANDS).join(', ')}; ` : '';
    throw new UsageError(
      `unexpected argument ${JSON.stringify(positional[0])}: ${commands}options start with --, e.g. --kinds ${
        positional[0]
      }`,
    );
  }

  // The environment is read here, not by yargs's .env('LABELLER'): that needs camel-case expansion
  // (which then takes --dryRun too), reads process.env only, makes a boolean variable false unless
  // it is "true" (LABELLER_DRY_RUN=yes or =maybe: false, silently), takes an empty variable as set,
  // and keeps no trace of the variable a bad value came from, which the messages below name.
  /** The flag's value, else the environment's, else the default; undefined when none is set. */
  const raw = (name: Name): string | readonly string[] | boolean | undefined => {
    const flag = parsed[name];
    if (flag !== undefined) return flag as string | string[] | boolean;
    const variable = envNames(name).find((n) => env[n] !== undefined && env[n] !== '');
    if (variable !== undefined) return env[variable];
    const spec: Spec = SPECS[name];
    return spec.default;
  };
  const where = (name: Name): string => {
    if (parsed[name] !== undefined) return `--${name}`;
    return envNames(name).find((n) => env[n]) ?? `--${name} default`;
  };
  const string = (name: Name): string | undefined => {
    const value = raw(name);
    if (value === undefined) return undefined;
    const text = String(value);
    const choices: readonly string[] | undefined = (SPECS[name] as Spec).choices;
    // yargs has checked a flag's value against its `choices:`; a variable's is checked here.
    if (choices && !choices.includes(text)) {
      throw new UsageError(`${where(name)}: "${text}" is not one of ${choices.join(', ')}`);
    }
    return text;
  };
  const list = (name: Name): readonly string[] | undefined => {
    const value = raw(name);
    if (value === undefined) return undefined;
    const separator = (SPECS[name] as Spec).separator ?? ',';
    const items = (Array.isArray(value) ? value : [String(value)]).flatMap((v) => String(v).split(separator)).map((
      v,
    ) => v.trim()).filter(Boolean);
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
    if (!Number.isInteger(n) || n < 0 || n > 65535) {
      throw new UsageError(`${where(name)}: "${text}" is not a port number (0 to 65535)`);
    }
    return n;
  };
  const address = (name: Name): BindAddress | undefined => {
    const text = string(name) ?? '0';
    if (text === '0') return undefined;
    const match = /^(.*):(\d+)$/.exec(text);
    const port = Number(match?.[2]);
    if (!match || port < 1 || port > 65535) {
      throw new UsageError(
        `${where(name)}: "${text}" is not an address; use host:port, :port for every interface, or 0 to turn it off`,
      );
    }
    return { host: match[1]!.replace(/^\[(.*)\]$/, '$1'), port };
  };
  const duration = (name: Name): number => {
    const text = string(name) ?? '';
    const ms = parseDuration(text);
    if (ms === undefined) {
      throw new UsageError(`${where(name)}: "${text}" is not a duration; use e.g. 30s, 5m, 1h30m or 500ms`);
    }
    const problem = durationProblem(ms);
    if (problem !== undefined) throw new UsageError(`${where(name)}: "${text}" is ${problem}`);
    return ms;
  };

  const [lease, renew, retry] = [
    duration('leader-elect-lease-duration'),
    duration('leader-elect-renew-deadline'),
    duration('leader-elect-retry-period'),
  ];
  if (!(retry < renew && renew < lease)) {
    throw new UsageError(
      `leader election needs --leader-elect-retry-period < --leader-elect-renew-deadline < --leader-elect-lease-duration (got ${
        retry / 1000
      }s, ${renew / 1000}s, ${lease / 1000}s)`,
    );
  }
  // --http-port is the shorthand for both addresses on one port; an explicit address wins.
  const isSet = (name: Name): boolean => parsed[name] !== undefined || envNames(name).some((n) => env[n]);
  const httpPort = isSet('http-port') ? port('http-port') : 0;
  const httpAddress = httpPort ? { host: '', port: httpPort } : undefined;
  const bound = (name: Name): BindAddress | undefined => (isSet(name) ? address(name) : httpAddress);

  const only = (name: Name, wanted: Command): void => {
    if (command !== wanted && isSet(name)) throw new UsageError(`--${name} works with labeller ${wanted} only`);
  };
  only('all-kinds', 'prune');
  only('coverage', 'status');
  if (isSet('preflight') && command !== 'status' && !(command === 'label' && flag('once') && flag('dry-run'))) {
    throw new UsageError('--preflight works with labeller status and labeller --once --dry-run only');
  }
  const outputs = OUTPUTS[command];
  if (outputs === undefined && isSet('output')) {
    throw new UsageError('--output works with labeller status, explain and admission only');
  }
  const output = isSet('output') ? string('output') as Output : outputs?.[0] ?? 'table';
  if (outputs !== undefined && !outputs.includes(output)) {
    throw new UsageError(`${where('output')}: "${output}" is not one of ${outputs.join(', ')} for labeller ${command}`);
  }
  if (command === 'explain' && (list('namespace')?.length ?? 0) > 1) {
    throw new UsageError("labeller explain takes one namespace: the object's, e.g. -n default");
  }
  if (string('shards') === 'auto') {
    if (flag('leader-elect')) {
      throw new UsageError(
        '--shards auto and --leader-elect are two ways to run replicas: all of them writing their share, or one writing everything; choose one',
      );
    }
    // It says the controller is sharded: the controller runs as a member, prune waits for the
    // group's members to stop, and the preflight of status and --once --dry-run asks for their
    // Leases. A --once that writes would write beside the members.
    if (command === 'explain' || (command === 'label' && flag('once') && !flag('dry-run'))) {
      throw new UsageError(
        "--shards auto works with the controller (labeller without --once), prune (which waits until no member of the group holds its Lease), status and --once --dry-run (whose preflight asks for the member Leases' rights); not with --once or explain",
      );
    }
  }
  const shardGroup = string('shard-group') ?? 'labeller';
  if (!isDns1123Label(shardGroup)) {
    throw new UsageError(
      `${
        where('shard-group')
      }: "${shardGroup}" is not a valid name: it names Leases and labels them; use lower-case letters, digits and '-', at most 63 characters`,
    );
  }
  // The controller keeps them; prune removes them (a failure to is then an error) and status asks for their rights.
  const admissionPolicies = flag('admission-policies');
  if (admissionPolicies && (!['label', 'prune', 'status'].includes(command) || (command === 'label' && flag('once')))) {
    throw new UsageError(
      '--admission-policies works with the controller (labeller without --once), prune and status; labeller admission prints the policies without it',
    );
  }
  /** `--<of>-owner`: with the controller and --<of> only, a cluster-scoped object as `<kind>/<name>`. */
  const ownerOf = (of: 'admission-policies' | 'policy-reports', on: boolean, dependents: string) => {
    const name = `${of}-owner` as const;
    const spec = string(name);
    if (spec === undefined) return undefined;
    if (!on || command !== 'label') {
      throw new UsageError(
        `--${name} works with the controller and --${of}: it names what the ${dependents} depend on`,
      );
    }
    if (!/^[^/\s]+\/[^/\s]+$/.test(spec)) {
      throw new UsageError(
        `${
          where(name)
        }: "${spec}" is not <kind>/<name>: name a cluster-scoped object as kubectl does, e.g. clusterrole/labeller-${of}`,
      );
    }
    return spec;
  };
  const admissionPoliciesOwner = ownerOf('admission-policies', admissionPolicies, 'policies it applies');
  const policyReports = flag('policy-reports');
  if (policyReports && (!['label', 'status'].includes(command) || (command === 'label' && flag('once')))) {
    throw new UsageError(
      '--policy-reports works with the controller (labeller without --once), and with status, whose preflight then asks for their rights',
    );
  }
  const policyReportsOwner = ownerOf('policy-reports', policyReports, 'reports it writes');
  if (flag('all-kinds') && isSet('exclude-kinds')) {
    throw new UsageError(
      "--exclude-kinds works with the '*' kind; prune --all-kinds takes every kind: prune with --kinds '*' to leave some out",
    );
  }

  return {
    command,
    allKinds: flag('all-kinds'),
    output,
    coverage: flag('coverage'),
    preflight: flag('preflight'),
    as: string('as'),
    target,
    kinds: list('kinds'),
    excludeKinds: list('exclude-kinds'),
    config: string('config'),
    labels: list('label'),
    annotations: list('annotation'),
    namespaces: list('namespace'),
    selector: string('selector'),
    conflicts: string('conflicts') as ConflictPolicy | undefined,
    protect: string('protect') as ProtectMode | 'off' | undefined,
    kubeconfig: string('kubeconfig'),
    context: string('context'),
    fieldManager: string('field-manager') ?? 'labeller',
    admissionPolicies,
    admissionPoliciesOwner,
    policyReports,
    policyReportsOwner,
    ignoreFieldManagerGuard: flag('ignore-field-manager-guard'),
    concurrency: count('concurrency'),
    requeueAfterMs: duration('requeue-after'),
    gracePeriodMs: duration('grace-period'),
    dryRun: flag('dry-run'),
    once: flag('once') || command !== 'label',
    logLevel: string('log-level') as Level,
    logFormat: string('log-format') as Options['logFormat'],
    watchTimeoutSeconds: Math.max(1, Math.round(duration('watch-timeout') / 1000)),
    events: flag('events'),
    metricsBindAddress: bound('metrics-bind-address'),
    healthProbeBindAddress: bound('health-probe-bind-address'),
    leaderElect: flag('leader-elect'),
    shards: string('shards') === 'auto',
    shardGroup,
    shardConfigSkewMs: duration('shard-config-skew'),
    leaderElectionNamespace: string('leader-elect-resource-namespace'),
    leaderElectionId: string('leader-elect-resource-name') ?? 'labeller',
    leaseDurationMs: lease,
    renewDeadlineMs: renew,
    retryPeriodMs: retry,
    sourcesMemoryKeyFile: string('sources-memory-key-file'),
  };
}

/** LABELLER_* variables that name no option, ignoring those Kubernetes injects for a Service named "labeller". */
export function unknownEnv(env: Readonly<Record<string, string | undefined>>): string[] {
  const known = new Set((Object.keys(SPECS) as Name[]).flatMap(envNames));
  return Object.keys(env).filter(
    (name) =>
      name.startsWith(ENV_PREFIX) && !known.has(name) && !/^LABELLER_(SERVICE_HOST|SERVICE_PORT|PORT)(_|$)/.test(name),
  );
}
