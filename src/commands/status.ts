// `labeller status`: what labeller owns and what it would change, per kind, from one
// metadata-only list of each kind and of each related kind its templates read (the same kinds,
// caches and templates the controller runs, listed once): no write, no dry-run apply, so `list`
// is the only right it needs (a CI job or an auditor with read access can run it). Its counts are
// what the running controller would patch.
import type { Config } from '../config/model.ts';
import { watchedNamespaces } from '../kinds/resolve.ts';
import { groupResource } from '../apimachinery/resource.ts';
import { noObjects, type ObjectCounts } from '../labelling/counts.ts';
import { type KeyCoverage, keysCut, keyStates, shortfallReason } from '../labelling/coverage.ts';
import type { LabelledKind } from '../kinds/controller.ts';
import { isProtecting, serves, servesPolicies } from '../admission/resources.ts';
import { type PolicyObject, type PolicyOnServer, PolicyStore } from '../policies/store.ts';
import type { Ending, Host } from './host.ts';
import { LeaseApi } from '../kube/lease.ts';
import { type MemberStatus, readMembers } from '../shard/membership.ts';
import type { Preflight } from '../preflight/preflight.ts';
import { checkRights, type PreflightSettings, preflightText } from './preflight.ts';

export interface KindStatus extends ObjectCounts {
  readonly kind: string;
  /** As RBAC names it: `deployments.apps`. */
  readonly resource: string;
  /** Empty: every namespace (or cluster-scoped). */
  readonly namespaces: readonly string[];
  /** Why this kind could not be counted (not served, list failed); its counts are then 0. */
  readonly error?: string;
  /** With --coverage: per configured label, how many objects carry its desired value, and why the rest do not. */
  readonly coverage?: readonly LabelCoverage[];
  /** With `coverage.maxLabels` in the config: the objects carrying more labels, and the configured keys they would lose. */
  readonly crowded?: Crowding;
}

/** Objects carrying more labels than a cost tool imports (`coverage.maxLabels`), and which configured keys it would drop. */
export interface Crowding {
  readonly maxLabels: number;
  /** Objects that would carry more than maxLabels labels once applied. */
  readonly objects: number;
  /** Per configured key, the objects on which it falls past the maxLabels-th in alphabetical order. */
  readonly cut: Readonly<Record<string, number>>;
}

export interface LabelCoverage extends KeyCoverage {
  /** covered / objects; 1 when there are no objects. */
  readonly ratio: number;
  /** The objects that fall short, by reason ('pending', 'held: source catalog has not loaded', 'unwanted: namespace has no label team'). */
  readonly shortfalls: Readonly<Record<string, number>>;
}

/** The document `labeller status -o json` prints. */
export interface StatusReport {
  readonly fieldManager: string;
  readonly kinds: readonly KindStatus[];
  readonly total: ObjectCounts;
  /** Whether this identity may do all the controller does with this config (not with --preflight=false). */
  readonly permissions?: Preflight;
  /** The members of the shard groups in labeller's namespace (--shards auto), when there are any. */
  readonly shards?: readonly MemberStatus[];
  /** labeller's admission policies: with --admission-policies, or when the field manager has some on the cluster. */
  readonly admissionPolicies?: AdmissionPolicyStatus;
}

/** Whether labeller's admission policies are in force: served, and which its field manager has on the cluster. */
export interface AdmissionPolicyStatus {
  /** Whether the API server serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicies (1.36 and later). */
  readonly served: boolean;
  /** The field manager's policies, by name; empty when not served. */
  readonly policies: readonly string[];
  /** Their bindings, by name. */
  readonly bindings: readonly string[];
  /** The protecting policies (ValidatingAdmissionPolicies), each with what its binding does: deny, warn, audit, or unbound. */
  readonly protection?: readonly { readonly policy: string; readonly mode: string }[];
  /** Why they could not be listed. */
  readonly error?: string;
}

