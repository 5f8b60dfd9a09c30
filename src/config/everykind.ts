// The every-kind entry of kinds.yaml (`- resource: "*"`, or `--kinds '*'`): one metadata-only
// controller for each resource discovery reports with list, watch and patch (kinds/everykind.ts
// expands it), with a scope, exclusions on top of the default ones below, and the per-kind
// settings any entry takes. A kind listed explicitly replaces it for that resource.
//
//   kinds:
//     - resource: "*"
//       scope: namespaced        # namespaced (default) | cluster | all
//       exclude: [secrets, widgets.example.com]   # kubectl-style; added to DEFAULT_EXCLUDES
//       labels: {team: platform}
import { describe, expectList, expectString, fail, isAbsent, resourceProblem } from './fields.ts';
import { EVERY_KIND, type EveryKindConfig, type EveryKindScope, type KindConfig, templatesOf } from './model.ts';
import { referenceName } from './template.ts';

export const EVERY_KIND_SCOPES: readonly EveryKindScope[] = ['namespaced', 'cluster', 'all'];

/** The fields only the every-kind entry takes. */
export const EVERY_KIND_FIELDS = ['scope', 'exclude'];

/**
 * Kinds the every-kind entry leaves out unless listed explicitly, and why. Fully qualified, so
 * that no CRD's short name can make one ambiguous.
 */
export const DEFAULT_EXCLUDES: readonly { readonly resource: string; readonly why: string }[] = [
  { resource: 'events', why: 'short-lived (one hour) and written at high rates; labeller writes Events itself' },
  { resource: 'events.events.k8s.io', why: 'the same Events through the events.k8s.io API' },
  {
    resource: 'leases.coordination.k8s.io',
    why: "renewed every few seconds (node heartbeats, leader election, labeller's own guard)",
  },
  { resource: 'leasecandidates.coordination.k8s.io', why: 'renewed like Leases (coordinated leader election)' },
  { resource: 'endpoints', why: "rewritten by the endpoints controller at every change of a Service's pods" },
  {
    resource: 'endpointslices.discovery.k8s.io',
    why: "rewritten by the EndpointSlice controllers at every change of a Service's pods",
  },
  {
    resource: 'controllerrevisions.apps',
    why: 'immutable history snapshots of StatefulSets and DaemonSets, made and pruned by their controllers',
  },
  {
    resource: 'csistoragecapacities.storage.k8s.io',
    why: 'rewritten by CSI drivers every minute or so with the capacity they see',
  },
  {
    resource: 'apiservices.apiregistration.k8s.io',
    why: 'maintained by the API server (its autoregister controller) for every served group',
  },
  {
    resource: 'flowschemas.flowcontrol.apiserver.k8s.io',
    why: "the API server's own Priority and Fairness configuration, which it keeps up to date",
  },
  {
    resource: 'prioritylevelconfigurations.flowcontrol.apiserver.k8s.io',
    why: "the API server's own Priority and Fairness configuration, which it keeps up to date",
  },
  // Sensitive: to list them is to read credentials, to patch them is to control the cluster. The
  // chart's every-kind grant leaves them out too; a kind listed by name is labelled, and granted.
  { resource: 'secrets', why: 'listing them reads credentials; list secrets by name to label them' },
  ...[
    'mutatingwebhookconfigurations',
    'validatingwebhookconfigurations',
    'mutatingadmissionpolicies',
    'mutatingadmissionpolicybindings',
    'validatingadmissionpolicies',
    'validatingadmissionpolicybindings',
  ].map((resource) => ({
    resource: `${resource}.admissionregistration.k8s.io`,
    why: 'who may patch admission configuration may change or read every object the API server admits',
  })),
  {
    resource: 'customresourcedefinitions.apiextensions.k8s.io',
    why: "who may patch a CRD may point its conversion webhook elsewhere, which then receives the CRD's objects",
  },
];

/** The every-kind fields of a kinds.yaml entry (undefined when absent). */
export interface EveryKindFields {
  readonly scope: EveryKindScope | undefined;
  readonly exclude: readonly string[] | undefined;
}

