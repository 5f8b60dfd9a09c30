// `labeller prune`: the kinds to clean up, each with no desired labels and no selector, so the
// label reconciler's one apply per object that carries labeller's labels hands back exactly the
// keys labeller's field manager owns (an empty apply under that manager, with the uid guard);
// keys another manager also owns stay, as server-side apply decides. Objects labeller owns
// nothing on get no request.
import type { DiscoveryCache } from '../kube/discoverycache.ts';
import { everyResource } from '../kube/resolve.ts';
import { groupResource } from '../kube/resource.ts';
import type { Config, KindConfig } from '../config/model.ts';
import type { Logger } from '../util/log.ts';
import type { Ending, Host } from './host.ts';
import { runOnce } from './once.ts';

/**
 * What to prune: the configured kinds, or (`--all-kinds`) every listable and patchable kind
 * discovery serves, only namespaced ones in `namespaces` when some are given.
 */
export type PruneTarget =
  | { readonly allKinds: false; readonly config: Config }
  | { readonly allKinds: true; readonly namespaces: readonly string[] };

export function runPrune(host: Host, target: PruneTarget): Promise<Ending> {
  return runOnce(host, pruneConfig(target, host.discovery, host.log));
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
  return { kinds, ownerKinds: [], sources: new Map() };
}
