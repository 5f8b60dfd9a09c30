// `labeller prune`: the kinds to clean up, each with no desired labels and no selector, so the
// label reconciler's one apply per object that carries labeller's labels hands back exactly the
// keys labeller's field manager owns (an empty apply under that manager, with the uid guard);
// keys another manager also owns stay, as server-side apply decides. Objects labeller owns
// nothing on get no request. For a sharded controller (--shards auto) it first waits until no
// member of the group holds its Lease, as with --leader-elect it waits to hold the leader's.
// Before it unlabels anything, it deletes the field manager's admission policies and bindings,
// whether or not it was given --admission-policies: a prune cleans up what an earlier run left,
// and an object created meanwhile must not get keys nobody then removes. Without the flag, a
// server that does not serve them, or rights to find them it lacks, are no failure.
import { policySelector } from '../admission/names.ts';
import { isProtecting, POLICY_RESOURCES, serves } from '../admission/resources.ts';
import type { DiscoveryCache } from '../kube/discoverycache.ts';
import { isForbidden } from '../apimachinery/errors.ts';
import { LeaseApi } from '../kube/lease.ts';
import { everyResource } from '../apimachinery/resolve.ts';
import { groupResource } from '../apimachinery/resource.ts';
import type { Config, KindConfig } from '../config/model.ts';
import { type MonotonicClock, monotonicClock } from '../lease/clock.ts';
import { LeaseObserver } from '../lease/observer.ts';
import { GROUP_LABEL } from '../shard/membership.ts';
import { type PolicyObject, PolicyStore } from '../policies/store.ts';
import type { Logger } from '../util/log.ts';
import { sleep } from '../util/sleep.ts';
import type { Ending, Host } from './host.ts';
import { runOnce } from './once.ts';

/**
 * What to prune: the configured kinds, or (`--all-kinds`) every listable and patchable kind
 * discovery serves, only namespaced ones in `namespaces` when some are given.
 */
export type PruneTarget =
  | { readonly allKinds: false; readonly config: Config }
  | { readonly allKinds: true; readonly namespaces: readonly string[] };

export async function runPrune(
  host: Host,
  target: PruneTarget,
  options: { readonly admissionPolicies: boolean },
): Promise<Ending> {
  const { sharding, dryRun } = host.options;
  if (sharding) {
    const gone = await shardGroupGone(new LeaseApi(host.client), {
      ...sharding,
      deleteLeft: !dryRun,
      log: host.log,
    }, host.shutdown.intake);
    if (!gone) return 'stopped';
  }
  // The policies first, once no controller puts them back (after the leader's Lease, or the
  // shard group's, is free): an object created while the labels are removed gets none to keep.
  return await runOnce(host, pruneConfig(target, host.discovery, host.log), {
    first: () => prunePolicies(host, options.admissionPolicies),
  });
}

/** How long the API server may take to stop enforcing a policy deleted (its informer's delay, with a margin). */
const POLICY_GONE_MS = 2_000;

/** Deletes the field manager's admission policies and bindings; false when that failed (`required`: --admission-policies). */
async function prunePolicies(host: Host, required: boolean): Promise<boolean> {
  const { client, discovery, options, log, shutdown } = host;
  const served = (kind: PolicyObject['kind']) => serves(discovery.resources, kind);
  if (!POLICY_RESOURCES.some((resource) => served(resource.kind as PolicyObject['kind']))) {
    if (required) log.info('no admission policies to remove: the API server does not serve them');
    return true;
  }
  try {
    const deleted = await new PolicyStore(client, options.fieldManager).prune(new Set(), {
      // Whether an earlier run protected keys is not known: protecting policies it may not list, it had none.
      kinds: { served, optional: isProtecting },
      dryRun: options.dryRun,
      why: 'prune',
      log,
      signal: shutdown.intake,
    });
    // The API server's admission plugin learns of a deleted policy from its informer, a moment
    // after the delete: a protecting one would refuse the first removals of an identity that is
    // not the controller's (the chart's cleanup Job) until then.
    if (!options.dryRun && deleted.some((object) => isProtecting(object.kind))) {
      await sleep(POLICY_GONE_MS, shutdown.intake).catch(() => {});
    }
    return true;
  } catch (error) {
    if (isForbidden(error) && !required) {
      log.info(
        `may not list admission policies: any an earlier run with --admission-policies left stay; grant list and delete on them, or delete them: kubectl delete ${
          POLICY_RESOURCES.map((r) => r.resource).join(',')
        } -l ${policySelector(options.fieldManager)}`,
        { error },
      );
      return true;
    }
    if (shutdown.intake.aborted) return false;
    log.error('cannot remove the admission policies', { error });
    return false;
  }
}

