// `labeller prune`: the kinds to clean up, each with no desired labels and no selector, so the
// label reconciler's one apply per object that carries labeller's labels hands back exactly the
// keys labeller's field manager owns (an empty apply under that manager, with the uid guard);
// keys another manager also owns stay, as server-side apply decides. Objects labeller owns
// nothing on get no request.
import type { KubeClient } from '../kube/client.ts';
import { type ApiResource, groupResource } from '../kube/resource.ts';
import type { KindConfig } from '../labeller/config.ts';
import type { Logger } from '../util/log.ts';
import { type Discovered, discoverWithRetry, resolveConfiguredKinds } from './kinds.ts';

export interface PruneScope {
  /** Every listable and patchable kind from discovery instead of the configured ones. */
  readonly allKinds: boolean;
  /** With allKinds: only namespaced kinds, in these namespaces; empty: everything. */
  readonly namespaces: readonly string[];
}

/** The kinds to prune. Undefined when `signal` aborts first. */
export async function pruneTargets(
  client: KubeClient,
  configured: readonly KindConfig[],
  scope: PruneScope,
  log: Logger,
  signal: AbortSignal,
): Promise<Discovered | undefined> {
  // A selector could have stopped matching objects labeller labelled: prune looks at them all.
  if (!scope.allKinds) {
    return resolveConfiguredKinds(
      client,
      configured.map((kind) => ({ ...kind, labels: new Map(), selector: undefined })),
      log,
      signal,
    );
  }
  const discovery = await discoverWithRetry(client, log, signal).catch((error: unknown) => {
    if (signal.aborted) return undefined;
    throw error;
  });
  if (!discovery) return undefined;
  for (const { groupVersion, error } of discovery.failedGroups) {
    log.warn('API group not discovered; its kinds are not pruned', { groupVersion, error });
  }
  const resolved = prunable(discovery.resources, scope.namespaces.length > 0).map((resource) => ({
    kind: {
      resource: groupResource(resource),
      namespaces: scope.namespaces,
      selector: undefined,
      labels: new Map(),
      conflicts: 'force' as const,
    },
    resource,
  }));
  log.info('pruning every listable and patchable kind', { kinds: resolved.length });
  return { resolved, unknown: [], resources: discovery.resources };
}

/** One version of each resource that can be listed and patched (the preferred one when it serves it). */
export function prunable(resources: readonly ApiResource[], namespacedOnly: boolean): ApiResource[] {
  const chosen = new Map<string, ApiResource>();
  for (const resource of resources) {
    if (
      !resource.verbs.includes('list') || !resource.verbs.includes('patch') || (namespacedOnly && !resource.namespaced)
    ) continue;
    const key = groupResource(resource);
    if (!chosen.has(key) || resource.preferred) chosen.set(key, resource);
  }
  return [...chosen.values()];
}