export interface StatusOptions {
  readonly output: 'table' | 'json';
  readonly coverage: boolean;
  /** Undefined: --preflight=false. */
  readonly preflight: PreflightSettings | undefined;
  /** Where shard groups' member Leases live (labeller's namespace). */
  readonly leaseNamespace: string;
  /** --admission-policies: the controller keeps them, so they are reported (and their rights asked) even when there are none. */
  readonly admissionPolicies: boolean;
}

/** Prints the report on stdout; `incomplete` when a kind could not be counted or a signal cut it short. */
export async function runStatus(host: Host, config: Config, options: StatusOptions): Promise<Ending> {
  // `list` is the only right status needs.
  const started = await host.start(config, { verbs: ['list'] });
  if (!started) return 'stopped';
  const { kinds } = started;
  const { log, shutdown } = host;
  const counted = await Promise.all(
    kinds.kinds.map(async (labelled): Promise<KindStatus> => {
      const { resolved: { kind, resource }, controller, count } = labelled;
      const row = {
        kind: resource.kind,
        resource: groupResource(resource),
        namespaces: watchedNamespaces(kind, resource).filter(Boolean),
      };
      try {
        await controller.ready();
        const crowded = config.coverage && crowding(labelled, config.coverage.maxLabels);
        if (crowded && crowded.objects > 0) {
          log.warn('objects carry more labels than coverage.maxLabels; a cost tool importing that many cuts the rest', {
            kind: row.resource,
            ...crowded,
          });
        }
        return {
          ...row,
          ...count(),
          ...(options.coverage ? { coverage: coverageOf(labelled) } : {}),
          ...(crowded ? { crowded } : {}),
        };
      } catch (error) {
        log.error('cannot list; kind not counted', { kind: row.resource, error });
        return { ...row, ...noObjects(), error: error instanceof Error ? error.message : String(error) };
      }
    }),
  );
  const notServed = kinds.unknown.map(({ kind, error }): KindStatus => ({
    kind: kind.resource,
    resource: kind.resource,
    namespaces: kind.namespaces,
    ...noObjects(),
    error: error.message,
  }));
  const rows = [...counted, ...notServed];
  const total = noObjects();
  for (const row of rows) for (const field of COLUMNS) total[field] += row[field];
  const permissions = options.preflight && !shutdown.intake.aborted
    ? await checkRights(host, started, config, options.preflight)
    : undefined;
  const shards = await shardMembers(host, options.leaseNamespace);
  const admissionPolicies = await policiesInForce(host, options.admissionPolicies);
  const report: StatusReport = {
    fieldManager: host.options.fieldManager,
    kinds: rows,
    total,
    ...(permissions ? { permissions } : {}),
    ...(shards.length > 0 ? { shards } : {}),
    ...(admissionPolicies ? { admissionPolicies } : {}),
  };
  process.stdout.write(options.output === 'json' ? `${JSON.stringify(report, null, 2)}\n` : table(report));
  if (permissions?.missing.length) return 'missing rights';
  return rows.some((row) => row.error !== undefined) || shutdown.intake.aborted ? 'incomplete' : 'done';
}

/** The shard groups' members, as their Leases say; none when there are none or they may not be listed. */
async function shardMembers(host: Host, namespace: string): Promise<MemberStatus[]> {
  try {
    return await readMembers(new LeaseApi(host.client), namespace, host.shutdown.intake);
  } catch (error) {
    host.log.debug('cannot list shard members', { namespace, error });
    return [];
  }
}

/**
 * The field manager's admission policies on the cluster: with --admission-policies always (a
 * failure to list them said), otherwise only when there are some (a reader without rights on them
 * sees nothing of them).
 */
