// What the admission policies match: one target per kind entry (its resource, namespaces and
// selector), and for the every-kind entry one per scope, every resource but those it leaves out.
// The mutating policies match targets at CREATE (policy.ts), the protecting ones at UPDATE
// (protection.ts); each names its policies after its target.
import type { EveryKindConfig, KindConfig } from '../config/model.ts';
import type { OwnerReference } from '../apimachinery/objects.ts';
import { type ApiResource, groupResource } from '../apimachinery/resource.ts';
import type { LabelSelector } from '../apimachinery/selector.ts';

export const API_VERSION = 'admissionregistration.k8s.io/v1';
/** The label the API server gives every namespace, its name: what `namespaces` selects on. */
const NAMESPACE_NAME = 'kubernetes.io/metadata.name';

/** The operation a policy acts on. */
export type Operation = 'CREATE' | 'UPDATE';

/** A kind entry named in the config, resolved through discovery. */
export interface AdmissionKind {
  readonly kind: KindConfig;
  readonly resource: ApiResource;
}

/** The every-kind entry, and what it leaves out. */
export interface EveryKindAdmission {
  readonly every: EveryKindConfig;
  /**
   * The resources it leaves out: the default and configured exclusions, the kinds named in the
   * config, and those it could never label (discovery serves them without list, watch or patch).
   */
  readonly excluded: readonly Pick<ApiResource, 'group' | 'resource'>[];
}

export interface ObjectMeta {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  /** What the policies depend on, when they have an owner (kube/owner.ts); never rendered here. */
  readonly ownerReferences?: readonly OwnerReference[];
}

export interface ResourceRule {
  readonly apiGroups: readonly string[];
  readonly apiVersions: readonly string[];
  readonly operations: readonly string[];
  readonly resources: readonly string[];
  readonly scope?: 'Namespaced' | 'Cluster' | '*';
}

export interface MatchResources {
  readonly resourceRules: readonly ResourceRule[];
  readonly excludeResourceRules?: readonly ResourceRule[];
  readonly namespaceSelector?: LabelSelector;
  readonly objectSelector?: LabelSelector;
  readonly matchPolicy: 'Equivalent';
}

/** One entry as its policies match it: a kind named (its resource known), or the every-kind entry (any resource of a scope). */
export interface Target {
  readonly kind: KindConfig;
  readonly resource: ApiResource | undefined;
  /** Its part of the policies' names. */
  readonly name: readonly string[];
  readonly match: MatchResources;
}

/** The targets of the entries named in the config, then of the every-kind entry, matching `operation`. */
export function targetsOf(
  kinds: readonly AdmissionKind[],
  everyKind: EveryKindAdmission | undefined,
  operation: Operation,
): Target[] {
  return [...kinds.map((kind) => kindTarget(kind, kinds, operation)), ...everyKindTargets(everyKind, operation)];
}

function kindTarget({ kind, resource }: AdmissionKind, all: readonly AdmissionKind[], operation: Operation): Target {
  const namespaces = resource.namespaced ? [...kind.namespaces].sort() : [];
  // Two entries of one resource have namespaces that do not overlap (the config's rule): the first of each tells them apart.
  const shared = all.filter((other) => groupResource(other.resource) === groupResource(resource)).length > 1;
  return {
    kind,
    resource,
    name: [groupResource(resource), ...(shared && namespaces[0] !== undefined ? [namespaces[0]] : [])],
    match: matching(
      [{
        apiGroups: [resource.group],
        apiVersions: [resource.version],
        operations: [operation],
        resources: [resource.resource],
      }],
      namespaces,
      kind,
    ),
  };
}

/**
 * The every-kind entry matches every resource of its scope, but those it leaves out, so kinds
 * served later (a CRD installed) are matched too, as the controller labels them. With scope
 * `all` and namespaces, the namespaced resources and the cluster-scoped ones get a policy each:
 * a namespace selector would match a Namespace by its own labels.
 */
function everyKindTargets(input: EveryKindAdmission | undefined, operation: Operation): Target[] {
  if (input === undefined) return [];
  const { every, excluded } = input;
  const byGroup = new Map<string, string[]>();
  for (const { group, resource } of excluded) byGroup.set(group, [...(byGroup.get(group) ?? []), resource]);
  const excludeResourceRules = [...byGroup].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map((
    [group, resources],
  ) => ({
    apiGroups: [group],
    apiVersions: ['*'],
    operations: [operation],
    resources: [...new Set(resources)].sort(),
  }));
  const target = (
    scope: NonNullable<ResourceRule['scope']>,
    namespaces: readonly string[],
    name: readonly string[],
  ): Target => ({
    kind: every.kind,
    resource: undefined,
    name: ['every-kind', ...name],
    match: {
      ...matching(
        [{ apiGroups: ['*'], apiVersions: ['*'], operations: [operation], resources: ['*'], scope }],
        namespaces,
        every.kind,
      ),
      ...(excludeResourceRules.length > 0 ? { excludeResourceRules } : {}),
    },
  });
  const namespaces = [...every.kind.namespaces].sort();
  if (every.scope === 'cluster') return [target('Cluster', [], [])];
  if (every.scope === 'namespaced') return [target('Namespaced', namespaces, [])];
  return namespaces.length === 0
    ? [target('*', [], [])]
    : [target('Namespaced', namespaces, ['namespaced']), target('Cluster', [], ['cluster'])];
}

/** What a policy matches: `rules`, in `namespaces` (all when empty), the objects the kind's selector selects. */
function matching(rules: readonly ResourceRule[], namespaces: readonly string[], kind: KindConfig): MatchResources {
  const selector = kind.selector?.toLabelSelector();
  return {
    resourceRules: rules,
    ...(namespaces.length > 0
      ? { namespaceSelector: { matchExpressions: [{ key: NAMESPACE_NAME, operator: 'In', values: namespaces }] } }
      : {}),
    ...(selector && selector.matchExpressions.length > 0 ? { objectSelector: selector } : {}),
    matchPolicy: 'Equivalent',
  };
}
