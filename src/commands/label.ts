// `labeller`: the controller. The config's kinds run until a signal, under leader election when
// asked, with the field-manager guard claiming each config before it takes effect and holding
// its Lease while this process may write; the config file, when there is one, is followed and
// each change applied live; discovery is refreshed so kinds served later start. With
// --admission-policies, the config's admission policies are kept applied beside the kinds while
// this process may write (policies/applier.ts), again after each reload the guard let through,
// and removed by the garbage collector with their owner, or by this process as it stops. With
// --policy-reports, what is not as the config wants is kept in PolicyReports (reports/writer.ts),
// written while this process may write.
import { type ConfigFile, followConfigFile } from '../config/follow.ts';
import { type Config, protectsKeys } from '../config/model.ts';
import { claimOf } from '../guard/claim.ts';
import { type FieldManagerGuard, type FieldManagerTaken, guardFor, type GuardOptions } from '../guard/guard.ts';
import { whoAmI } from '../kube/access.ts';
import { LeaseApi } from '../kube/lease.ts';
import { ClusterOwner } from '../kube/owner.ts';
import { PolicyApplier } from '../policies/applier.ts';
import { PolicyStore } from '../policies/store.ts';
import { ReportStore } from '../reports/store.ts';
import { ReportWriter } from '../reports/writer.ts';
import { LeaseMemory, type MemoryKey, memoryLeaseName } from '../sources/memory.ts';
import type { Ending, Host, Started, StartOptions } from './host.ts';

export interface LabelOptions {
  /** The field-manager guard (off with --dry-run, which writes nothing). */
  readonly guard: Omit<GuardOptions, 'log'> & { readonly identity: string; readonly shardGroup?: string | undefined };
  /** The config file, when there is one: its changes are applied live. */
  readonly configFile?: ConfigFile | undefined;
  /** Keep the config's admission policies applied (--admission-policies); the guard's claim covers them. */
  readonly admissionPolicies: boolean;
  /** What they depend on (--admission-policies-owner): the garbage collector removes them with it. */
  readonly admissionPoliciesOwner?: string | undefined;
  /** Keep PolicyReports of what is not as the config wants (--policy-reports). */
  readonly policyReports?: boolean | undefined;
  /** What they depend on (--policy-reports-owner): the garbage collector removes them with it. */
  readonly policyReportsOwner?: string | undefined;
  /** The secret the sources' memory keys its samples with (--sources-memory-key-file); none: key counts only. */
  readonly sourcesMemoryKey?: MemoryKey | undefined;
}

/** This process's field-manager guard, for the commands that write (none with --dry-run, which writes nothing). */
export function writerGuard(host: Host, options: Pick<LabelOptions, 'guard'>): FieldManagerGuard | undefined {
  return host.options.dryRun ? undefined : guardFor(host.client, { ...host.options, guard: options.guard }, host.log);
}

/**
 * What a command that writes starts with: the claim hook of `guard` (before a config takes
 * effect, refuse to fight a labeller of another config under this field manager) and the sources'
 * memory beside the guard's Lease, written while the guard allows writes.
 */
export function writerStart(
  host: Host,
  options: Pick<LabelOptions, 'guard' | 'admissionPolicies' | 'sourcesMemoryKey'>,
  guard: FieldManagerGuard | undefined,
): Pick<StartOptions, 'claim' | 'sourceMemory'> {
  if (!guard) return {};
  const { fieldManager, leaderElection } = host.options;
  return {
    claim: (config, kinds, signal) => guard.claim(claimOf(config, kinds, options.admissionPolicies), signal),
    sourceMemory: new LeaseMemory(new LeaseApi(host.client), {
      namespace: options.guard.namespace,
      name: memoryLeaseName(fieldManager, leaderElection?.name),
      key: options.sourcesMemoryKey,
      writable: (signal) => guard.writable(signal),
      log: host.log,
    }),
  };
}

