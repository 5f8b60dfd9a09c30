// Which resources the API server serves: aggregated discovery (two requests, GA since 1.30),
// with a fallback to the per-group-version documents of older servers. As in kubectl, a group
// version that does not answer (an aggregated API server that is down) is reported, and the
// groups that did answer are used.
import type { KubeClient } from './client.ts';
import type { ApiResource } from '../apimachinery/resource.ts';

/** What discovery found: the resources served, and the group versions that could not be read. */
export interface Discovery {
  readonly resources: readonly ApiResource[];
  /** Their resources are missing from `resources` (or may be stale): ask again later. */
  readonly failedGroups: readonly FailedGroup[];
}

export interface FailedGroup {
  /** `group/version`, e.g. `metrics.k8s.io/v1beta1`. */
  readonly groupVersion: string;
  readonly error: Error;
}

/** A group version the aggregated document marks stale: its API server has not answered lately. */
export class StaleGroupError extends Error {
  override readonly name = 'StaleGroupError';

  constructor(groupVersion: string) {
    super(
      `the API server could not reach the service behind ${groupVersion} (discovery marks it stale); its APIService is probably unavailable: see kubectl get apiservice`,
    );
  }
}

const ACCEPT_AGGREGATED =
  'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json';

interface GroupDiscoveryList {
  readonly kind?: string;
  readonly items: readonly {
    readonly metadata?: { readonly name?: string };
    readonly versions?: readonly {
      readonly version: string;
      /** "Stale" when the aggregated API server behind it did not answer. */
      readonly freshness?: 'Current' | 'Stale';
      readonly resources?: readonly {
        readonly resource: string;
        readonly singularResource?: string;
        readonly responseKind?: { readonly kind?: string };
        readonly scope?: 'Namespaced' | 'Cluster';
        readonly verbs?: readonly string[];
        readonly shortNames?: readonly string[];
      }[];
    }[];
  }[];
}

interface ResourceList {
  readonly resources: readonly {
    readonly name: string;
    readonly singularName?: string;
    readonly kind: string;
    readonly namespaced: boolean;
    readonly verbs?: readonly string[];
    readonly shortNames?: readonly string[];
  }[];
}

interface GroupList {
  readonly groups: readonly {
    readonly name: string;
    readonly versions: readonly { readonly version: string }[];
    readonly preferredVersion?: { readonly version: string };
  }[];
}

/**
 * Every top-level resource (no subresources) of every served group version. Rejects only when the
 * group lists or the core group cannot be read; other group versions that fail are reported.
 */
export async function discover(client: KubeClient, signal?: AbortSignal): Promise<Discovery> {
  const [core, groups] = await Promise.all(
    ['/api', '/apis'].map((path) =>
      client.json<GroupDiscoveryList | { kind?: string }>('GET', path, {
        headers: { accept: ACCEPT_AGGREGATED },
        signal,
      })
    ),
  );
  if (isAggregated(core) && isAggregated(groups)) {
    const lists = [core, groups];
    return {
      resources: lists.flatMap(fromAggregated),
      failedGroups: lists.flatMap((list) =>
        list.items.flatMap((group) =>
          (group.versions ?? []).filter((v) => v.freshness === 'Stale').map((v) => {
            const groupVersion = `${group.metadata?.name ?? ''}/${v.version}`;
            return { groupVersion, error: new StaleGroupError(groupVersion) };
          })
        )
      ),
    };
  }
  return discoverByGroupVersion(client, signal, groups as GroupList);
}

function isAggregated(doc: object | undefined): doc is GroupDiscoveryList {
  return (doc as { kind?: string } | undefined)?.kind === 'APIGroupDiscoveryList';
}

function fromAggregated(list: GroupDiscoveryList): ApiResource[] {
  return list.items.flatMap((group) =>
    (group.versions ?? []).flatMap((version, index) =>
      (version.resources ?? []).map((r) => ({
        group: group.metadata?.name ?? '',
        version: version.version,
        resource: r.resource,
        singular: r.singularResource ?? '',
        kind: r.responseKind?.kind ?? '',
        shortNames: r.shortNames ?? [],
        namespaced: r.scope === 'Namespaced',
        verbs: r.verbs ?? [],
        // Versions are listed in the server's order of preference.
        preferred: index === 0,
      }))
    )
  );
}

/**
 * Discovery as servers before aggregated discovery serve it: one request per group version
 * (`groups`, the `/apis` list, is fetched when not given). A group version that fails is
 * reported, unless it is the core group's.
 */
export async function discoverByGroupVersion(
  client: KubeClient,
  signal?: AbortSignal,
  groups?: GroupList,
): Promise<Discovery> {
  groups ??= await client.json<GroupList>('GET', '/apis', { signal });
  const versions = [
    { group: '', version: 'v1', path: '/api/v1', preferred: true },
    ...groups.groups.flatMap((g) =>
      g.versions.map((v) => ({
        group: g.name,
        version: v.version,
        path: `/apis/${g.name}/${v.version}`,
        preferred: (g.preferredVersion?.version ?? g.versions[0]?.version) === v.version,
      }))
    ),
  ];
  const answers = await Promise.allSettled(versions.map((v) => client.json<ResourceList>('GET', v.path, { signal })));
  const failedGroups: FailedGroup[] = [];
  const resources = answers.flatMap((answer, i) => {
    const { group, version, preferred } = versions[i]!;
    if (answer.status === 'rejected') {
      // Without the core group nothing works; a stop is no failure of the group.
      if (group === '' || signal?.aborted) throw answer.reason;
      failedGroups.push({
        groupVersion: `${group}/${version}`,
        error: answer.reason instanceof Error ? answer.reason : new Error(String(answer.reason)),
      });
      return [];
    }
    return answer.value.resources
      .filter((r) => !r.name.includes('/'))
      .map((r) => ({
        group,
        version,
        resource: r.name,
        singular: r.singularName || r.kind.toLowerCase(),
        kind: r.kind,
        shortNames: r.shortNames ?? [],
        namespaced: r.namespaced,
        verbs: r.verbs ?? [],
        preferred,
      }));
  });
  return { resources, failedGroups };
}
