// The admission policies of a config as the API server serves it now: its kinds resolved through
// discovery as the controller resolves them, and the every-kind entry's exclusions (the default
// and configured ones, the kinds named, what discovery serves without list, watch and patch),
// rendered by admission/policy.ts. One path for `labeller admission`, which prints them, and for
// the controller, which keeps them applied (applier.ts); each says what could not be rendered.
import { type Admission, renderAdmission } from '../admission/policy.ts';
import type { Config } from '../config/model.ts';
import { everyKindExclusions } from '../kinds/everykind.ts';
import { type Resolved, resolveKinds } from '../kinds/resolve.ts';
import type { DiscoveryCache } from '../kube/discoverycache.ts';
import { everyResource } from '../apimachinery/resolve.ts';
import { groupResource, parseGroupResource } from '../apimachinery/resource.ts';

export interface RenderedPolicies {
  readonly admission: Admission;
  /** Configured kinds the API server does not serve (yet): no policy for them. */
  readonly unknown: Resolved['unknown'];
  /** Exclusions of the every-kind entry that name nothing served (yet): its policy does not leave them out. */
  readonly unmatched: readonly string[];
}

/**
 * The policies of `config` under `fieldManager`, against what `discovery` serves now; the
 * protecting ones only when `identity` (labeller's user name) is known, as they let it and the
 * config's `protect.allow` change what they protect.
 */
export function renderPolicies(
  config: Config,
  discovery: DiscoveryCache,
  fieldManager: string,
  identity: string | undefined,
): RenderedPolicies {
  const { resolved, unknown } = resolveKinds(config.kinds, discovery, config.references);
  const every = config.everyKind;
  let excluded: { group: string; resource: string }[] = [];
  let unmatched: readonly string[] = [];
  if (every) {
    const { resources } = discovery;
    const exclusions = everyKindExclusions(every, resolved, resources);
    unmatched = exclusions.unmatched;
    // What discovery serves but labeller could never label (no list, watch or patch: the review APIs).
    const labellable = new Set(everyResource(resources).map(groupResource));
    const never = resources.filter((r) => !r.resource.includes('/')).map(groupResource).filter((name) =>
      !labellable.has(name)
    );
    excluded = [...new Set([...exclusions.left, ...never])].sort().map(parseGroupResource);
  }
  const admission = renderAdmission({
    fieldManager,
    kinds: resolved,
    everyKind: every && { every, excluded },
    sources: config.sources,
    identities: identity === undefined ? undefined : [identity, ...(config.protectAllow ?? [])],
  });
  return { admission, unknown, unmatched };
}
