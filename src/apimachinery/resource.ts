/** A resource the API server serves, as discovery describes it: one entry per group, version and resource. */
export interface ApiResource {
  /** API group; '' for the core group. */
  readonly group: string;
  readonly version: string;
  /** Plural name used in URLs, e.g. 'deployments'. */
  readonly resource: string;
  readonly singular: string;
  readonly kind: string;
  readonly shortNames: readonly string[];
  readonly namespaced: boolean;
  readonly verbs: readonly string[];
  /** Whether version is the group's preferred version. */
  readonly preferred: boolean;
}

/** The apiVersion objects of this resource carry: 'v1' for the core group, 'apps/v1' otherwise. */
export function apiVersion(r: Pick<ApiResource, 'group' | 'version'>): string {
  return r.group === '' ? r.version : `${r.group}/${r.version}`;
}

/** The resource as kubectl and RBAC name it, without version: 'services', 'deployments.apps'. */
export function groupResource(r: Pick<ApiResource, 'group' | 'resource'>): string {
  return r.group === '' ? r.resource : `${r.resource}.${r.group}`;
}

/** What groupResource wrote, read back: 'deployments.apps' → {resource: 'deployments', group: 'apps'}. */
export function parseGroupResource(name: string): Pick<ApiResource, 'group' | 'resource'> {
  const dot = name.indexOf('.');
  return dot === -1 ? { resource: name, group: '' } : { resource: name.slice(0, dot), group: name.slice(dot + 1) };
}