/** Runs until shutdown; throws FieldManagerTaken when another config took the field manager meanwhile. */
export async function runLabel(host: Host, config: Config, options: LabelOptions): Promise<Ending> {
  const { discovery, metrics, events, log, shutdown, counts } = host;
  const guard = writerGuard(host, options);
  const started = await host.start(config, {
    verbs: ['list', 'watch', 'patch'],
    ...writerStart(host, options, guard),
    reload: options.configFile?.path,
    // Not while the guard's Lease has lapsed: another config may have started meanwhile.
    writable: guard && ((signal) => guard.writable(signal)),
    claimed: guard && (() => guard.holds() ? undefined : "the field-manager guard's Lease is not held"),
  });
  if (!started) return 'stopped';
  const { manager, kinds } = started;
  if (!options.admissionPolicies && protectsKeys(config)) {
    log.warn(
      'the config protects keys, but without --admission-policies no policy enforces it: the controller takes protected keys back, and the API server refuses no change of them',
    );
  }
  const policies = options.admissionPolicies
    ? keepPolicies(host, started, guard, options.admissionPoliciesOwner)
    : undefined;
  const reports = options.policyReports ? keepReports(host, started, guard, options.policyReportsOwner) : undefined;
  let taken: FieldManagerTaken | undefined;
  if (guard) {
    // Held while this process may write, and until everything has drained, so other labellers see it.
    manager.whileWriting((writes) =>
      guard.hold(writes, (error) => {
        taken = error;
        shutdown.stop('field manager taken');
      })
    );
  }
  const stopDiscovery = new AbortController();
  const refreshing = discovery.run(stopDiscovery.signal);
  try {
    const following = options.configFile && followConfigFile(options.configFile, {
      apply: async (next, signal) => {
        const change = await kinds.apply(next, signal);
        policies?.changed();
        reports?.changed();
        return change;
      },
      metrics,
      rejected: events && ((message) => events.configRejected(message)),
      log,
    }, shutdown.intake);
    const stop = await manager.run();
    await following;
    log.info('stopped', counts);
    // Another config started at the same moment and holds the field manager since before: exit 2.
    if (taken) throw taken;
    return stop;
  } finally {
    stopDiscovery.abort();
    await refreshing;
  }
}

/** The applier of the config's admission policies, run while this process may write, its state in the gauges and /readyz. */
function keepPolicies(
  host: Host,
  { manager, kinds, shard, claimed }: Started,
  guard: FieldManagerGuard | undefined,
  owner: string | undefined,
): PolicyApplier {
  const { client, options, discovery, events, metrics, log } = host;
  const policies = new PolicyApplier({
    store: new PolicyStore(client, options.fieldManager),
    discovery,
    config: () => kinds.config,
    dryRun: options.dryRun,
    writable: guard && ((signal) => guard.writable(signal)),
    claimed,
    shard,
    events,
    resyncMs: options.requeueAfterMs,
    identity: (signal) => whoAmI(client, signal),
    owner: owner === undefined ? undefined : new ClusterOwner(client, discovery, owner, {
      what: 'policies',
      done: 'applied',
      chartValue: 'admissionPolicies.enabled',
    }),
    // Nobody takes over from this process, and nothing else removes them.
    removeOnStop: owner === undefined && !options.leaderElection && !shard,
    log: log.child({ component: 'admission-policies' }),
  });
  manager.whileLeading((stop, writes) => policies.run(stop, writes));
  metrics.admissionPolicies(() => policies.counts());
  host.addNotes(() => policies.notes());
  return policies;
}

/** The writer of the PolicyReports, run while this process may write. */
function keepReports(
  host: Host,
  { manager, kinds, shard, claimed }: Started,
  guard: FieldManagerGuard | undefined,
  owner: string | undefined,
): ReportWriter {
  const { client, discovery, options, log } = host;
  const reports = new ReportWriter({
    store: new ReportStore(client, options.fieldManager),
    kinds: () => kinds.kinds,
    fieldManager: options.fieldManager,
    dryRun: options.dryRun,
    writable: guard && ((signal) => guard.writable(signal)),
    claimed,
    shard,
    owner: owner === undefined ? undefined : new ClusterOwner(client, discovery, owner, {
      what: 'policy reports',
      done: 'written',
      chartValue: 'policyReports.enabled',
    }),
    log: log.child({ component: 'policy-reports' }),
  });
  manager.whileLeading((stop, writes) => reports.run(stop, writes));
  host.addNotes(() => reports.notes());
  host.metrics.policyReports(() => reports.counts());
  return reports;
}