async function policiesInForce(host: Host, asked: boolean): Promise<AdmissionPolicyStatus | undefined> {
  const { client, discovery, options, log, shutdown } = host;
  const served = (kind: PolicyObject['kind']) => serves(discovery.resources, kind);
  const mutating = servesPolicies(discovery.resources);
  if (!mutating && !served('ValidatingAdmissionPolicy')) {
    return asked ? { served: false, policies: [], bindings: [] } : undefined;
  }
  try {
    const store = new PolicyStore(client, options.fieldManager);
    const found = await store.list({ served, optional: isProtecting }, shutdown.intake);
    const named = (kind: PolicyOnServer['kind']) => found.filter((o) => o.kind === kind).map((o) => o.name).sort();
    const protecting = named('ValidatingAdmissionPolicy');
    const modes = protecting.length > 0 ? await store.protectionModes(shutdown.intake) : new Map<string, string>();
    const status = {
      served: mutating,
      policies: named('MutatingAdmissionPolicy'),
      bindings: named('MutatingAdmissionPolicyBinding'),
      ...(protecting.length > 0
        ? { protection: protecting.map((policy) => ({ policy, mode: modes.get(policy) ?? 'unbound' })) }
        : {}),
    };
    return asked || found.length > 0 ? status : undefined;
  } catch (error) {
    log.debug('cannot list admission policies', { error });
    const message = error instanceof Error ? error.message : String(error);
    return asked ? { served: mutating, policies: [], bindings: [], error: message } : undefined;
  }
}

/** Each configured label's coverage of `kind`'s cached objects, with the reasons for the rest. */
function coverageOf(kind: LabelledKind): LabelCoverage[] {
  const keys = [...kind.resolved.kind.labels.keys()];
  const shortfalls = keys.map(() => new Map<string, number>());
  let objects = 0;
  for (const object of kind.controller.values()) {
    if (object.deleting) continue;
    objects++;
    const states = keyStates(kind.plan(object), object, keys);
    // Tracing the templates costs more than planning: only for the objects that need a reason.
    const traces = states.some((s) => s === 'held' || s === 'unwanted') ? kind.explain(object).traces : [];
    states.forEach((state, i) => {
      if (state === 'covered') return;
      const trace = traces.find((t) => t.field === 'labels' && t.key === keys[i]);
      const reason = shortfallReason(state, trace);
      shortfalls[i]!.set(reason, (shortfalls[i]!.get(reason) ?? 0) + 1);
    });
  }
  return keys.map((key, i) => {
    const short = [...shortfalls[i]!].sort((a, b) => b[1] - a[1]);
    const covered = objects - short.reduce((n, [, count]) => n + count, 0);
    return {
      key,
      objects,
      covered,
      ratio: objects === 0 ? 1 : covered / objects,
      shortfalls: Object.fromEntries(short),
    };
  });
}

/** The objects of `kind` that would carry more than `maxLabels` labels, and the configured keys each would lose. */
function crowding(kind: LabelledKind, maxLabels: number): Crowding {
  const keys = [...kind.resolved.kind.labels.keys()];
  const cut = new Map<string, number>();
  let objects = 0;
  for (const object of kind.controller.values()) {
    if (object.deleting || Object.keys(object.labels).length + keys.length <= maxLabels) continue;
    const lost = keysCut(kind.plan(object), object, keys, maxLabels);
    if (lost === undefined) continue;
    objects++;
    for (const key of lost) cut.set(key, (cut.get(key) ?? 0) + 1);
  }
  return { maxLabels, objects, cut: Object.fromEntries([...cut].sort((a, b) => b[1] - a[1])) };
}

const COLUMNS = [
  'seen',
  'managed',
  'pending',
  'conflicts',
  'invalid',
  'held',
] as const satisfies readonly (keyof ObjectCounts)[];

/** kubectl-style columns: names left, counts right, errors after them. */
function table(report: StatusReport): string {
  const head = ['KIND', 'NAMESPACES', ...COLUMNS.map((c) => c.toUpperCase())];
  const lines = [
    ...report.kinds.map((
      row,
    ) => [
      row.resource,
      row.namespaces.join(',') || '*',
      ...COLUMNS.map((c) => String(row[c])),
      row.error ? `error: ${row.error}` : '',
    ]),
    ['total', '', ...COLUMNS.map((c) => String(report.total[c])), ''],
  ];
  const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const format = (cells: readonly string[]) =>
    cells.map((cell, i) => (i >= head.length ? cell : i < 2 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!)))
      .join('  ').trimEnd();
  return `${[head, ...lines].map(format).join('\n')}\n${coverageTable(report)}${crowdingLines(report)}${
    shardTable(report)
  }${policiesLine(report)}${report.permissions ? `\n${preflightText(report.permissions)}` : ''}`;
}

