// A namespace's findings as the PolicyReport labeller keeps there (the cluster-scoped objects' as
// a ClusterPolicyReport): the policy working group's wgpolicyk8s.io/v1alpha2, which Policy Reporter
// shows beside Kyverno's, Kubewarden's, Trivy's and Falco's. Only what is wrong is listed: a pass
// result per object and key would make the report as large as the namespace, and rewrite it with
// each object created. Its size is bounded as Kyverno bounds its own: at most `maxResults`
// results, sorted so that the same findings keep the same results (fail before warn, then by
// object and key), the rest counted in the summary and said in an annotation. The same findings
// give the same body, byte for byte, so that the writer can tell a change from a recompute.
import { createHash } from 'node:crypto';
import { isDns1123Label, nameSlug } from '../apimachinery/names.ts';
import type { OwnerReference } from '../apimachinery/objects.ts';
import { FIELD_MANAGER_LABEL, fieldManagerLabelValue } from '../config/fieldmanager.ts';
import type { Finding } from './findings.ts';

export const REPORT_API_VERSION = 'wgpolicyk8s.io/v1alpha2';

/** Results past this many are counted, not listed: a report of 1,000 results is about 0.5 MB, well within etcd's 1.5 MB. */
export const MAX_RESULTS = 1000;

/** How many findings a report leaves out (past `maxResults`): the summary counts them all. */
export const OMITTED_ANNOTATION = 'labeller.io/omitted-results';

/** What every result names as its source: Policy Reporter groups and filters by it. */
export const SOURCE = 'labeller';

export interface ReportResult {
  readonly source: string;
  readonly policy: string;
  readonly rule: string;
  readonly category: string;
  readonly result: 'fail' | 'warn';
  readonly message: string;
  readonly properties: Readonly<Record<string, string>>;
  readonly resources: readonly {
    readonly apiVersion: string;
    readonly kind: string;
    readonly name: string;
    readonly namespace?: string;
    readonly uid: string;
  }[];
}

export interface Summary {
  readonly pass: number;
  readonly fail: number;
  readonly warn: number;
  readonly error: number;
  readonly skip: number;
}

/** A PolicyReport (namespace given) or ClusterPolicyReport, as server-side applied. */
export interface Report {
  readonly apiVersion: typeof REPORT_API_VERSION;
  readonly kind: 'PolicyReport' | 'ClusterPolicyReport';
  readonly metadata: {
    readonly name: string;
    readonly namespace?: string;
    readonly labels: Readonly<Record<string, string>>;
    readonly annotations?: Readonly<Record<string, string>>;
    readonly ownerReferences?: readonly OwnerReference[];
  };
  readonly summary: Summary;
  readonly results: readonly ReportResult[];
}

/** The labels of labeller's reports for `fieldManager`: how it finds its own among others'. */
export function reportLabels(fieldManager: string): Record<string, string> {
  return { 'app.kubernetes.io/managed-by': 'labeller', [FIELD_MANAGER_LABEL]: fieldManagerLabelValue(fieldManager) };
}

export function reportSelector(fieldManager: string): string {
  return Object.entries(reportLabels(fieldManager)).map(([key, value]) => `${key}=${value}`).join(',');
}

/**
 * The name of the field manager's report, the same in every namespace: the field manager when it
 * is a DNS label short enough, else its slug and a hash (two field managers never share one).
 */
export function reportName(fieldManager: string): string {
  if (isDns1123Label(fieldManager) && fieldManager.length <= 56) return `${fieldManager}-labels`;
  const hash = createHash('sha256').update(fieldManager).digest('hex').slice(0, 8);
  return `${nameSlug(fieldManager, 40) || 'labeller'}-${hash}-labels`;
}

/**
 * The report of `namespace` ('' for the cluster-scoped objects) with `findings`; with `owner`, a
 * dependent of it, so that the garbage collector deletes it once the owner is gone.
 */
export function reportOf(
  namespace: string,
  findings: readonly Finding[],
  options: {
    readonly fieldManager: string;
    readonly maxResults?: number | undefined;
    readonly owner?: OwnerReference | undefined;
  },
): Report {
  const { fieldManager, maxResults = MAX_RESULTS, owner } = options;
  // Each finding's key once, not at each comparison: a namespace may have 10,000 of them.
  const sorted = findings.map((finding) => ({ finding, key: sortKey(finding) }))
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)).map(({ finding }) => finding);
  const kept = sorted.slice(0, maxResults);
  const omitted = sorted.length - kept.length;
  const count = (result: Finding['result']) => findings.filter((finding) => finding.result === result).length;
  return {
    apiVersion: REPORT_API_VERSION,
    kind: namespace ? 'PolicyReport' : 'ClusterPolicyReport',
    metadata: {
      name: reportName(fieldManager),
      ...(namespace ? { namespace } : {}),
      labels: reportLabels(fieldManager),
      ...(omitted > 0 ? { annotations: { [OMITTED_ANNOTATION]: String(omitted) } } : {}),
      ...(owner ? { ownerReferences: [owner] } : {}),
    },
    summary: { pass: 0, fail: count('fail'), warn: count('warn'), error: 0, skip: 0 },
    results: kept.map(resultOf),
  };
}

function resultOf(finding: Finding): ReportResult {
  const { apiVersion, kind, name, namespace, uid } = finding.object;
  return {
    source: SOURCE,
    policy: finding.policy,
    rule: finding.rule,
    category: 'labels',
    result: finding.result,
    message: finding.message,
    properties: { state: finding.state },
    resources: [{ apiVersion, kind, name, ...(namespace ? { namespace } : {}), uid }],
  };
}

/** Fail before warn, then by object (kind, namespace, name) and key: an order that does not depend on the caches'. */
export function compareFindings(a: Finding, b: Finding): number {
  const [x, y] = [sortKey(a), sortKey(b)];
  return x < y ? -1 : x > y ? 1 : 0;
}

/** The fields compared, in order, joined by a character none of them holds. */
function sortKey(f: Finding): string {
  const { kind, apiVersion, namespace, name, uid } = f.object;
  return [f.result === 'fail' ? '0' : '1', kind, apiVersion, namespace, name, uid, f.policy, f.rule].join('\0');
}
