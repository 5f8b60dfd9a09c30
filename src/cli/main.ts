// The `labeller` command behind src/cli.ts: options → config → API client → the command, on one
// host (commands/). Exit status 2 for usage and configuration errors, 1 for failures at run time
// and work left undone, 0 otherwise.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { runAdmission } from '../commands/admission.ts';
import { type Ending, Host } from '../commands/host.ts';
import { type LabelOptions, runLabel, writerGuard, writerStart } from '../commands/label.ts';
import { runOnce } from '../commands/once.ts';
import type { PreflightSettings } from '../commands/preflight.ts';
import { runPrune } from '../commands/prune.ts';
import { runExplain } from '../commands/explain.ts';
import { runStatus } from '../commands/status.ts';
import { ConfigError } from '../config/fields.ts';
import { type Config, kindSettings } from '../config/model.ts';
import { buildConfig, parseAnnotationFlag, parseLabelFlag } from '../config/overlay.ts';
import { eventsIdentity } from '../events/labellerevents.ts';
import { KubeClient } from '../kube/client.ts';
import type { Shutdown } from '../runtime/shutdown.ts';
import { readMemoryKey } from '../sources/memory.ts';
import { createLogger } from '../util/log.ts';
import { UsageError } from '../util/usage.ts';
import { fatal, report } from './fatal.ts';
import { envName } from './flags.ts';
import { type Options, parseOptions, unknownEnv } from './options.ts';
import { version } from './version.ts';

type Format = 'json' | 'text';
const autoFormat = (): Format => (process.stderr.isTTY ? 'text' : 'json');

async function run(argv: readonly string[], shutdown: Shutdown, setFormat: (format: Format) => void): Promise<number> {
  const VERSION = version();
  const options = await parseOptions(argv, process.env, VERSION);
  if (!options) return 0;
  const format = options.logFormat === 'auto' ? autoFormat() : options.logFormat;
  setFormat(format);
  const log = createLogger({ level: options.logLevel, format });
  for (const name of unknownEnv(process.env)) {
    log.warn('unknown environment variable ignored', {
      name,
      hint: `options are set as ${envName('kinds')} and the like; see labeller --help`,
    });
  }

  const configPath = options.config;
  const text = configPath === undefined ? undefined : readConfig(configPath);
  const build = (content: string | undefined) =>
    buildConfig({
      file: configPath === undefined || content === undefined ? undefined : { text: content, source: configPath },
      kinds: options.kinds,
      excludeKinds: options.excludeKinds,
      labels: options.labels === undefined ? undefined : Object.fromEntries(options.labels.map(parseLabelFlag)),
      annotations: options.annotations === undefined
        ? undefined
        : Object.fromEntries(options.annotations.map(parseAnnotationFlag)),
      // explain's -n names the object's namespace, not the namespaces to label.
      namespaces: options.command === 'explain' ? undefined : options.namespaces,
      selector: options.selector,
      conflicts: options.conflicts,
      protect: options.protect,
      requireLabels: options.command !== 'prune',
    });
  // prune --all-kinds takes its kinds from discovery (commands/prune.ts), and no config.
  const config = options.command === 'prune' && options.allKinds ? undefined : build(text);
  // Read by the commands that keep the sources' memory: the controller and --once, when they write.
  const sourcesMemoryKey = options.command === 'label' && !options.dryRun && options.sourcesMemoryKeyFile !== undefined
    ? readMemoryKey(options.sourcesMemoryKeyFile)
    : undefined;
  const client = await KubeClient.load({
    kubeconfig: options.kubeconfig,
    context: options.context,
    userAgent: `labeller/${VERSION}`,
    impersonate: options.as,
  });
  const identity = `${hostname()}_${randomBytes(4).toString('hex')}`;
  // The process's own namespace: its Leases (leader election, field-manager guard) live there.
  const namespace = options.leaderElectionNamespace ?? client.defaultNamespace ?? 'default';
  const leaderElection = options.leaderElect
    ? {
      namespace,
      name: options.leaderElectionId,
      identity,
      leaseDurationMs: options.leaseDurationMs,
      renewDeadlineMs: options.renewDeadlineMs,
      retryPeriodMs: options.retryPeriodMs,
    }
    : undefined;
  const sharding = options.shards
    ? {
      group: options.shardGroup,
      namespace,
      identity,
      leaseDurationMs: options.leaseDurationMs,
      retryPeriodMs: options.retryPeriodMs,
      configSkewMs: options.shardConfigSkewMs,
    }
    : undefined;
  const guard = {
    namespace,
    identity,
    shardGroup: sharding && `${namespace}/${sharding.group}`,
    leaseDurationMs: options.leaseDurationMs,
    ignore: options.ignoreFieldManagerGuard,
  };
  // The controller applies the config file again when it changes.
  const configFile = configPath !== undefined && text !== undefined ? { path: configPath, text, build } : undefined;
  // A dry run writes nothing, Events included; nor does admission, which only prints.
  const events = options.events && !options.dryRun && options.command !== 'admission'
    ? eventsIdentity(process.env)
    : undefined;
  try {
    const host = await Host.open(
      client,
      config ? kindSettings(config).map((kind) => kind.resource) : [],
      { ...options, leaderElection, events, sharding },
      shutdown,
      log,
    );
    if (!host) return 0;
    try {
      const preflight = options.preflight
        ? {
          events: options.events,
          leaseNamespace: namespace,
          admissionPolicies: options.admissionPolicies,
          policyReports: options.policyReports,
        }
        : undefined;
      const label = {
        guard,
        configFile,
        admissionPolicies: options.admissionPolicies,
        admissionPoliciesOwner: options.admissionPoliciesOwner,
        policyReports: options.policyReports,
        policyReportsOwner: options.policyReportsOwner,
        sourcesMemoryKey,
      };
      return EXIT_STATUS[await runCommand(host, options, config, label, preflight)];
    } finally {
      await host.close();
    }
  } finally {
    await client.close();
  }
}

