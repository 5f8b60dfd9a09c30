// Keys only labeller may set (issue 46), against the real API server: with `protect` and
// --admission-policies the controller keeps ValidatingAdmissionPolicies beside its mutating ones,
// and a tenant (a ServiceAccount that may edit ConfigMaps) can no longer change, remove or add a
// protected key, nor labeller's marker: the API server refuses it, with a message naming
// labeller, the key and where to change it. Keys that are not protected, and labeller's own
// writes (a reload that changes a value), pass. A create carrying another value gets labeller's,
// whatever `conflicts` says. `warn` lets the change through with a warning to the client; status
// says which policies protect in which mode, and explain shows a key's protection.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, describe, test } from 'node:test';
import type { StatusReport } from '../../src/commands/status.ts';
import { markerKeys } from '../../src/labelling/admitted.ts';
import { ConfigMapVolume } from '../cluster/configmapvolume.ts';
import { assertCleanExit } from '../process/crash.ts';
import { Labeller, runLabeller } from '../process/labeller.ts';
import { admission, apply, policiesOf, policiesSkip } from './admission.ts';
import {
  create,
  createNamespace,
  eventually,
  labelsOf,
  patchLabels,
  serviceAccountKubeconfig,
  skip,
} from './cluster.ts';
import { tool } from './helm.ts';

/** What a tenant may do: edit ConfigMaps, nothing more. */
const TENANT_RULES = [{
  apiGroups: [''],
  resources: ['configmaps'],
  verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'],
}];