/**
 * Reads `scope` and `exclude` of the entry at `where`; `resource` is the entry's resource, and
 * only the every-kind entry may carry them.
 */
export function parseEveryKindFields(
  fields: Record<string, unknown>,
  resource: string,
  where: string,
): EveryKindFields {
  const given = EVERY_KIND_FIELDS.filter((field) => !isAbsent(fields[field]));
  if (resource !== EVERY_KIND) {
    if (given.length > 0) {
      throw fail(
        `${where}.${given[0]}`,
        `only the every-kind entry (resource: "${EVERY_KIND}") takes ${
          given[0]
        }: remove it, or list this kind in its exclude`,
      );
    }
    return { scope: undefined, exclude: undefined };
  }
  return {
    scope: parseScope(fields.scope, `${where}.scope`),
    exclude: isAbsent(fields.exclude) ? undefined : excludeList(fields.exclude, `${where}.exclude`),
  };
}

function parseScope(value: unknown, where: string): EveryKindScope | undefined {
  if (isAbsent(value)) return undefined;
  const scope = EVERY_KIND_SCOPES.find((candidate) => candidate === value);
  if (scope === undefined) {
    throw fail(where, `must be ${EVERY_KIND_SCOPES.map((s) => `"${s}"`).join(', ')}, got ${describe(value)}`);
  }
  return scope;
}

/** A list of kubectl-style names to exclude, from the file or from --exclude-kinds. */
export function excludeList(
  value: unknown,
  where: string,
): string[] {
  const items = expectList(value, where, 'a list of kinds, e.g. [secrets, widgets.example.com]');
  const seen = new Set<string>();
  return items.map((item, index) => {
    const path = `${where}[${index}]`;
    const name = expectString(item, path);
    const problem = name === EVERY_KIND ? `"${EVERY_KIND}" cannot be excluded` : resourceProblem(name);
    if (problem !== undefined) throw fail(path, problem);
    if (seen.has(name)) throw fail(path, `${JSON.stringify(name)} is listed twice: list each kind once`);
    seen.add(name);
    return name;
  });
}

/**
 * The every-kind entry of a config: `entry` as listed and `kind` with the global settings applied
 * (undefined when no entry is "*"), with --exclude-kinds (`flag`) added to its exclude.
 */
export function everyKindConfig(
  every: readonly [entry: KindEntryFields, kind: KindConfig] | undefined,
  flag: readonly string[] | undefined,
): EveryKindConfig | undefined {
  if (every === undefined) {
    if (flag === undefined) return undefined;
    throw fail(
      '--exclude-kinds',
      `excludes kinds from the every-kind entry, and there is none: add "${EVERY_KIND}" to --kinds (--kinds '${EVERY_KIND}') or "- resource: \\"${EVERY_KIND}\\"" to the config's kinds`,
    );
  }
  const [entry, kind] = every;
  const scope = entry.scope ?? 'namespaced';
  if (scope === 'cluster' && entry.namespaces !== undefined) {
    throw fail(
      `${kind.where}.namespaces`,
      'cluster-scoped kinds have no namespaces: remove namespaces, or use scope: namespaced or all',
    );
  }
  // A reference is a field of one kind: on every kind it would watch each whole, to find it on none.
  const referencing = templatesOf(kind).find((t) => t.related.some((read) => referenceName(read.relation)));
  if (referencing) {
    throw fail(
      kind.where,
      `"${referencing.source}" reads a reference, which names an object by a field of one kind: set it in an entry of that kind (e.g. "- resource: pods" for node.*), not in the every-kind entry`,
    );
  }
  const fromFlag = flag === undefined ? [] : excludeList(flag, '--exclude-kinds');
  return { kind, scope, exclude: [...new Set([...(entry.exclude ?? []), ...fromFlag])] };
}

/** What everyKindConfig reads of the entry as listed. */
interface KindEntryFields extends EveryKindFields {
  readonly namespaces: readonly string[] | undefined;
}