/** The command the options name, on `host`. */
function runCommand(
  host: Host,
  options: Options,
  config: Config | undefined,
  label: LabelOptions,
  preflight: PreflightSettings | undefined,
): Promise<Ending> {
  if (options.command === 'prune') {
    return runPrune(
      host,
      config ? { allKinds: false, config } : { allKinds: true, namespaces: options.namespaces ?? [] },
      options,
    );
  }
  // Only prune --all-kinds goes without a config.
  if (!config) throw new Error('no config to run');
  // The parser gives each command only the outputs it takes.
  const output = options.output === 'json' ? 'json' : undefined;
  if (options.command === 'status') {
    return runStatus(host, config, {
      ...options,
      output: output ?? 'table',
      preflight,
      leaseNamespace: label.guard.namespace,
    });
  }
  if (options.command === 'explain') {
    return runExplain(host, config, {
      target: options.target ?? '',
      namespace: options.namespaces?.[0],
      output: output ?? 'table',
    });
  }
  if (options.command === 'admission') {
    return runAdmission(host, config, { output: output ?? 'yaml', fieldManager: options.fieldManager });
  }
  return options.once
    ? runOnce(host, config, {
      writer: writerStart(host, label, writerGuard(host, label)),
      ...(options.dryRun && preflight ? { preflight } : {}),
    })
    : runLabel(host, config, label);
}

/** How each ending exits: a stop asked for is a clean one; work left undone or a failure is 1. */
const EXIT_STATUS: Readonly<Record<Ending, number>> = {
  done: 0,
  stopped: 0,
  incomplete: 1,
  'missing rights': 3,
  'leadership lost': 1,
  'controller crashed': 1,
  'grace period over': 1,
};

function readConfig(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new ConfigError(
      `${path}: cannot read the config file (${code ?? String(error)}); pass an existing file with --config`,
    );
  }
}

/** Runs the command; returns the exit status. Errors become one line on stderr, never a stack trace. */
export async function main(argv: readonly string[], shutdown: Shutdown): Promise<number> {
  // Until the options are read, the format `auto` would choose.
  let format = autoFormat();
  try {
    return await run(argv, shutdown, (chosen) => (format = chosen));
  } catch (error) {
    const failure = fatal(error, error instanceof UsageError);
    report(failure, format);
    return failure.status;
  }
}
