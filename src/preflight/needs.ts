// The rights a config needs to run as a controller, from what it runs now: the kinds resolved
// (list, watch, patch where each is watched), the caches of related objects acquired for its
// templates (list, watch; one namespace by name in namespaced mode), its ConfigMap sources, and
// the Leases and Events the controller writes, and its admission policies. Taken from the running kind set rather than
// derived again from the config, so an owner kind followed because an object points at it, or
// a kind of the every-kind entry, is asked about as it is used.
import { MUTATING, VALIDATING } from '../admission/resources.ts';
import type { SourceSpec } from '../config/sources.ts';
import { type ApiResource, groupResource } from '../apimachinery/resource.ts';
import type { RelatedRead } from '../related/caches.ts';

/** Verbs on one resource in one namespace ('' for cluster-wide), of one object when `name` is set. */
export interface Need {
  readonly group: string;
  /** The plural: `deployments`. */
  readonly resource: string;
  readonly verbs: readonly string[];
  readonly namespace: string;
  /** RBAC may grant it by resourceNames. */
  readonly name?: string | undefined;
  /** What needs it, for people: `kind deployments.apps`, `source catalog`, `leader election`. */
  readonly for: string;
}

export interface NeedsInput {
  /** The kinds running, each with the namespaces it watches ('' for all). */
  readonly kinds: readonly {
    readonly resource: Pick<ApiResource, 'group' | 'resource'>;
    readonly namespaces: readonly string[];
  }[];
  readonly related: readonly RelatedRead[];
  readonly sources: Iterable<SourceSpec>;
  /** Whether labeller writes Events (--events). */
  readonly events: boolean;
  /** The namespace labeller's own Leases live in. */
  readonly leaseNamespace: string;
  /** The leader-election Lease's name, when several replicas elect one. */
  readonly leaderElection: string | undefined;
  /** The shard group's name, when replicas share the work (--shards auto). */
  readonly shardGroup: string | undefined;
  /** The field-manager guard's Lease name when it is known before it runs (per leader-election group); undefined when the guard is off. */
  readonly guard: { readonly name: string | undefined } | undefined;
  /** The sources' memory Lease, when there are sources. */
  readonly sourceMemory: string | undefined;
  /** With --admission-policies, where the API server serves them: which, and whether a policy reads a ConfigMap as its params. */
  readonly admissionPolicies?: AdmissionPolicyNeeds | undefined;
  /** --policy-reports: labeller keeps a PolicyReport per namespace and a ClusterPolicyReport. */
  readonly policyReports?: boolean | undefined;
}

/** What keeping the admission policies needs: the mutating ones, where served; the protecting ones, where the config protects keys. */
export interface AdmissionPolicyNeeds {
  readonly mutating: boolean;
  readonly protection: boolean;
  /** A mutating policy reads a ConfigMap as its params. */
  readonly params: boolean;
}

const LABEL = ['list', 'watch', 'patch'];
const READ = ['list', 'watch'];
const LEASE_GROUP = 'coordination.k8s.io';

export function needsOf(input: NeedsInput): Need[] {
  const needs: Need[] = [];
  const where = new Set<string>();
  for (const { resource, namespaces } of input.kinds) {
    const kind = `kind ${groupResource(resource)}`;
    for (const namespace of namespaces) {
      where.add(namespace);
      needs.push({ group: resource.group, resource: resource.resource, verbs: LABEL, namespace, for: kind });
    }
  }
  for (const { resource, namespace, name } of input.related) {
    needs.push({
      group: resource.group,
      resource: resource.resource,
      verbs: READ,
      namespace,
      name,
      for: `templates read ${groupResource(resource)}`,
    });
  }
  for (const source of input.sources) {
    if (source.origin.type !== 'configMap') continue;
    const { namespace, name } = source.origin;
    needs.push({ group: '', resource: 'configmaps', verbs: READ, namespace, name, for: `source ${source.name}` });
  }
  if (input.events) {
    // In each object's namespace; cluster-wide as soon as one kind is watched in all.
    for (const namespace of where.has('') ? [''] : where) {
      needs.push({
        group: 'events.k8s.io',
        resource: 'events',
        verbs: ['create', 'patch'],
        namespace,
        for: 'Events (or --events=false)',
      });
    }
  }
  const lease = (verbs: readonly string[], name: string | undefined, why: string, namespace = input.leaseNamespace) =>
    needs.push({ group: LEASE_GROUP, resource: 'leases', verbs, namespace, name, for: why });
  const own = (name: string | undefined, why: string) => {
    lease(['create'], undefined, why);
    lease(['get', 'update'], name, why);
  };
  if (input.leaderElection !== undefined) own(input.leaderElection, 'leader election');
  // Each member creates and renews a Lease named after its identity (unknown here), lists the
  // group's, and deletes those of members that crashed: no resourceNames can say which.
  if (input.shardGroup !== undefined) {
    const why = `shard group ${input.shardGroup}`;
    lease(['get', 'list', 'create', 'update', 'delete'], undefined, why);
    // Its oldest member cuts the buckets where the namespaces are, listing their names unless
    // every kind is watched in named namespaces (refused, it keeps equal buckets).
    if (input.kinds.some((kind) => kind.namespaces.includes(''))) {
      needs.push({ group: '', resource: 'namespaces', verbs: ['list'], namespace: '', for: `${why} layout` });
    }
  }
  if (input.guard) {
    // It looks for other labellers' Leases everywhere, unless every kind is watched in named
    // namespaces (a namespaced install grants nothing cluster-wide: it looks in its own, and says
    // so); its own it also deletes when it stops.
    const everywhere = input.kinds.some((kind) => kind.namespaces.includes(''));
    lease(['list'], undefined, 'field-manager guard', everywhere ? '' : input.leaseNamespace);
    own(input.guard.name, 'field-manager guard');
    lease(['delete'], input.guard.name, 'field-manager guard');
  }
  if (input.sourceMemory !== undefined) own(input.sourceMemory, "sources' memory");
  if (input.admissionPolicies) {
    // Server-side apply creates what is not there yet (create) and changes the rest (patch); those
    // the config no longer renders are found by their labels and deleted.
    const { mutating, protection } = input.admissionPolicies;
    for (const { group, resource } of [...(mutating ? MUTATING : []), ...(protection ? VALIDATING : [])]) {
      needs.push({
        group,
        resource,
        verbs: ['list', 'create', 'patch', 'delete'],
        namespace: '',
        for: resource.startsWith('validating') ? 'protection' : 'admission policies',
      });
    }
    // The API server lets only who may get every ConfigMap create a policy whose params are one.
    if (input.admissionPolicies.params) {
      needs.push({
        group: '',
        resource: 'configmaps',
        verbs: ['get'],
        namespace: '',
        for: 'admission policies reading a ConfigMap source (paramKind)',
      });
    }
  }
  if (input.policyReports) {
    // Server-side apply creates (create) and changes (patch) them; those already there are listed at
    // start, and deleted once they have nothing to say.
    for (const resource of ['policyreports', 'clusterpolicyreports']) {
      needs.push({
        group: 'wgpolicyk8s.io',
        resource,
        verbs: ['list', 'create', 'patch', 'delete'],
        namespace: '',
        for: 'policy reports',
      });
    }
  }
  return needs;
}
