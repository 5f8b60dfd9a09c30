// The `labeller` command behind src/cli.ts: options → config → API client → app. Exit status 2
// for usage and configuration errors, 1 for failures at run time, 0 otherwise.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { FieldManagerTaken } from './app/guard.ts';
import { KindError } from './app/kinds.ts';
import { runApp } from './app/run.ts';
import { KubeClient, KubeConfigError } from './kube/client.ts';
import { buildConfig, ConfigError, parseLabelFlag } from './labeller/config.ts';
import { createLogger } from './log.ts';
import { parseOptions, unknownEnv, UsageError, envName } from './options.ts';
import type { Shutdown } from './runtime/shutdown.ts';

const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;

async function run(argv: readonly string[], shutdown: Shutdown): Promise<number> {
  const options = await parseOptions(argv, process.env, VERSION);
  if (!options) return 0;
  const log = createLogger({
    level: options.logLevel,
    format: options.logFormat === 'auto' ? (process.stderr.isTTY ? 'text' : 'json') : options.logFormat,
  });
  for (const name of unknownEnv(process.env)) log.warn('unknown environment variable ignored', { name, hint: `options are set as ${envName('kinds')} and the like; see labeller --help` });

  const config = buildConfig({
    file: options.config === undefined ? undefined : { text: readConfig(options.config), source: options.config },
    kinds: options.kinds,
    labels: options.labels === undefined ? undefined : Object.fromEntries(options.labels.map(parseLabelFlag)),
    namespaces: options.namespaces,
    selector: options.selector,
    conflicts: options.conflicts,
  });
  const client = await KubeClient.load({ kubeconfig: options.kubeconfig, context: options.context, userAgent: `labeller/${VERSION}` });
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
  const guard = { namespace, identity, leaseDurationMs: options.leaseDurationMs, ignore: options.ignoreFieldManagerGuard };
  try {
    return await runApp(client, config, { ...options, leaderElection, guard }, shutdown, log);
  } finally {
    await client.close();
  }
}

function readConfig(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new ConfigError(`${path}: cannot read the config file (${code ?? String(error)}); pass an existing file with --config`);
  }
}

const USAGE_ERRORS = [UsageError, ConfigError, KubeConfigError, KindError, FieldManagerTaken];

/** Runs the command; returns the exit status. Errors become one line on stderr, never a stack trace. */
export async function main(argv: readonly string[], shutdown: Shutdown): Promise<number> {
  try {
    return await run(argv, shutdown);
  } catch (error) {
    const usage = USAGE_ERRORS.some((type) => error instanceof type);
    process.stderr.write(`labeller: ${error instanceof Error ? error.message : String(error)}\n`);
    return usage ? 2 : 1;
  }
}
