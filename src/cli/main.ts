// The `labeller` command behind src/cli.ts: options → config → API client → app. Exit status 2
// for usage and configuration errors, 1 for failures at run time, 0 otherwise.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { eventsIdentity } from '../app/events.ts';
import { runApp } from '../app/run.ts';
import { KubeClient } from '../kube/client.ts';
import { buildConfig, parseAnnotationFlag, parseLabelFlag } from '../labeller/config.ts';
import { ConfigError } from '../labeller/configfields.ts';
import { fatal, report } from './fatal.ts';
import { createLogger } from '../util/log.ts';
import { envName } from './flags.ts';
import { parseOptions, unknownEnv } from './options.ts';
import { UsageError } from '../util/usage.ts';
import { version } from './version.ts';
import type { Shutdown } from '../runtime/shutdown.ts';

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

  const configFile = options.config;
  const text = configFile === undefined ? undefined : readConfig(configFile);
  const build = (content: string | undefined) =>
    buildConfig({
      file: configFile === undefined || content === undefined ? undefined : { text: content, source: configFile },
      kinds: options.kinds,
      excludeKinds: options.excludeKinds,
      labels: options.labels === undefined ? undefined : Object.fromEntries(options.labels.map(parseLabelFlag)),
      annotations: options.annotations === undefined
        ? undefined
        : Object.fromEntries(options.annotations.map(parseAnnotationFlag)),
      namespaces: options.namespaces,
      selector: options.selector,
      conflicts: options.conflicts,
      requireLabels: options.command !== 'prune',
    });
  // prune --all-kinds takes its kinds from discovery (app/prune.ts).
  const config = options.command === 'prune' && options.allKinds
    ? { kinds: [], ownerKinds: [], sources: new Map() }
    : build(text);
  // The controller reapplies the file when it changes (app/reload.ts).
  const configSource = options.command === 'label' && configFile !== undefined && text !== undefined
    ? { path: configFile, text, build }
    : undefined;
  const client = await KubeClient.load({
    kubeconfig: options.kubeconfig,
    context: options.context,
    userAgent: `labeller/${VERSION}`,
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
  const guard = {
    namespace,
    identity,
    leaseDurationMs: options.leaseDurationMs,
    ignore: options.ignoreFieldManagerGuard,
  };
  try {
    // A dry run writes nothing, Events included.
    const events = options.events && !options.dryRun ? eventsIdentity(process.env) : undefined;
    return await runApp(client, config, { ...options, leaderElection, events, guard, configSource }, shutdown, log);
  } finally {
    await client.close();
  }
}

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
