// labeller's PolicyReports and ClusterPolicyReport on the API server: found by the labels they
// carry (report.ts), server-side applied under the field manager (forced: they are labeller's own
// objects, and a field another manager changed goes back), and deleted. Metadata-only lists: a
// report's namespace and uid are all the writer needs of those already there.
import type { ApiResource } from '../apimachinery/resource.ts';
import { MetadataApi } from '../kube/api.ts';
import type { KubeClient } from '../kube/client.ts';
import { type Report, REPORT_API_VERSION, reportSelector } from './report.ts';

const resource = (kind: Report['kind'], resource: string, namespaced: boolean): ApiResource => ({
  group: 'wgpolicyk8s.io',
  version: REPORT_API_VERSION.split('/')[1]!,
  resource,
  singular: kind.toLowerCase(),
  kind,
  shortNames: [],
  namespaced,
  verbs: ['create', 'get', 'list', 'watch', 'patch', 'delete'],
  preferred: true,
});

/** wgpolicyk8s.io/v1alpha2 policyreports: what the chart's CRD serves, and what the shard buckets of reports are counted by. */
export const POLICY_REPORTS = resource('PolicyReport', 'policyreports', true);
export const CLUSTER_POLICY_REPORTS = resource('ClusterPolicyReport', 'clusterpolicyreports', false);

/** One of labeller's reports on the API server: its namespace ('' for the ClusterPolicyReport). */
export interface ReportOnServer {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string | undefined;
}

/** What the writer needs of the API server. */
export interface ReportApi {
  list(signal?: AbortSignal): Promise<ReportOnServer[]>;
  apply(report: Report, options: { readonly dryRun: boolean; readonly signal?: AbortSignal }): Promise<void>;
  delete(report: ReportOnServer, options: { readonly dryRun: boolean; readonly signal?: AbortSignal }): Promise<void>;
}

export class ReportStore implements ReportApi {
  readonly #fieldManager: string;
  readonly #client: KubeClient;

  constructor(client: KubeClient, fieldManager: string) {
    this.#client = client;
    this.#fieldManager = fieldManager;
  }

  /** The field manager's reports in every namespace, and its ClusterPolicyReport. */
  async list(signal?: AbortSignal): Promise<ReportOnServer[]> {
    const found: ReportOnServer[] = [];
    for (const api of [this.#api(POLICY_REPORTS), this.#api(CLUSTER_POLICY_REPORTS)]) {
      let page: string | undefined;
      do {
        const list = await api.list({
          labelSelector: reportSelector(this.#fieldManager),
          limit: 500,
          continue: page,
          signal,
        });
        for (const { metadata } of list.items) {
          found.push({ namespace: metadata.namespace ?? '', name: metadata.name, uid: metadata.uid });
        }
        page = list.metadata.continue || undefined;
      } while (page);
    }
    return found;
  }

  /** Applies `report` whole: a result no longer in it leaves (results is an atomic list). */
  async apply(report: Report, options: { readonly dryRun: boolean; readonly signal?: AbortSignal }): Promise<void> {
    const api = this.#api(report.kind === 'PolicyReport' ? POLICY_REPORTS : CLUSTER_POLICY_REPORTS);
    await api.apply(report, {
      fieldManager: this.#fieldManager,
      force: true,
      dryRun: options.dryRun,
      signal: options.signal,
    });
  }

  /** Deletes `report` if it is still the one of its uid. */
  async delete(
    report: ReportOnServer,
    options: { readonly dryRun: boolean; readonly signal?: AbortSignal },
  ): Promise<void> {
    if (options.dryRun) return;
    const api = this.#api(report.namespace ? POLICY_REPORTS : CLUSTER_POLICY_REPORTS, report.namespace);
    await api.delete(report.name, { uid: report.uid, signal: options.signal });
  }

  #api(resource: ApiResource, namespace = ''): MetadataApi {
    return new MetadataApi(this.#client, resource, namespace);
  }
}
