import type { ApiResource } from './resource.ts';
import { ReasonedError } from '../util/reasonederror.ts';
import { groupResource } from './resource.ts';
import { suggest } from '../util/suggest.ts';

export type ResolveFailure = 'unknown' | 'ambiguous' | 'verbs';

/** A resource name that cannot be used: the message says why and what to type instead. */
export class ResolveError extends ReasonedError<ResolveFailure> {
  override readonly name = 'ResolveError';
}

/** One way to read an argument: a name, optionally qualified by group and version. */
interface Reading {
  readonly name: string;
  readonly group?: string;
  readonly version?: string;
}

/**
 * Ways a name can match a resource, strongest first. As in kubectl, a plural or singular
 * wins over a short name (so a CRD's short name cannot shadow a real resource), which
 * wins over a kind.
 */
const tiers: readonly ((r: ApiResource, name: string) => boolean)[] = [
  (r, name) => r.resource.toLowerCase() === name || r.singular.toLowerCase() === name,
  (r, name) => r.shortNames.some((short) => short.toLowerCase() === name),
  (r, name) => r.kind.toLowerCase() === name,
];

/**
 * Resolves a kubectl-style resource argument against discovery: `resource`,
 * `resource.group`, `resource.version.group` (`pods.v1` for the core group), where
 * `resource` may also be a singular name, a short name or a kind, in any case.
 * Without a version, the group's preferred version is chosen.
 *
 * @throws ResolveError if the name matches nothing, matches resources in several groups,
 *   or the resource lacks one of the required verbs.
 */
export function resolveResource(
  name: string,
  resources: readonly ApiResource[],
  required: readonly string[] = ['list', 'watch', 'patch'],
): ApiResource {
  // Subresources ('deployments/scale') cannot be listed or watched by name.
  const candidates = resources.filter((r) => !r.resource.includes('/'));
  for (const reading of readings(name)) {
    const inScope = candidates.filter(
      (r) =>
        (reading.group === undefined || r.group === reading.group) &&
        (reading.version === undefined || r.version === reading.version),
    );
    for (const matches of tiers) {
      const found = inScope.filter((r) => matches(r, reading.name));
      // Core names win over the same names elsewhere, as in kubectl: metrics.k8s.io
      // serves 'pods' and 'nodes', events.k8s.io serves 'events'.
      const core = found.filter((r) => r.group === '');
      const pool = core.length > 0 ? core : found;
      const [first] = pool;
      if (first === undefined) continue;
      const groups = [...new Set(pool.map(groupResource))].sort();
      if (groups.length > 1) {
        throw new ResolveError(
          'ambiguous',
          `resource "${name}" is ambiguous: ${groups.join(', ')}. Qualify it with its group, e.g. "${groups[0]}"`,
        );
      }
      // Discovery lists a group's versions in preference order, so when the preferred
      // version does not serve this resource the first listed is the next best.
      return requireVerbs(pool.find((r) => r.preferred) ?? first, required);
    }
  }
  throw unknown(name, candidates);
}

/**
 * One version of each resource that has every `required` verb: the preferred version when it has
 * them, else the first listed that does (discovery lists versions in preference order).
 * Subresources are left out. What every-kind mode and `prune --all-kinds` cover.
 */
export function everyResource(
  resources: readonly ApiResource[],
  required: readonly string[] = ['list', 'watch', 'patch'],
): ApiResource[] {
  const chosen = new Map<string, ApiResource>();
  for (const r of resources) {
    if (r.resource.includes('/') || !required.every((verb) => r.verbs.includes(verb))) continue;
    const key = groupResource(r);
    const first = chosen.get(key);
    if (!first || (r.preferred && !first.preferred)) chosen.set(key, r);
  }
  return [...chosen.values()];
}

/**
 * The readings of an argument in the order kubectl tries them: `name.version.group`
 * first, then `name.group`. A trailing '.' or a bare version names the core group.
 */
function readings(arg: string): readonly Reading[] {
  const [name = '', ...qualifiers] = arg.toLowerCase().split('.');
  if (qualifiers.length === 0) return [{ name }];
  const [version = '', ...group] = qualifiers;
  return [
    { name, version, group: group.join('.') },
    { name, group: qualifiers.join('.') },
  ];
}

function requireVerbs(r: ApiResource, required: readonly string[]): ApiResource {
  const missing = required.filter((verb) => !r.verbs.includes(verb));
  if (missing.length === 0) return r;
  throw new ResolveError(
    'verbs',
    `resource "${groupResource(r)}" does not support ${listing(missing.map(quote), 'or')} ` +
      `(it supports: ${r.verbs.join(', ') || 'none'}); labeller needs ${listing(required, 'and')}`,
  );
}

function unknown(name: string, resources: readonly ApiResource[]): ResolveError {
  const suggestion = suggest(name, resources.flatMap(spellings));
  const hint = suggestion === undefined ? '' : `. Did you mean ${quote(suggestion)}?`;
  return new ResolveError(
    'unknown',
    `unknown resource ${quote(name)}: not served by the API server${hint} (list them with: kubectl api-resources)`,
  );
}

/** Every argument that resolves to r, in the order suggestions should prefer them. */
function spellings(r: ApiResource): string[] {
  const names = [r.resource, r.singular, ...r.shortNames, r.kind].filter((n) => n !== '');
  const qualifiers = r.group === '' ? ['', `.${r.version}`] : ['', `.${r.group}`, `.${r.version}.${r.group}`];
  return names.flatMap((n) => qualifiers.map((q) => n.toLowerCase() + q));
}

function quote(s: string): string {
  return `"${s}"`;
}

/** 'a', 'a and b', 'a, b and c'. */
function listing(items: readonly string[], conjunction: 'and' | 'or'): string {
  const last = items.at(-1) ?? '';
  return items.length <= 1 ? last : `${items.slice(0, -1).join(', ')} ${conjunction} ${last}`;
}
