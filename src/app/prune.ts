// `labeller prune`: the kinds to clean up, each with no desired labels and no selector, so the
// label reconciler's one apply per object that carries labeller's labels hands back exactly the
// keys labeller's field manager owns (an empty apply under that manager, with the uid guard);
// keys another manager also owns stay, as server-side apply decides. Objects labeller owns
// nothing on get no request.
import type { DiscoveryCache } from '../kube/discoverycache.ts';
import { type ApiResource, groupResource } from '../kube/resource.ts';
import type { Config } from '../labeller/config.ts';
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
    return {
      ...config,
      sources: new Map(),
      kinds: config.kinds.map((kind) => ({ ...kind, labels: new Map(), annotations: new Map(), selector: undefined })),
    };
  }
  const kinds = prunable(discovery.resources, scope.namespaces.length > 0).map((resource) => ({
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

/** One version of each resource that can be listed, watched and patched (the preferred one when it serves it). */
export function prunable(resources: readonly ApiResource[], namespacedOnly: boolean): ApiResource[] {
  const chosen = new Map<string, ApiResource>();
  for (const resource of resources) {
    if (
      !['list', 'watch', 'patch'].every((verb) => resource.verbs.includes(verb)) ||
      (namespacedOnly && !resource.namespaced)
    ) continue;
    const key = groupResource(resource);
    if (!chosen.has(key) || resource.preferred) chosen.set(key, resource);
  }
  return [...chosen.values()];
}
