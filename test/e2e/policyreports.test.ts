// PolicyReports against the real API server (--policy-reports), with the CRDs the chart ships
// (chart/crds/, applied as helm installs them) and the chart's RBAC: a namespace's report appears
// with a result per object and key not as the config wants (another manager's value kept under
// `conflicts: skip`, a key whose template reads a namespace label that is not there), follows the
// objects (a second conflict is added, a fixed key leaves), and is deleted once it has nothing to
// say; the writes to reports stay a handful. A key held because its source has not loaded is a
// warning until it loads.
import assert from 'node:assert/strict';
import { basename } from 'node:path';
import { describe, test } from 'node:test';
import { type Report, reportName } from '../../src/reports/report.ts';
import { byLabeller } from '../cluster/audit.ts';
import { Labeller } from '../process/labeller.ts';
import {
  adminClient,
  type AuditEvent,
  auditSkip,
  auditTail,
  create,
  createNamespace,
  eventually,
  patchLabels,
  skip,
} from './cluster.ts';
import { createConfigMap, installRbac, labelled } from './chart-rbac.ts';
import { flagValue, localArgs } from './helm.ts';
import { installReportCrds, reportIn } from './reports.ts';

const KEY = 'example.com/team';

/** A report's results as `name state message`, in its order. */
const brief = (report: Report | undefined) =>
  report?.results.map((r) => `${r.resources[0]?.name} ${r.properties['state']} ${r.message}`);

