// Permissions and kinds that change under a running labeller: RBAC for one kind revoked and
// granted again, and a watched CRD deleted and created again. Each is reported, retried with
// backoff, leaves the other kinds working, and is watched again once it is back.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertCleanExit } from '../process/crash.ts';
import { auditEvents, byLabeller, receivedAt } from '../cluster/audit.ts';
import { Cluster, type PolicyRule } from '../cluster/cluster.ts';
import { eventually } from '../process/eventually.ts';
import { figure } from '../process/figures.ts';
import { sharedKubeconfig, skip } from '../cluster/testrun.ts';
import { Labeller, type LogLine, watchFailed } from '../process/labeller.ts';
import { sleep } from '../process/sleep.ts';

const verbs = ['get', 'list', 'watch', 'patch'];

/** The retry delays of a kind's failed watches, in order. */
const retries = (lines: readonly LogLine[], kind: string): number[] =>
  lines.filter((l) => watchFailed(l) && l['kind'] === kind).map((l) => Number(l['retryInMs']));

describe('permissions and kinds changing at runtime', { skip }, () => {
  let cluster: Cluster;
  before(async () => {
    cluster = await Cluster.connect(sharedKubeconfig());
  });
  after(() => cluster?.close());

  test('RBAC for secrets revoked, then granted again: reported and retried with backoff, config maps unaffected, secrets labelled again', async (t) => {
    const ns = await cluster.namespace('revoked');
    const cms = `/api/v1/namespaces/${ns}/configmaps`;
    const secrets = `/api/v1/namespaces/${ns}/secrets`;
    await cluster.post(cms, { metadata: { name: 'cm-0' } });
    await cluster.post(secrets, { metadata: { name: 's-0' }, stringData: { k: 'v' } });
    const both: PolicyRule[] = [{ apiGroups: [''], resources: ['configmaps', 'secrets'], verbs }];
    const sa = await cluster.serviceAccount(ns, 'labeller', both);
    // A short watch timeout: an open watch is not cut when RBAC changes, the next one is refused.
    const labeller = new Labeller([
      '--kinds',
      'configmaps,secrets',
      '--label',
      'team=platform',
      '--namespace',
      ns,
      '--watch-timeout',
      '2s',
    ], { kubeconfig: sa.kubeconfig });
    try {
      await eventually(
        async () =>
          (await cluster.labelsOf(`${secrets}/s-0`))['team'] === 'platform' &&
          (await cluster.labelsOf(`${cms}/cm-0`))['team'] === 'platform',
        'both kinds labelled',
      );

      // Revoke secrets, keep config maps.
      const mark = labeller.logs.length;
      const revokedAt = Date.now();
      await cluster.setRules(sa.role, [{ apiGroups: [''], resources: ['configmaps'], verbs }]);
      const refused = await labeller.waitForLog((l) => watchFailed(l) && l['kind'] === 'Secret', 15_000, mark);
      assert.match(String(refused['error']), /403 Forbidden: .*secrets.*grant this identity list\/watch\/patch/);
      // A secret labelled by nobody while revoked; a config map must still be labelled.
      await cluster.post(secrets, { metadata: { name: 's-1' }, stringData: { k: 'v' } });
      await cluster.post(cms, { metadata: { name: 'cm-1' } });
      await eventually(
        async () => (await cluster.labelsOf(`${cms}/cm-1`))['team'] === 'platform',
        'config maps still labelled while secrets are forbidden',
        10_000,
      );
      await sleep(8000);
      const whileRevoked = retries(labeller.since(mark), 'Secret');
      assert.ok(
        whileRevoked.length >= 2 && whileRevoked.length <= 6,
        `secrets retried with backoff while forbidden: ${whileRevoked.map(Math.round).join(', ')} ms`,
      );
      for (let i = 1; i < whileRevoked.length; i++) {
        assert.ok(
          whileRevoked[i]! >= whileRevoked[i - 1]! * 0.5,
          `the delays grow: ${whileRevoked.map(Math.round).join(', ')}`,
        );
      }
      assert.equal((await cluster.labelsOf(`${secrets}/s-1`))['team'], undefined);

      // Grant again: the kind is watched again and the secret made meanwhile gets its label.
      const grantedAt = Date.now();
      await cluster.setRules(sa.role, both);
      await eventually(
        async () => (await cluster.labelsOf(`${secrets}/s-1`))['team'] === 'platform',
        'the secret created while forbidden to be labelled once allowed again',
        90_000,
        200,
      );
      const recovered = Date.now();
      figure(
        t,
        `RBAC revoked for ${
          ((grantedAt - revokedAt) / 1000).toFixed(0)
        } s: ${whileRevoked.length} watch retries meanwhile (${
          whileRevoked.map((ms) => (ms / 1000).toFixed(1)).join(', ')
        } s), secrets labelled again ${((recovered - grantedAt) / 1000).toFixed(1)} s after the grant`,
      );
      assert.ok(labeller.running);
    } finally {
      const exit = await labeller.stop();
      labeller.kill();
      assertCleanExit(exit);
    }
  });

  test('a watched CRD deleted and created again: reported and retried, config maps unaffected, the new objects labelled, the old ones not recreated', async (t) => {
    const ns = await cluster.namespace('crd-again');
    const group = `${ns}.example.com`;
    const cms = `/api/v1/namespaces/${ns}/configmaps`;
    const widgets = `/apis/${group}/v1/namespaces/${ns}/widgets`;
    await cluster.createCrd(group, 'widgets', 'Widget');
    cluster.onClose(() => cluster.delete(`/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.${group}`));
    const widget = (name: string) => ({ apiVersion: `${group}/v1`, kind: 'Widget', metadata: { name } });
    await cluster.post(widgets, widget('old'));
    const labeller = new Labeller([
      '--kinds',
      `configmaps,widgets.${group}`,
      '--label',
      'team=platform',
      '--namespace',
      ns,
      '--watch-timeout',
      '2s',
    ], { kubeconfig: cluster.kubeconfig });
    try {
      await eventually(
        async () => (await cluster.labelsOf(`${widgets}/old`))['team'] === 'platform',
        'the widget labelled',
      );
      const mark = labeller.logs.length;
      const deletedAt = Date.now();
      await cluster.deleteCrd(group, 'widgets');
      const gone = await labeller.waitForLog((l) => watchFailed(l) && l['kind'] === 'Widget', 20_000, mark);
      assert.match(String(gone['error']), /404|not found/i);
      await cluster.post(cms, { metadata: { name: 'during' } });
      await eventually(
        async () => (await cluster.labelsOf(`${cms}/during`))['team'] === 'platform',
        'config maps labelled while the CRD is gone',
        10_000,
      );
      await sleep(5000);
      const whileGone = retries(labeller.since(mark), 'Widget');

      const recreatedAt = Date.now();
      await cluster.createCrd(group, 'widgets', 'Widget');
      await cluster.post(widgets, widget('new'));
      await eventually(
        async () => (await cluster.labelsOf(`${widgets}/new`))['team'] === 'platform',
        'the widget of the re-created CRD to be labelled',
        90_000,
        200,
      );
      const recovered = Date.now();
      await sleep(1000);
      const names = [...(await cluster.labelsByName(widgets)).keys()];
      assert.deepEqual(names, ['new'], 'the widget deleted with the CRD was not recreated');
      const audit = process.env['E2E_AUDIT_LOG'];
      const creates = !audit
        ? []
        : auditEvents(audit, (e) =>
          byLabeller(e) && e.verb === 'create' && e.objectRef?.namespace === ns && receivedAt(e) >= deletedAt);
      assert.equal(creates.length, 0, 'labeller never creates');
      figure(
        t,
        `CRD deleted for ${
          ((recreatedAt - deletedAt) / 1000).toFixed(0)
        } s: ${whileGone.length} watch retries meanwhile (${
          whileGone.map((ms) => (ms / 1000).toFixed(1)).join(', ')
        } s), new widget labelled ${((recovered - recreatedAt) / 1000).toFixed(1)} s after the CRD came back`,
      );
    } finally {
      const exit = await labeller.stop();
      labeller.kill();
      assertCleanExit(exit);
    }
  });
});
