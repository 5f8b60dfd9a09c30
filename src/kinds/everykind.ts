// The every-kind entry against what discovery serves: one kind per resource that can be listed,
// watched and patched (one version each, the preferred one when it serves them: everyResource),
// of the entry's scope, minus the default and the configured exclusions and minus the resources
// listed explicitly (an explicit entry replaces the every-kind entry for its resource, so the two
// are never one resource under two configs). Exclusions are kubectl-style names resolved through
// discovery: one that names nothing served yet is kept and applies once it does.
import { everyResource, ResolveError, resolveResource } from '../apimachinery/resolve.ts';
import { type ApiResource, groupResource } from '../apimachinery/resource.ts';
import { DEFAULT_EXCLUDES } from '../config/everykind.ts';
import { type EveryKindConfig } from '../config/model.ts';
import type { Logger } from '../util/log.ts';
import type { ResolvedKind } from './resolve.ts';
import { KindError } from './resolve.ts';

export interface Expansion {
  /** The kinds the entry stands for now, one per group/resource. */
  readonly kinds: readonly ResolvedKind[];
  /** The configured exclusions that name nothing served (yet). */
  readonly unmatched: readonly string[];
}

/**
 * The kinds `every` stands for among `resources`, besides the `explicit` ones. Throws KindError
 * for an exclusion that names resources of several groups.
 */
export function expandEveryKind(
  every: EveryKindConfig,
  explicit: readonly ResolvedKind[],
  resources: readonly ApiResource[],
): Expansion {
  const { left, unmatched } = everyKindExclusions(every, explicit, resources);
  const kinds = everyResource(resources)
    .filter((resource) => inScope(every, resource) && !left.has(groupResource(resource)))
    .map((resource) => ({
      kind: {
        ...every.kind,
        where: `${every.kind.where} (${groupResource(resource)})`,
        resource: groupResource(resource),
      },
      resource,
    }));
  return { kinds, unmatched };
}

/**
 * What `every` leaves out among `resources`, as group/resource names (groupResource): the default
 * and configured exclusions and the `explicit` kinds; and the configured exclusions that name
 * nothing served (yet). Throws KindError for an exclusion that names resources of several groups.
 */
export function everyKindExclusions(
  every: EveryKindConfig,
  explicit: readonly ResolvedKind[],
  resources: readonly ApiResource[],
): { readonly left: ReadonlySet<string>; readonly unmatched: readonly string[] } {
  const left = new Set(explicit.map(({ resource }) => groupResource(resource)));
  const unmatched: string[] = [];
  const configured = new Set(every.exclude);
  for (const name of [...DEFAULT_EXCLUDES.map((d) => d.resource), ...every.exclude]) {
    try {
      // Any verbs: an exclusion of a kind labeller could not use anyway is no mistake.
      left.add(groupResource(resolveResource(name, resources, [])));
    } catch (error) {
      if (!(error instanceof ResolveError)) throw error;
      if (error.reason !== 'unknown') {
        throw new KindError(`${every.kind.where}: exclude ${JSON.stringify(name)}: ${error.message}`);
      }
      if (configured.has(name)) unmatched.push(name);
    }
  }
  return { left, unmatched };
}

function inScope(every: EveryKindConfig, resource: ApiResource): boolean {
  return every.scope === 'all' || (every.scope === 'namespaced') === resource.namespaced;
}

/** expandEveryKind, saying once about each exclusion that names nothing served. */
export class EveryKind {
  readonly #log: Logger;
  #unmatched = new Set<string>();

  constructor(log: Logger) {
    this.#log = log;
  }

  expand(every: EveryKindConfig, explicit: readonly ResolvedKind[], resources: readonly ApiResource[]): Expansion {
    const expansion = expandEveryKind(every, explicit, resources);
    for (const name of expansion.unmatched) {
      if (this.#unmatched.has(name)) continue;
      this.#log.warn('excluded kind not served by the API server (yet); excluded once it is', {
        kind: name,
        entry: every.kind.where,
      });
    }
    this.#unmatched = new Set(expansion.unmatched);
    return expansion;
  }
}