describe('PolicyReports', { skip }, () => {
  test(
    'reports appear for conflicts and shortfalls, follow the objects, and are deleted once fixed, with the chart’s CRDs and RBAC',
    { skip: auditSkip, timeout: 240_000 },
    async () => {
      // As `helm install` does with crds/: applied when missing, left in place after.
      await installReportCrds();
      const client = await adminClient();

      const shop = await createNamespace('reports-shop');
      const bare = await createNamespace('reports-bare');
      await patchLabels(`/api/v1/namespaces/${shop}`, { team: 'payments' });
      const { manifests, kubeconfig: identity } = await installRbac('reports', {
        watchNamespaces: [shop, bare],
        labels: { [KEY]: '{{namespace.labels.team}}' },
        conflicts: 'skip',
        kinds: [{ resource: 'configmaps' }],
        policyReports: { enabled: true },
      });
      await createConfigMap(shop, 'ok', {});
      await createConfigMap(shop, 'contested', { [KEY]: 'blue' });
      await createConfigMap(bare, 'orphan', {});
      const writes = auditTail((e: AuditEvent) =>
        byLabeller(e) && e.objectRef?.resource === 'policyreports' && e.verb !== 'list' && e.verb !== 'get'
      );
      const args = localArgs(manifests, { leaderElection: false });
      assert.ok(args.includes('--policy-reports'), 'the chart passes --policy-reports');
      const labeller = new Labeller(args, { kubeconfig: identity });
      try {
        await eventually(() => labelled(`/api/v1/namespaces/${shop}/configmaps/ok`, { [KEY]: 'payments' }), 'ok');
        const name = reportName(flagValue(args, '--field-manager') ?? '');
        const first = await eventually(async () => {
          const report = await reportIn(shop, name);
          return report?.results.length === 1 && report;
        }, 'the shop report');
        assert.deepEqual(brief(first), ['contested conflict set to "blue" by another field manager']);
        const [result] = first.results;
        assert.equal(result?.result, 'fail');
        assert.equal(result?.rule, KEY);
        // The config entry, its file by its name alone (the chart mounts it as kinds.yaml).
        assert.equal(result?.policy, `${basename(flagValue(args, '--config') ?? '')}: kinds[0]`);
        assert.equal(result?.source, 'labeller');
        const contested = await client.json<{ metadata: { uid: string } }>(
          'GET',
          `/api/v1/namespaces/${shop}/configmaps/contested`,
        );
        assert.deepEqual(result?.resources, [{
          apiVersion: 'v1',
          kind: 'ConfigMap',
          name: 'contested',
          namespace: shop,
          uid: contested.metadata.uid,
        }]);
        assert.deepEqual(first.summary, { pass: 0, fail: 1, warn: 0, error: 0, skip: 0 });
        // A dependent of the release's ClusterRole for reports: helm uninstall removes it.
        assert.deepEqual(first.metadata.ownerReferences?.map((o) => `${o.kind}/${o.name}`), [
          `ClusterRole/${flagValue(args, '--policy-reports-owner')?.split('/')[1]}`,
        ]);
        const orphan = await eventually(() => reportIn(bare, name), 'the bare report');
        assert.deepEqual(brief(orphan), [
          'orphan shortfall its namespace has no label team, so the key is not wanted on this object',
        ]);

        // Another conflict joins the report.
        await createConfigMap(shop, 'also-contested', { [KEY]: 'green' });
        await eventually(async () => (await reportIn(shop, name))?.results.length === 2, 'the second result');
        assert.deepEqual(brief(await reportIn(shop, name)), [
          'also-contested conflict set to "green" by another field manager',
          'contested conflict set to "blue" by another field manager',
        ]);

        // Fixed: the other manager lets go of one key (labeller sets it), the bare namespace gets its label.
        await patchLabels(`/api/v1/namespaces/${shop}/configmaps/contested`, { [KEY]: null });
        await patchLabels(`/api/v1/namespaces/${bare}`, { team: 'ops' });
        await eventually(
          () => labelled(`/api/v1/namespaces/${shop}/configmaps/contested`, { [KEY]: 'payments' }),
          'contested labelled',
        );
        await eventually(async () => (await reportIn(shop, name))?.results.length === 1, 'the fixed result gone');
        await eventually(async () => (await reportIn(bare, name)) === undefined, 'the bare report deleted');

        // The last one fixed: the shop report goes too.
        await patchLabels(`/api/v1/namespaces/${shop}/configmaps/also-contested`, { [KEY]: null });
        await eventually(async () => (await reportIn(shop, name)) === undefined, 'the shop report deleted');

        // Batched: each change above cost at most a write or two, whatever labeller recomputed.
        const sent = writes().filter((e) => e.responseStatus?.code !== undefined && e.responseStatus.code < 300);
        assert.ok(
          sent.length <= 8,
          `${sent.length} writes: ${sent.map((e) => `${e.verb} ${e.requestURI}`).join(', ')}`,
        );
        // The chart's RBAC is enough for the reports: nothing refused (a retry after a passing failure may be said).
        const refused = labeller.logs.filter((l) =>
          l['component'] === 'policy-reports' &&
          /\b403\b|forbidden|not written:/i.test(`${l.msg} ${String(l['error'])}`)
        );
        assert.deepEqual(refused, []);
      } finally {
        const exit = await labeller.stop();
        assert.equal(exit.code, 0, exit.stderr);
      }
    },
  );

  test(
    'a key held because its source has not loaded is a warning, gone once the source loads',
    { timeout: 120_000 },
    async () => {
      await installReportCrds();
      const watched = await createNamespace('reports-held');
      const platform = await createNamespace('reports-held-platform');
      const { manifests, kubeconfig: identity } = await installRbac('reports-held', {
        watchNamespaces: [watched],
        labels: { 'example.com/cost-center': '{{teams[name].costCenter}}' },
        sources: { teams: { configMap: { namespace: platform, name: 'teams', key: 'teams.yaml' } } },
        kinds: [{ resource: 'configmaps' }],
        policyReports: { enabled: true },
      });
      await createConfigMap(watched, 'app', {});
      const args = localArgs(manifests, { leaderElection: false });
      const name = reportName(flagValue(args, '--field-manager') ?? '');
      const labeller = new Labeller(args, { kubeconfig: identity });
      try {
        const held = await eventually(() => reportIn(watched, name), 'the report');
        assert.deepEqual(held.results.map((r) => [r.result, r.rule, r.properties['state'], r.message]), [
          ['warn', 'example.com/cost-center', 'held', 'source teams has not loaded'],
        ]);
        assert.deepEqual(held.summary, { pass: 0, fail: 0, warn: 1, error: 0, skip: 0 });
        await create(`/api/v1/namespaces/${platform}/configmaps`, {
          metadata: { name: 'teams' },
          data: { 'teams.yaml': 'app: { costCenter: cc-1234 }\n' },
        });
        await eventually(
          () => labelled(`/api/v1/namespaces/${watched}/configmaps/app`, { 'example.com/cost-center': 'cc-1234' }),
          'labelled from the source',
        );
        await eventually(async () => (await reportIn(watched, name)) === undefined, 'the report deleted');
      } finally {
        const exit = await labeller.stop();
        assert.equal(exit.code, 0, exit.stderr);
      }
    },
  );
});
