// The permission preflight of `labeller status` and `labeller --once --dry-run`: whether the
// identity they run as may do all that the controller does with this config, asked once the
// kinds have listed (so the related kinds their objects point at are known), and what is
// missing as a table and as RBAC to apply. Missing rights make the exit status 3.
import { serves, servesPolicies } from '../admission/resources.ts';
import { type Config, protectsKeys } from '../config/model.ts';
import { guardLeaseName } from '../guard/claim.ts';
import { watchedNamespaces } from '../kinds/resolve.ts';
import { groupResource, parseGroupResource } from '../apimachinery/resource.ts';
import { type AdmissionPolicyNeeds, needsOf } from '../preflight/needs.ts';
import { type Preflight, preflight } from '../preflight/preflight.ts';
import { renderPolicies } from '../policies/render.ts';
import { memoryLeaseName } from '../sources/memory.ts';
import type { Host, Started } from './host.ts';

/** What the preflight asks about besides the running kinds: the settings of the controller it stands for. */
export interface PreflightSettings {
  /** --events: the controller writes Events (a dry run writes none, the real run would). */
  readonly events: boolean;
  /** Where labeller's own Leases live. */
  readonly leaseNamespace: string;
  /** --admission-policies: the controller keeps the config's policies applied. */
  readonly admissionPolicies: boolean;
  /** --policy-reports: the controller keeps PolicyReports of what is wrong. */
  readonly policyReports: boolean;
}

/** The rights `config` needs as the controller runs it, asked of the API server. */
export function checkRights(
  host: Host,
  started: Started,
  config: Config,
  settings: PreflightSettings,
): Promise<Preflight> {
  const { options, client, shutdown } = host;
  const election = options.leaderElection;
  const { kinds } = started;
  const skipped = kinds.skipped.map(({ resource, denials }) => ({
    resource: parseGroupResource(resource),
    namespaces: [...new Set(denials.map((d) => d.namespace))],
  }));
  const needs = needsOf({
    kinds: [
      ...kinds.kinds.map(({ resolved: { kind, resource } }) => ({
        resource,
        namespaces: watchedNamespaces(kind, resource),
      })),
      ...skipped,
    ],
    related: kinds.relations?.reads() ?? [],
    sources: config.sources.values(),
    events: settings.events,
    leaseNamespace: settings.leaseNamespace,
    leaderElection: election?.name,
    shardGroup: options.sharding?.group,
    // Per leader-election group it has a name; a standalone process's (a shard member's too) carries its identity.
    guard: {
      name: election &&
        guardLeaseName({
          fieldManager: options.fieldManager,
          identity: '',
          group: `${election.namespace}/${election.name}`,
        }),
    },
    sourceMemory: config.sources.size > 0 ? memoryLeaseName(options.fieldManager, election?.name) : undefined,
    admissionPolicies: settings.admissionPolicies ? policyNeeds(host, config) : undefined,
    policyReports: settings.policyReports,
  });
  return preflight(client, needs, 'labeller-preflight', shutdown.intake);
}

/** What keeping `config`'s admission policies needs: the mutating ones where served (some reading a ConfigMap as params), and the protecting ones. */
function policyNeeds(host: Host, config: Config): AdmissionPolicyNeeds | undefined {
  const mutating = servesPolicies(host.discovery.resources);
  const protection = serves(host.discovery.resources, 'ValidatingAdmissionPolicy') && protectsKeys(config);
  if (!mutating && !protection) return undefined;
  const { objects } = renderPolicies(config, host.discovery, host.options.fieldManager, undefined).admission;
  return {
    mutating,
    protection,
    params: mutating &&
      objects.some((object) => object.kind === 'MutatingAdmissionPolicy' && object.spec.paramKind !== undefined),
  };
}

/** For a terminal: each right missing and what needs it, then the RBAC that grants them. */
export function preflightText(result: Preflight): string {
  const who = result.user ?? 'this identity';
  if (result.error !== undefined) return `permissions: not checked: ${result.error}\n`;
  if (result.missing.length === 0) return `permissions: ${who} has all ${result.asked} rights labeller needs\n`;
  const rows = result.missing.map((need) => [
    need.verbs.join(','),
    `${groupResource(need)}${need.name ? `/${need.name}` : ''}`,
    need.namespace || '*',
    need.for,
  ]);
  const head = ['MISSING', 'RESOURCE', 'NAMESPACE', 'FOR'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const table = [head, ...rows].map((cells) => cells.map((c, i) => c.padEnd(widths[i]!)).join('  ').trimEnd());
  return `permissions: ${who} lacks ${
    result.missing.reduce((n, need) => n + need.verbs.length, 0)
  } of the ${result.asked} rights labeller needs\n${
    table.join('\n')
  }\n\nGrant them (kubectl apply -f -):\n${result.rbac}`;
}