export interface ShardGroupWait {
  readonly group: string;
  /** Where the member Leases live. */
  readonly namespace: string;
  /** How often to look. */
  readonly retryPeriodMs: number;
  /** Delete the Leases left behind once none is held (not in a dry run). */
  readonly deleteLeft: boolean;
  readonly log: Logger;
  readonly clock?: MonotonicClock | undefined;
}

/**
 * Waits until no member of the shard group holds its Lease; true then, false if `signal` came
 * first. A member writes only while its own Lease is valid, and stops renewing it once it stops
 * (it deletes it) or may no longer write it (`helm uninstall` deletes the release's RBAC before
 * the pods get SIGTERM, so they leave their Leases behind). A Lease is judged as the members
 * judge each other's (lease/observer.ts). Those left are then deleted at the version judged
 * expired (a renewal that slipped in keeps its Lease, and it is waited for again), so nothing of
 * the group stays behind.
 */
export async function shardGroupGone(
  api: Pick<LeaseApi, 'list' | 'delete'>,
  wait: ShardGroupWait,
  signal: AbortSignal,
): Promise<boolean> {
  const { group, namespace, retryPeriodMs, deleteLeft, log, clock = monotonicClock } = wait;
  const liveness = new LeaseObserver(clock);
  let told = false;
  while (!signal.aborted) {
    const sent = clock.now();
    const leases = await api.list(namespace, `${GROUP_LABEL}=${group}`, signal);
    const { held } = liveness.observe(leases, sent);
    if (held.length === 0) {
      if (!deleteLeft || leases.length === 0) {
        if (told) log.info('shard group stopped', { group });
        return true;
      }
      try {
        for (const lease of leases) await api.delete(lease, signal);
      } catch (error) {
        if (!isForbidden(error)) throw error;
        log.warn('the Leases the shard group left cannot be deleted; they stay until its next member deletes them', {
          group,
          namespace,
          leases: leases.map((lease) => lease.metadata.name),
          error,
        });
        return true;
      }
      log.info('deleted the Leases the shard group left', { group, namespace, leases: leases.length });
      continue;
    }
    if (!told) {
      log.info('waiting until no member of the shard group holds its Lease', {
        group,
        namespace,
        members: held.map((lease) => lease.spec.holderIdentity ?? lease.metadata.name),
      });
      told = true;
    }
    await clock.sleep(retryPeriodMs, signal);
  }
  return false;
}

/** The config prune runs: the target's kinds with no labels. */
export function pruneConfig(target: PruneTarget, discovery: DiscoveryCache, log: Logger): Config {
  // A selector could have stopped matching objects labeller labelled: prune looks at them all.
  if (!target.allKinds) {
    const { config } = target;
    const unlabelled = (kind: KindConfig): KindConfig => ({
      ...kind,
      labels: new Map(),
      annotations: new Map(),
      selector: undefined,
    });
    const every = config.everyKind;
    return {
      ...config,
      sources: new Map(),
      kinds: config.kinds.map(unlabelled),
      everyKind: every && { ...every, kind: unlabelled(every.kind) },
    };
  }
  const namespacedOnly = target.namespaces.length > 0;
  const resources = everyResource(discovery.resources).filter((resource) => resource.namespaced || !namespacedOnly);
  const kinds = resources.map((resource) => ({
    where: `--all-kinds (${groupResource(resource)})`,
    resource: groupResource(resource),
    namespaces: target.namespaces,
    selector: undefined,
    labels: new Map(),
    annotations: new Map(),
    conflicts: 'force' as const,
  }));
  for (const { groupVersion, error } of discovery.discovery.failedGroups) {
    log.warn('API group not discovered; its kinds are not pruned', { groupVersion, error });
  }
  log.info('pruning every listable and patchable kind', { kinds: kinds.length });
  return { kinds, ownerKinds: [], sources: new Map(), references: new Map() };
}
