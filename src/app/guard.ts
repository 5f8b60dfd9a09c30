// One config per field manager. Two labellers with different configs under one server-side apply
// field manager remove each other's labels in a hot loop: each apply drops the keys the other
// applied. So a running labeller holds a Lease, labelled with its field manager, that records
// its config's fingerprint and its scope (kinds × namespaces). Before its first write, every
// labeller looks for live holders of its field manager (across namespaces when it may list
// Leases cluster-wide, else in its own namespace) and refuses to write (FieldManagerTaken,
// exit 2) when one has another config and a scope overlapping its own. Replicas of one
// leader-election group never block each other: their Lease already lets one write at a time,
// and a rolling update is how a group changes its config. Holders that stopped renewing expire.
import { createHash } from 'node:crypto';
import { isForbidden } from '../kube/errors.ts';
import type { KubeClient } from '../kube/client.ts';
import { type Lease, LeaseApi } from '../kube/lease.ts';
import { groupResource } from '../kube/resource.ts';
import type { Config } from '../labeller/config.ts';
import { configFingerprint } from '../labeller/fingerprint.ts';
import type { Logger } from '../util/log.ts';
import { sleep } from '../util/sleep.ts';
import { watchedNamespaces } from './controllers.ts';
import type { Resolved } from './kinds.ts';
import { microTime } from '../util/microtime.ts';
import { UsageError } from '../util/usage.ts';

const PREFIX = 'labeller';
/**
 * As a label, so holders can be found with a selector, the field manager (hashed when it is no
 * label value); as an annotation, the field manager itself.
 */
const FIELD_MANAGER = `${PREFIX}/field-manager`;
const CONFIG = `${PREFIX}/config`;
const SCOPE = `${PREFIX}/scope`;
const GROUP = `${PREFIX}/leader-election`;

/** Who writes what under a field manager. */
export interface Claim {
  readonly fieldManager: string;
  /** configFingerprint() of the config. */
  readonly fingerprint: string;
  /** `resource.group@namespace` for each kind and namespace written; `@*` for all namespaces. */
  readonly scope: readonly string[];
  /** `namespace/name` of the leader-election Lease, when elected. */
  readonly group?: string | undefined;
  readonly identity: string;
}

export interface GuardOptions {
  /** Where this process's own guard Lease lives (and where it looks when it may not list cluster-wide). */
  readonly namespace: string;
  readonly leaseDurationMs: number;
  /** --ignore-field-manager-guard: report holders of other configs, write anyway. */
  readonly ignore: boolean;
  readonly log: Logger;
}

/** Another labeller with another config holds the field manager: a usage error (exit 2). */
export class FieldManagerTaken extends UsageError {
  override readonly name: string = 'FieldManagerTaken';
}

/**
 * The guard Lease's name: per leader-election group (its Lease's name + `-field-manager`, which
 * the chart's RBAC names), or for a standalone process per field manager and config (replicas of
 * one config share it; other configs in the same namespace do not overwrite it).
 */
