// What a labeller claims under a field manager, and how its guard Lease records it: the config's
// fingerprint and the kinds × namespaces it writes, as annotations (the field manager also as a
// label, so holders can be found with a selector). Which live claims of others block one: same
// field manager, another config, an overlapping scope, outside its leader-election group.
import { createHash } from 'node:crypto';
import type { Lease } from '../kube/lease.ts';
import { nameSlug } from '../apimachinery/names.ts';
import { groupResource } from '../apimachinery/resource.ts';
import type { Config } from '../config/model.ts';
import { configFingerprint } from '../config/fingerprint.ts';
import { FIELD_MANAGER_LABEL, fieldManagerLabelValue } from '../config/fieldmanager.ts';
import { watchedNamespaces } from '../kinds/resolve.ts';
import { MUTATING } from '../admission/resources.ts';
import type { Resolved } from '../kinds/resolve.ts';

const PREFIX = 'labeller';
/**
 * As a label, so holders can be found with a selector, the field manager (hashed when it is no
 * label value); as an annotation, the field manager itself.
 */
const FIELD_MANAGER = FIELD_MANAGER_LABEL;
const CONFIG = `${PREFIX}/config`;
const SCOPE = `${PREFIX}/scope`;
const GROUP = `${PREFIX}/leader-election`;
const SHARD_GROUP = `${PREFIX}/shard-group`;

/** Who writes what under a field manager. */
export interface Claim extends ClaimedConfig {
  readonly fieldManager: string;
  /** `namespace/name` of the leader-election Lease, when elected. */
  readonly group?: string | undefined;
  /**
   * `namespace/name` of the shard group, when its members share the work: members never block
   * each other, since each object is written by one member at a time (a reload reaches them one
   * by one, and each writes its own share with its config meanwhile).
   */
  readonly shardGroup?: string | undefined;
  readonly identity: string;
}

/** The config in force, as the guard records it. */
export interface ClaimedConfig {
  /** configFingerprint() of the config. */
  readonly fingerprint: string;
  /** `resource.group@namespace` for each kind and namespace written; `@*` for all namespaces. */
  readonly scope: readonly string[];
}

/**
 * The guard Lease's name: per leader-election group (its Lease's name + `-field-manager`, which
 * the chart's RBAC names; only its leader writes it), or for a standalone process per field
 * manager and process identity (one Lease per holder: nobody else writes it).
 */
export function guardLeaseName(claim: Pick<Claim, 'fieldManager' | 'identity' | 'group'>): string {
  if (claim.group) return `${claim.group.slice(claim.group.indexOf('/') + 1)}-field-manager`;
  const slug = nameSlug(claim.fieldManager, 40);
  return `field-manager-${slug ? `${slug}-` : ''}${hash(`${claim.fieldManager}\n${claim.identity}`).slice(0, 10)}`;
}

/** Of the live guard Leases `held`, those of others that must stop `claim` from writing. */
export function blockers(held: readonly Lease[], claim: Claim): Lease[] {
  return held.filter((lease) => {
    const a = lease.metadata.annotations ?? {};
    if (a[FIELD_MANAGER] !== claim.fieldManager || a[CONFIG] === claim.fingerprint) return false;
    if (lease.spec.holderIdentity === claim.identity) return false;
    if (claim.group && a[GROUP] === claim.group) return false;
    if (claim.shardGroup && a[SHARD_GROUP] === claim.shardGroup) return false;
    return overlap((a[SCOPE] ?? '').split(','), claim.scope).length > 0;
  });
}

/** The kinds and namespaces both scopes write. */
function overlap(a: readonly string[], b: readonly string[]): string[] {
  const split = (entry: string): [string, string] => {
    const at = entry.lastIndexOf('@');
    return [entry.slice(0, at), entry.slice(at + 1)];
  };
  return a.filter((x) => {
    const [resource, namespace] = split(x);
    return b.some((y) => {
      const [r, n] = split(y);
      return r === resource && (namespace === '*' || n === '*' || n === namespace);
    });
  });
}

/** Whether `lease` was created before `mine` (ties broken by namespace and name, so both sides agree). */
export function olderThan(lease: Lease, mine: Lease): boolean {
  const a = Date.parse(lease.metadata.creationTimestamp ?? '');
  const b = Date.parse(mine.metadata.creationTimestamp ?? '');
  if (a !== b) return a < b;
  const id = (l: Lease) => `${l.metadata.namespace ?? ''}/${l.metadata.name}`;
  return id(lease) < id(mine);
}

function hash(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** A holder in words, for the message that refuses to write. */
export function describeHolder(lease: Lease, claim: Claim): string {
  const a = lease.metadata.annotations ?? {};
  const writes = overlap((a[SCOPE] ?? '').split(','), claim.scope).join(', ');
  const group = a[GROUP] ? `, leader election ${a[GROUP]}` : a[SHARD_GROUP] ? `, shard group ${a[SHARD_GROUP]}` : '';
  return `${lease.spec.holderIdentity ?? '?'} (Lease ${
    lease.metadata.namespace ?? ''
  }/${lease.metadata.name}${group}, config ${a[CONFIG] ?? '?'}, renewed at ${
    lease.spec.renewTime ?? '?'
  } by its clock, also writes ${writes})`;
}

/** The labels and annotations of a guard Lease that records `claim`, over those it has. */
export function claimMetadata(
  current: Lease['metadata'] | undefined,
  claim: Claim,
): Pick<Lease['metadata'], 'labels' | 'annotations'> {
  return {
    labels: { ...current?.labels, [FIELD_MANAGER]: fieldManagerLabelValue(claim.fieldManager) },
    annotations: {
      ...current?.annotations,
      [FIELD_MANAGER]: claim.fieldManager,
      [CONFIG]: claim.fingerprint,
      [SCOPE]: claim.scope.join(','),
      [GROUP]: claim.group ?? '',
      ...(claim.shardGroup ? { [SHARD_GROUP]: claim.shardGroup } : {}),
    },
  };
}

/**
 * The claim of a config: its fingerprint, and the kinds × namespaces it writes (kinds not served
 * yet included); with `admissionPolicies`, the field manager's admission policies too, which are
 * named after it, so two configs keeping policies under one field manager always overlap: each
 * would delete the other's as policies its config does not render.
 */
export function claimOf(config: Config, kinds: Resolved, admissionPolicies = false): ClaimedConfig {
  const scope = [
    ...(admissionPolicies ? [`${groupResource(MUTATING[0])}@*`] : []),
    ...kinds.resolved.flatMap(({ kind, resource }) =>
      watchedNamespaces(kind, resource).map((ns) => `${groupResource(resource)}@${ns || '*'}`)
    ),
    ...kinds.unknown.flatMap(({ kind }) =>
      (kind.namespaces.length > 0 ? kind.namespaces : ['*']).map((ns) => `${kind.resource}@${ns}`)
    ),
  ];
  return { fingerprint: configFingerprint(config), scope };
}
