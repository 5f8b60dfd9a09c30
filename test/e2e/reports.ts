// What the PolicyReport e2e tests share: the chart's CRDs applied as `helm install` applies its
// crds/ (created when missing, left in place after), and a report read back.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import type { Report } from '../../src/reports/report.ts';
import { adminClient, eventually, kubeconfig } from './cluster.ts';
import { CHART, tool } from './helm.ts';

export const REPORTS = '/apis/wgpolicyk8s.io/v1alpha2';

/** Applies chart/crds/ (server-side, as helm's field manager) and waits until both kinds of report are served. */
export async function installReportCrds(): Promise<void> {
  const run = await tool('kubectl', [
    '--kubeconfig',
    kubeconfig(),
    'apply',
    '--server-side',
    '--field-manager=helm',
    '-f',
    join(CHART, 'crds'),
  ]);
  assert.equal(run.code, 0, run.stderr);
  const client = await adminClient();
  // Both, listed: a CRD just made answers 429 while its storage initializes.
  for (const resource of ['policyreports', 'clusterpolicyreports']) {
    await eventually(async () => Boolean(await client.json('GET', `${REPORTS}/${resource}`)), `${resource} served`);
  }
}

/** The report `name` in `namespace`, or undefined while there is none. */
export async function reportIn(namespace: string, name: string): Promise<Report | undefined> {
  const client = await adminClient();
  try {
    return await client.json<Report>('GET', `${REPORTS}/namespaces/${namespace}/policyreports/${name}`);
  } catch (error) {
    if (error instanceof Error && /\b404\b/.test(error.message)) return undefined;
    throw error;
  }
}