describe('protected keys', { skip: await policiesSkip(skip) }, () => {
  test(
    'a tenant cannot change, remove or forge them; labeller can; a create gets its value; warn warns; status and explain say so',
    {
      timeout: 180_000,
    },
    async () => {
      const ns = await createNamespace('protect');
      await patchLabels(`/api/v1/namespaces/${ns}`, { team: 'payments' });
      const fieldManager = `protect-${ns.slice(-6)}`;
      const marker = markerKeys(fieldManager).labels;
      const config = (mode: string, tier: string) => `
labels: {team: "{{namespace.labels.team}}", tier: ${tier}}
conflicts: skip
protect: {mode: ${mode}, keys: [team]}
kinds: [{resource: configmaps, namespaces: [${ns}]}]
`;
      const volume = new ConfigMapVolume(config('deny', 'web'));
      after(() => rmSync(volume.dir, { recursive: true, force: true }));
      const tenant = await serviceAccountKubeconfig(ns, 'tenant', TENANT_RULES);
      const as = (kubeconfig: string, args: readonly string[]) =>
        tool('kubectl', ['--kubeconfig', kubeconfig, '-n', ns, ...args]);
      const labeller = new Labeller([
        ...['--config', volume.path, '--field-manager', fieldManager, '--admission-policies'],
        ...['--requeue-after', '0'],
      ]);
      after(async () => {
        if (labeller.running) assertCleanExit(await labeller.stop());
      });
      await labeller.waitForLog(
        (l) => l.msg === 'admission policy applied' && l['kind'] === 'ValidatingAdmissionPolicyBinding',
        60_000,
      );

      // At create, the mutating policy forces the protected key whatever `conflicts` says; the
      // unprotected one stays the creator's under skip.
      let probes = 0;
      const mine = await eventually(async () => {
        const made = await create<{ metadata: { name: string; labels?: Record<string, string> } }>(
          `/api/v1/namespaces/${ns}/configmaps`,
          { metadata: { name: `mine-${probes++}`, labels: { team: 'mine', tier: 'mine' } }, data: { a: '1' } },
        );
        return made.metadata.labels?.['team'] === 'payments' && made;
      }, 'the policies in force');
      assert.equal(mine.metadata.labels?.['tier'], 'mine', 'not protected: left to the creator under skip');
      const name = mine.metadata.name;

      // The tenant: refused on the protected key and the marker, with labeller's message; let
      // through elsewhere. The API server enforces a new binding a moment after it is applied.
      const message =
        /labeller keeps (label team|labeller's marker \S+) on this object, as its config says \(.*kinds\[0\], field manager protect-\w+\): change it there, not on the object/;
      await eventually(async () => {
        const run = await as(tenant, ['label', `configmap/${name}`, 'team=nobody', '--overwrite']);
        if (run.code === 0) await as(tenant, ['label', `configmap/${name}`, 'team=payments', '--overwrite']);
        return run.code !== 0 && message.test(run.stderr);
      }, 'the protection in force');
      const refused = [
        ['label', `configmap/${name}`, 'team=nobody', '--overwrite'],
        ['label', `configmap/${name}`, 'team-'],
        ['annotate', `configmap/${name}`, `${marker}=team=nobody`, '--overwrite'],
      ];
      for (const args of refused) {
        const run = await as(tenant, args);
        assert.notEqual(run.code, 0, `${args.join(' ')} passed`);
        assert.match(run.stderr, message);
      }
      assert.equal((await as(tenant, ['label', `configmap/${name}`, 'tier=other', '--overwrite'])).code, 0);
      assert.equal((await as(tenant, ['annotate', `configmap/${name}`, 'note=mine'])).code, 0);
      const path = `/api/v1/namespaces/${ns}/configmaps/${name}`;
      assert.equal((await labelsOf(path))['team'], 'payments');

      // labeller's own writes pass: the namespace's team changes, and so does the object's.
      await patchLabels(`/api/v1/namespaces/${ns}`, { team: 'search' });
      await eventually(async () => (await labelsOf(path))['team'] === 'search', 'labeller relabels the protected key');

      // status: the policy protecting, and its mode; explain: the key's protection.
      const status = await runLabeller([
        'status',
        ...['--config', volume.path, '--field-manager', fieldManager, '--admission-policies', '--preflight=false'],
        '-o',
        'json',
      ]);
      const report = JSON.parse(status.stdout) as StatusReport;
      assert.deepEqual(report.admissionPolicies?.protection?.map((p) => p.mode), ['deny']);
      const explained = await runLabeller([
        'explain',
        `configmap/${name}`,
        ...['-n', ns, '--config', volume.path, '--field-manager', fieldManager, '-o', 'json'],
      ]);
      const keys = (JSON.parse(explained.stdout) as { explanation: { keys: { key: string; protection?: string }[] } })
        .explanation.keys;
      assert.deepEqual(keys.map((k) => [k.key, k.protection]), [['team', 'deny'], ['tier', undefined]]);

      // warn: the change goes through, with the message as a warning; labeller puts its value back.
      const from = labeller.logs.length;
      volume.update(config('warn', 'web'));
      await labeller.waitForLog(
        (l) => l.msg === 'admission policy applied' && l['kind'] === 'ValidatingAdmissionPolicyBinding',
        60_000,
        from,
      );
      const warned = await eventually(async () => {
        const run = await as(tenant, ['label', `configmap/${name}`, `team=nobody-${probes++}`, '--overwrite']);
        return run.code === 0 && /Warning: .*labeller keeps label team/.test(run.stderr) && run;
      }, 'the warn binding in force');
      assert.equal(warned.code, 0);
      await eventually(async () => (await labelsOf(path))['team'] === 'search', 'put back by the controller');
      assertCleanExit(await labeller.stop());

      // prune under deny, as another identity than the one the policies let through (as the
      // chart's cleanup Job runs): it deletes the policies first, then removes the keys.
      volume.update(config('deny', 'web'));
      await apply((await admission(['--config', volume.path, '--field-manager', fieldManager])).stdout, fieldManager);
      const pruner = await serviceAccountKubeconfig(ns, 'pruner', [
        { apiGroups: [''], resources: ['configmaps'], verbs: ['list', 'watch', 'patch'] },
        { apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list', 'watch'] },
        { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['*'] },
        {
          apiGroups: ['admissionregistration.k8s.io'],
          resources: [
            'mutatingadmissionpolicies',
            'mutatingadmissionpolicybindings',
            'validatingadmissionpolicies',
            'validatingadmissionpolicybindings',
          ],
          verbs: ['list', 'delete'],
        },
      ]);
      const pruned = await runLabeller(['prune', '--config', volume.path, '--field-manager', fieldManager], {
        kubeconfig: pruner,
      });
      assert.equal(pruned.code, 0, pruned.stderr);
      assert.deepEqual(await policiesOf(fieldManager), []);
      assert.equal((await labelsOf(path))['team'], undefined, 'removed by prune');
    },
  );
});
