// `labeller prune`: the kinds to clean up, each with no desired labels and no selector, so the
// label reconciler's one apply per object that carries labeller's labels hands back exactly the
// keys labeller's field manager owns (an empty apply under that manager, with the uid guard);
// keys another manager also owns stay, as server-side apply decides. Objects labeller owns
// nothing on get no request.
import type { DiscoveryCache } from '../kube/discoverycache.ts';
import { everyResource } from '../kube/resolve.ts';
import { groupResource } from '../kube/resource.ts';
import type { Config, KindConfig } from '../labeller/config.ts';
import type { Logger } from '../util/log.ts';

export interface PruneScope {
  /** Every listable and patchable kind from discovery instead of the configured ones. */
  readonly allKinds: boolean;
  /** With allKinds: only namespaced kinds, in these namespaces; empty: everything. */
  readonly namespaces: readonly string[];
}

/** The config prune runs: the configured kinds, or every kind discovery serves, with no labels. */
export function pruneConfig(config: Config, scope: PruneScope, discovery: DiscoveryCache, log: Logger): Config {
  // A selector could have stopped matching objects labeller labelled: prune looks at them all.
  if (!scope.allKinds) {
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
  const namespacedOnly = scope.namespaces.length > 0;
  const resources = everyResource(discovery.resources).filter((resource) => resource.namespaced || !namespacedOnly);
  const kinds = resources.map((resource) => ({
    where: `--all-kinds (${groupResource(resource)})`,
    resource: groupResource(resource),
    namespaces: scope.namespaces,
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
