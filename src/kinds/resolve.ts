// The configured kinds against what the API server serves: kubectl-style names resolved through
// the discovery cache, and compared once resolved, so two names of one resource (`deployments`
// and `deploy`) over overlapping namespaces are caught as the config error they are: under one
// field manager they would remove each other's labels without end.
import type { DiscoveryCache } from '../kube/discoverycache.ts';
import { ResolveError } from '../apimachinery/resolve.ts';
import { type ApiResource, groupResource } from '../apimachinery/resource.ts';
import { type KindConfig, templatesOf } from '../config/model.ts';
import { describeReference, type ReferenceSpec } from '../config/references.ts';
import { referenceName } from '../config/template.ts';
import { ConfigError } from '../config/fields.ts';
import { UsageError } from '../util/usage.ts';

/** The config cannot work against this cluster (ambiguous kind, missing verb, nothing to watch): exit status 2. */
export class KindError extends UsageError {
  override readonly name: string = 'KindError';
}

export interface Resolved {
  readonly resolved: readonly ResolvedKind[];
  /** Kinds not served (yet): reported, and started once they are. */
  readonly unknown: readonly { readonly kind: KindConfig; readonly error: ResolveError }[];
}

/**
 * Resolves kinds against the discovery cache. Throws KindError for a kind that is a mistake in the
 * config (ambiguous, a verb missing), ConfigError for two entries of one resource that overlap.
 */
export function resolveKinds(
  kinds: readonly KindConfig[],
  discovery: DiscoveryCache,
  references: ReadonlyMap<string, ReferenceSpec>,
): Resolved {
  const resolved: ResolvedKind[] = [];
  const unknown: { kind: KindConfig; error: ResolveError }[] = [];
  for (const kind of kinds) {
    try {
      const resource = discovery.resolve(kind.resource);
      checkReferences(kind, resource, references, discovery);
      resolved.push({ kind, resource });
    } catch (error) {
      // A kind that is not served (yet) is reported and the others run; a kind that is
      // ambiguous or lacks a verb is a mistake in the config.
      if (error instanceof ResolveError && error.reason === 'unknown') unknown.push({ kind, error });
      else throw error instanceof ResolveError ? new KindError(error.message) : error;
    }
  }
  checkAliases(resolved);
  return { resolved, unknown };
}

/**
 * Throws KindError when a template of `kind` reads a reference of another kind: the field that
 * names the related object is the reference's kind's, and means nothing on this one.
 */
function checkReferences(
  kind: KindConfig,
  resource: ApiResource,
  references: ReadonlyMap<string, ReferenceSpec>,
  discovery: DiscoveryCache,
): void {
  for (const template of templatesOf(kind)) {
    for (const read of template.related) {
      const name = referenceName(read.relation);
      const reference = name === undefined ? undefined : references.get(name);
      // A reverse reference without `to` names any kind its kindField says.
      const labelled = reference?.direction === 'forward' ? reference.of : reference?.to;
      if (!reference || labelled === undefined) continue;
      let named: ApiResource | undefined;
      try {
        named = discovery.resolve(labelled, []);
      } catch {
        // Not served: it cannot be this kind, which is.
      }
      if (named && groupResource(named) === groupResource(resource)) {
        if (reference.direction === 'forward' || resource.namespaced) continue;
        throw new KindError(
          `${
            template.where ?? kind.where
          }: "${template.source}" reads ${name}.*, whose objects name objects in their own namespace; ${
            groupResource(resource)
          } is cluster-scoped`,
        );
      }
      throw new KindError(
        `${template.where ?? kind.where}: "${template.source}" reads ${name}.*, a reference of ${labelled} (${
          describeReference(reference)
        }), not of ${groupResource(resource)}: declare one of ${
          groupResource(resource)
        } under "references:", or move the key to a ${labelled} entry`,
      );
    }
  }
}

/** Throws ConfigError naming both entries when two kinds resolve to one resource with namespaces in common. */
export function checkAliases(kinds: readonly ResolvedKind[]): void {
  for (const [i, a] of kinds.entries()) {
    for (const b of kinds.slice(i + 1)) {
      if (groupResource(a.resource) !== groupResource(b.resource)) continue;
      const shared = a.resource.namespaced
        ? sharedNamespaces(watchedNamespaces(a.kind, a.resource), watchedNamespaces(b.kind, b.resource))
        : '';
      if (shared === undefined) continue;
      // kinds.yaml: kinds[0] (…) and kinds[1] (…): the file named once.
      const file = a.kind.where.slice(0, a.kind.where.lastIndexOf(': ') + 2);
      const second = file && b.kind.where.startsWith(file) ? b.kind.where.slice(file.length) : b.kind.where;
      throw new ConfigError(
        `${a.kind.where} (${JSON.stringify(a.kind.resource)}) and ${second} (${
          JSON.stringify(b.kind.resource)
        }) are both ${
          groupResource(a.resource)
        }${shared}: under one field manager they would remove each other's labels. ` +
          'Merge them into one entry, or give them namespaces that do not overlap',
      );
    }
  }
}

/** Where two kinds' namespaces meet, in words (' in every namespace', ' in namespace shop'); undefined when they do not. */
function sharedNamespaces(a: readonly string[], b: readonly string[]): string | undefined {
  const all = (namespaces: readonly string[]) => namespaces.includes('');
  if (all(a) && all(b)) return ' in every namespace';
  const common = all(a) ? b : all(b) ? a : a.filter((namespace) => b.includes(namespace));
  if (common.length === 0) return undefined;
  return ` in namespace${common.length === 1 ? '' : 's'} ${common.join(', ')}`;
}

/** A configured kind as the API server serves it. */
export interface ResolvedKind {
  readonly kind: KindConfig;
  readonly resource: ApiResource;
}

/** The namespaces a kind is watched in: its own, or all ('') when none are set or it is cluster-scoped. */
export function watchedNamespaces(kind: KindConfig, resource: ApiResource): readonly string[] {
  return resource.namespaced && kind.namespaces.length > 0 ? kind.namespaces : [''];
}

/** The controller's name in logs and metrics: `deployments.apps`, or with the namespaces it is limited to (`configmaps/shop`). */
export function controllerName({ kind, resource }: ResolvedKind): string {
  const namespaces = watchedNamespaces(kind, resource).filter(Boolean).sort();
  return namespaces.length > 0 ? `${groupResource(resource)}/${namespaces.join(',')}` : groupResource(resource);
}
