// Admission policies never outlive labeller (issue 46, item 5), on the full control plane, whose
// garbage collector does the removing: with --admission-policies-owner (the chart's ClusterRole
// for them) every policy and binding depends on that object, so deleting it (helm uninstall, or an
// upgrade that turns the policies off) removes them, though no labeller runs then. An owner that
// does not exist is said, and no policy applied (it would be collected at once).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertCleanExit } from '../process/crash.ts';
import { Labeller } from '../process/labeller.ts';
import { policiesOf, policiesSkip } from './admission.ts';
import { adminClient, createNamespace, eventually, skip } from './cluster.ts';

const ROLES = '/apis/rbac.authorization.k8s.io/v1/clusterroles';

describe('admission policies depend on their owner', { skip: await policiesSkip(skip) }, () => {
  test('deleting the owner removes them through the garbage collector; a missing owner applies none and says why', {
    timeout: 180_000,
  }, async () => {
    const client = await adminClient();
    const ns = await createNamespace('admit-owner');
    const fieldManager = `labeller-owner-${ns.slice(-6)}`;
    const owner = `${fieldManager}-policies`;
    const args = [
      ...['--kinds', 'configmaps', '--namespace', ns, '--label', 'team=platform', '--field-manager', fieldManager],
      ...['--admission-policies', '--admission-policies-owner', `clusterrole/${owner}`, '--requeue-after', '0'],
    ];

    // No owner yet: nothing applied, and said.
    const early = new Labeller(args);
    try {
      await early.waitForLog((l) => l.msg === 'admission policies not applied: their owner cannot be read', 60_000);
      assert.deepEqual(await policiesOf(fieldManager), []);
    } finally {
      assertCleanExit(await early.stop());
    }

    await client.json('POST', ROLES, {
      body: JSON.stringify({ metadata: { name: owner }, rules: [] }),
      headers: { 'content-type': 'application/json' },
    });
    const labeller = new Labeller(args);
    try {
      await labeller.waitForLog(
        (l) => l.msg === 'admission policy applied' && l['kind'] === 'MutatingAdmissionPolicyBinding',
        60_000,
      );
    } finally {
      assertCleanExit(await labeller.stop());
    }
    // Stopped, it leaves them to their owner.
    assert.equal((await policiesOf(fieldManager)).length, 2);
    await client.json('DELETE', `${ROLES}/${owner}`);
    await eventually(async () => (await policiesOf(fieldManager)).length === 0, 'the policies collected', 60_000);
  });
});
