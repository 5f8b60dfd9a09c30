// Which resources the API server serves: aggregated discovery (two requests, GA since 1.30),
// with a fallback to the per-group-version documents of older servers.
import type { KubeClient } from './client.ts';
import type { ApiResource } from './resource.ts';

const ACCEPT_AGGREGATED =
  'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json';

interface GroupDiscoveryList {
  readonly kind?: string;
  readonly items: readonly {
    readonly metadata?: { readonly name?: string };
    readonly versions?: readonly {
      readonly version: string;
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

/** Every top-level resource (no subresources) of every served group version. */
export async function discover(client: KubeClient, signal?: AbortSignal): Promise<ApiResource[]> {
  const [core, groups] = await Promise.all(
    ['/api', '/apis'].map((path) => client.json<GroupDiscoveryList | { kind?: string }>('GET', path, { headers: { accept: ACCEPT_AGGREGATED }, signal })),
  );
  if (isAggregated(core) && isAggregated(groups)) return [...fromAggregated(core), ...fromAggregated(groups)];
  return legacy(client, groups as GroupList, signal);
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
      })),
    ),
  );
}

async function legacy(client: KubeClient, groups: GroupList, signal: AbortSignal | undefined): Promise<ApiResource[]> {
  const versions = [
    { group: '', version: 'v1', path: '/api/v1', preferred: true },
    ...groups.groups.flatMap((g) =>
      g.versions.map((v) => ({
        group: g.name,
        version: v.version,
        path: `/apis/${g.name}/${v.version}`,
        preferred: (g.preferredVersion?.version ?? g.versions[0]?.version) === v.version,
      })),
    ),
  ];
  const lists = await Promise.all(versions.map((v) => client.json<ResourceList>('GET', v.path, { signal })));
  return lists.flatMap((list, i) => {
    const { group, version, preferred } = versions[i]!;
    return list.resources
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
}