export function guardLeaseName(claim: Pick<Claim, 'fieldManager' | 'fingerprint' | 'group'>): string {
  if (claim.group) return `${claim.group.slice(claim.group.indexOf('/') + 1)}-field-manager`;
  const slug = claim.fieldManager.toLowerCase().replace(/[^a-z0-9-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 40);
  return `field-manager-${slug ? `${slug}-` : ''}${hash(`${claim.fieldManager}\n${claim.fingerprint}`).slice(0, 10)}`;
}

export function fieldManagerLabelValue(fieldManager: string): string {
  return /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$/.test(fieldManager)
    ? fieldManager
    : `sha256-${hash(fieldManager).slice(0, 56)}`;
}

/** The live guard Leases (at `nowMs`, wall clock) that must stop `claim` from writing. */
export function blockers(leases: readonly Lease[], claim: Claim, nowMs: number): Lease[] {
  return leases.filter((lease) => {
    const a = lease.metadata.annotations ?? {};
    if (a[FIELD_MANAGER] !== claim.fieldManager || a[CONFIG] === claim.fingerprint || !live(lease, nowMs)) return false;
    if (claim.group && a[GROUP] === claim.group) return false;
    return overlap((a[SCOPE] ?? '').split(','), claim.scope).length > 0;
  });
}

/** Whose renewal is recent: renewed within its lease duration. Wall clocks, so skew between hosts counts. */
function live(lease: Lease, nowMs: number): boolean {
  const { holderIdentity, renewTime, leaseDurationSeconds } = lease.spec;
  return !!holderIdentity && !!renewTime && Date.parse(renewTime) + (leaseDurationSeconds ?? 0) * 1000 > nowMs;
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

export class FieldManagerGuard {
  readonly #api: LeaseApi;
  readonly #claim: Claim;
  readonly #options: GuardOptions;
  readonly #name: string;

  constructor(api: LeaseApi, claim: Claim, options: GuardOptions) {
    this.#api = api;
    this.#claim = claim;
    this.#options = options;
    this.#name = guardLeaseName(claim);
  }

  /** Throws FieldManagerTaken when a live holder of another config writes what this process would. */
  async check(signal?: AbortSignal): Promise<void> {
    const holders = await this.#holders(signal);
    if (!holders) return;
    const found = blockers(holders, this.#claim, Date.now());
    if (found.length === 0) return;
    const { fieldManager } = this.#claim;
    const described = found.map((lease) => this.#describe(lease)).join('; ');
    if (this.#options.ignore) {
      this.#options.log.warn(
        "field manager held by another config; writing anyway (--ignore-field-manager-guard): the two will remove each other's labels",
        { fieldManager, holders: described },
      );
      return;
    }
    throw new FieldManagerTaken(
      `field manager "${fieldManager}" is held by another labeller with a different config: ${described}. ` +
        "Two configs under one field manager remove each other's labels; run with the same config, pick another --field-manager, or pass --ignore-field-manager-guard to write anyway",
    );
  }

  /**
   * Holds this process's guard Lease, renewed every third of a lease duration, until `signal`
   * aborts; then gives it up. Never rejects: without permission on Leases it reports that and stops.
   */
  async hold(signal: AbortSignal): Promise<void> {
    const { namespace, leaseDurationMs, log } = this.#options;
    const renewMs = Math.ceil(leaseDurationMs / 3);
    let held: Lease | undefined;
    while (!signal.aborted) {
      try {
        held = await this.#write(held, signal);
      } catch (error) {
        held = undefined;
        if (signal.aborted) break;
        if (isForbidden(error)) {
          log.warn(
            'field-manager guard: cannot hold its Lease, so other labellers cannot see this one; grant create, get, update and delete on leases',
            { lease: `${namespace}/${this.#name}`, error },
          );
          return;
        }
        log.warn('field-manager guard: could not renew its Lease; retrying', {
          lease: `${namespace}/${this.#name}`,
          error,
        });
      }
      await sleep(renewMs, signal);
    }
    // Given up, so a new config can start at once. Read back first: a write cut short by the abort
    // may still have reached the server. A second at most: the API server may be away, and the
    // Lease expires by itself.
    const timeout = AbortSignal.timeout(Math.min(renewMs, 1000));
    const mine = await this.#api.get(namespace, this.#name, timeout).catch(() => undefined);
    if (mine?.spec.holderIdentity === this.#claim.identity) await this.#api.delete(mine, timeout).catch(() => {});
  }

  /** Writes the claim: over the Lease as last written, or as it is now when that failed. */
  async #write(held: Lease | undefined, signal: AbortSignal): Promise<Lease | undefined> {
    const { namespace, leaseDurationMs } = this.#options;
    const { fieldManager, fingerprint, scope, group, identity } = this.#claim;
    const now = microTime();
    const current = held ?? (await this.#api.get(namespace, this.#name, signal));
    const lease: Lease = {
      metadata: {
        ...current?.metadata,
        name: this.#name,
        namespace,
        labels: { ...current?.metadata.labels, [FIELD_MANAGER]: fieldManagerLabelValue(fieldManager) },
        annotations: {
          ...current?.metadata.annotations,
          [FIELD_MANAGER]: fieldManager,
          [CONFIG]: fingerprint,
          [SCOPE]: scope.join(','),
          [GROUP]: group ?? '',
        },
      },
      spec: {
        holderIdentity: identity,
        leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
        acquireTime: current?.spec.acquireTime ?? now,
        renewTime: now,
      },
    };
    // A lost race (409) is retried from a fresh read next time.
    return current ? this.#api.update(lease, signal) : this.#api.create(lease, signal);
  }

  /** The guard Leases of this field manager: cluster-wide if allowed, else in the own namespace; undefined when neither is. */
  async #holders(signal?: AbortSignal): Promise<readonly Lease[] | undefined> {
    const selector = `${FIELD_MANAGER}=${fieldManagerLabelValue(this.#claim.fieldManager)}`;
    for (const namespace of ['', this.#options.namespace]) {
      try {
        return await this.#api.list(namespace, selector, signal);
      } catch (error) {
        // Shutting down before the first write: nothing to guard.
        if (signal?.aborted) return undefined;
        if (!isForbidden(error)) throw error;
      }
    }
    this.#options.log.warn(
      'field-manager guard off: may not list leases, so labellers with other configs under this field manager go unnoticed; grant list on leases',
      { namespace: this.#options.namespace },
    );
    return undefined;
  }

  #describe(lease: Lease): string {
    const a = lease.metadata.annotations ?? {};
    const ago = Math.round((Date.now() - Date.parse(lease.spec.renewTime ?? '')) / 1000);
    const writes = overlap((a[SCOPE] ?? '').split(','), this.#claim.scope).join(', ');
    const group = a[GROUP] ? `, leader election ${a[GROUP]}` : '';
    return `${lease.spec.holderIdentity ?? '?'} (Lease ${
      lease.metadata.namespace ?? ''
    }/${lease.metadata.name}${group}, config ${a[CONFIG] ?? '?'}, renewed ${ago} s ago, also writes ${writes})`;
  }
}

function hash(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/**
 * The guard of this process: its claim is the config's fingerprint and the kinds × namespaces it
 * writes (kinds not served yet included), grouped with its leader-election replicas.
 */
export function guardFor(
  client: KubeClient,
  config: Config,
  kinds: Resolved,
  options: {
    readonly fieldManager: string;
    readonly leaderElection?: { readonly namespace: string; readonly name: string } | undefined;
    readonly guard: Omit<GuardOptions, 'log'> & { readonly identity: string };
  },
  log: Logger,
): FieldManagerGuard {
  const scope = [
    ...kinds.resolved.flatMap(({ kind, resource }) =>
      watchedNamespaces(kind, resource).map((ns) => `${groupResource(resource)}@${ns || '*'}`)
    ),
    ...kinds.unknown.flatMap(({ kind }) =>
      (kind.namespaces.length > 0 ? kind.namespaces : ['*']).map((ns) => `${kind.resource}@${ns}`)
    ),
  ];
  const group = options.leaderElection && `${options.leaderElection.namespace}/${options.leaderElection.name}`;
  return new FieldManagerGuard(
    new LeaseApi(client),
    {
      fieldManager: options.fieldManager,
      fingerprint: configFingerprint(config),
      scope,
      group,
      identity: options.guard.identity,
    },
    { ...options.guard, log },
  );
}
