// PolicyReports never outlive labeller's install, on the full control plane, whose garbage
// collector does the removing: with --policy-reports-owner (the chart's ClusterRole for them)
// every report depends on that object, so deleting it (helm uninstall, or an upgrade that turns
// the reports off) removes them, though no labeller runs then. A missing owner is said, and no
// report written (it would be collected at once).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { reportName } from '../../src/reports/report.ts';
import { assertCleanExit } from '../process/crash.ts';
import { Labeller } from '../process/labeller.ts';
import { adminClient, create, createNamespace, eventually, skip } from './cluster.ts';
import { installReportCrds, reportIn } from './reports.ts';

const ROLES = '/apis/rbac.authorization.k8s.io/v1/clusterroles';

describe('PolicyReports depend on their owner', { skip }, () => {
  test('deleting the owner removes them through the garbage collector; a missing owner writes none and says why', {
    timeout: 180_000,
  }, async () => {
    await installReportCrds();
    const client = await adminClient();
    const ns = await createNamespace('reports-owner');
    const fieldManager = `labeller-reports-${ns.slice(-6)}`;
    const owner = `${fieldManager}-reports`;
    await create(`/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'short' }, data: {} });
    const args = [
      ...['--kinds', 'configmaps', '--namespace', ns, '--label', 'team={{namespace.labels.team}}'],
      ...['--field-manager', fieldManager, '--policy-reports', '--policy-reports-owner', `clusterrole/${owner}`],
    ];
    const name = reportName(fieldManager);

    // No owner yet: nothing written, and said.
    const early = new Labeller(args);
    try {
      await early.waitForLog((l) => /^policy reports not written: clusterrole\/.* does not exist/.test(l.msg), 60_000);
      assert.equal(await reportIn(ns, name), undefined);
    } finally {
      assertCleanExit(await early.stop());
    }

    await create(ROLES, { metadata: { name: owner }, rules: [] });
    const labeller = new Labeller(args);
    try {
      const report = await eventually(() => reportIn(ns, name), 'the report', 60_000);
      assert.deepEqual(report.metadata.ownerReferences?.map((o) => `${o.kind}/${o.name}`), [`ClusterRole/${owner}`]);
    } finally {
      assertCleanExit(await labeller.stop());
    }
    // Stopped, it leaves the report to its owner.
    assert.ok(await reportIn(ns, name));
    await client.json('DELETE', `${ROLES}/${owner}`);
    await eventually(async () => (await reportIn(ns, name)) === undefined, 'the report collected', 60_000);
  });
});