/** One line on labeller's admission policies, e.g. `admission policies: 2 in force (labeller-pods, labeller-services)`. */
function policiesLine({ admissionPolicies: status }: StatusReport): string {
  if (!status) return '';
  if (status.error !== undefined) return `\nadmission policies: cannot be listed: ${status.error}\n`;
  const protection = status.protection?.length
    ? `protection: ${status.protection.map(({ policy, mode }) => `${policy} (${mode})`).join(', ')}\n`
    : '';
  if (!status.served) {
    return `\nadmission policies: not served by the API server (Kubernetes 1.36 and later); the controller labels objects after their create\n${protection}`;
  }
  const bound = status.policies.filter((name) => status.bindings.includes(name));
  const unbound = status.policies.filter((name) => !status.bindings.includes(name));
  return `\nadmission policies: ${bound.length} in force${bound.length > 0 ? ` (${bound.join(', ')})` : ''}${
    unbound.length > 0 ? `; without a binding, so not in force: ${unbound.join(', ')}` : ''
  }\n${protection}`;
}

/** Each shard member's share, objects and ranges (cut short here; whole in JSON). */
function shardTable(report: StatusReport): string {
  if (!report.shards) return '';
  const head = ['SHARD GROUP', 'MEMBER', 'READY', 'SHARE', 'OBJECTS', 'RENEWED', 'RANGES'];
  const rows = report.shards.map((m) => [
    m.group,
    m.identity,
    m.ready ? 'yes' : 'no',
    `${Math.round(m.share * 100)}%`,
    m.objects === undefined ? '?' : String(m.objects),
    m.renewedSecondsAgo === undefined ? '?' : `${m.renewedSecondsAgo}s ago`,
    m.ranges.length > 48 ? `${m.ranges.slice(0, 47)}…` : m.ranges || '-',
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const format = (cells: readonly string[]) => cells.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd();
  return `\n${[head, ...rows].map(format).join('\n')}\n`;
}

/**
 * With `coverage.maxLabels`: a warning per kind whose objects would carry more labels, e.g.
 * `warning: pods: 12 objects carry more than 50 labels; …, so it would not import team (12 objects)`.
 */
function crowdingLines(report: StatusReport): string {
  const lines = report.kinds.flatMap(({ resource, crowded }) => {
    if (!crowded || crowded.objects === 0) return [];
    const cut = Object.entries(crowded.cut).map(([key, n]) => `${key} (${n} object${n === 1 ? '' : 's'})`);
    return [
      `warning: ${resource}: ${crowded.objects} object${
        crowded.objects === 1 ? '' : 's'
      } would carry more than ${crowded.maxLabels} labels; a cost tool that imports only the first ${crowded.maxLabels} in alphabetical order (AWS split cost allocation) ${
        cut.length > 0
          ? `would not import ${
            cut.join(', ')
          }: drop labels that sort before them, or rename the configured keys to sort earlier`
          : 'still imports every configured label'
      }`,
    ];
  });
  return lines.length === 0 ? '' : `\n${lines.join('\n')}\n`;
}

/** With --coverage: one line per kind and label, e.g. `pods  example.com/cost-center  97.3 %  412/424  12 unwanted: …`. */
function coverageTable(report: StatusReport): string {
  const rows = report.kinds.flatMap((kind) =>
    (kind.coverage ?? []).map((c) => [
      kind.resource,
      c.key,
      `${(c.ratio * 100).toFixed(1)} %`,
      `${c.covered}/${c.objects}`,
      Object.entries(c.shortfalls).map(([reason, n]) => `${n} ${reason}`).join('; '),
    ])
  );
  if (rows.length === 0) return '';
  const head = ['KIND', 'LABEL', 'COVERAGE', 'OBJECTS', 'SHORT OF IT'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const format = (cells: readonly string[]) =>
    cells.map((cell, i) => (i === 2 || i === 3 ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join('  ')
      .trimEnd();
  return `\n${[head, ...rows].map(format).join('\n')}\n`;
}
