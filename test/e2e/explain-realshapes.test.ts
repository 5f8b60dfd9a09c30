// `labeller explain` on a pod its Deployment's ReplicaSet made (issue 33): for each key the
// config sets, the rule, the inputs it read (the namespace's label, the root owner, the source's
// entry), the value wanted and there, its owners from managedFields, its state and what the next
// apply would do; and the keys labeller owns that the config no longer wants. What it says agrees
// with `status` on the same objects, and so does `status --coverage`.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ExplainReport } from '../../src/commands/explain.ts';
import type { StatusReport } from '../../src/commands/status.ts';
import type { KeyExplanation } from '../../src/labelling/explain.ts';
import { fullSkip } from '../cluster/testrun.ts';
import { Labeller } from '../process/labeller.ts';
import { configFile, create, eventually, patchLabels } from './cluster.ts';
import { deployment, type Pod, pods, workloadNamespace } from './workloads.ts';

const FIELD_MANAGER = 'labeller-explain-e2e';

const config = (ns: string, app: boolean) => `
sources:
  catalog:
    configMap: { namespace: ${ns}, name: catalog }
kinds:
  - resource: pods
    labels:
      example.com/cost-center: "{{catalog[namespace.labels.team]}}"
      ${app ? 'example.com/app: "{{root.kind}}.{{root.name}}"' : ''}
      example.com/tier: "{{labels.tier}}"
      example.com/team: red
`;

describe('explain', { skip: fullSkip }, () => {
  test(
    "says per key why a Deployment's pod carries it or not, reading only, and agrees with status",
    async () => {
      const ns = await workloadNamespace('explain');
      await patchLabels(`/api/v1/namespaces/${ns}`, { team: 'red' });
      await create(`/api/v1/namespaces/${ns}/configmaps`, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'catalog' },
        data: { red: 'cc-1' },
      });
      await create(`/apis/apps/v1/namespaces/${ns}/deployments`, deployment('web', 1));
      const pod = await eventually(async () => (await pods(ns))[0], "the Deployment's pod") as Pod;
      const common = ['--field-manager', FIELD_MANAGER, '--namespace', ns];
      const withApp = configFile(config(ns, true));
      const once = await new Labeller(['--config', withApp, ...common, '--once']).exited;
      assert.equal(once.code, 0, once.stderr);
      // Another manager sets a key the config wants to another value.
      await patchLabels(
        `/api/v1/namespaces/${ns}/pods/${pod.metadata.name}`,
        { 'example.com/team': 'blue' },
        'argocd-controller',
      );

      const explainOf = async (file: string) => {
        const run = await new Labeller(
          [
            'explain',
            `po/${pod.metadata.name}`,
            '-n',
            ns,
            '--config',
            file,
            '--field-manager',
            FIELD_MANAGER,
            '-o',
            'json',
          ],
        ).exited;
        assert.equal(run.code, 0, run.stderr);
        return JSON.parse(run.stdout) as ExplainReport;
      };
      const report = await explainOf(withApp);
      assert.deepEqual(report.object, {
        resource: 'pods',
        namespace: ns,
        name: pod.metadata.name,
        uid: pod.metadata.uid,
      });
      const keys = new Map(report.explanation?.keys.map((k) => [k.key, k]));
      const ours = [{ manager: FIELD_MANAGER, operation: 'Apply' }];
      assert.deepEqual(
        keys.get('example.com/cost-center'),
        {
          field: 'labels',
          key: 'example.com/cost-center',
          rule: `${withApp}: kinds[0].labels["example.com/cost-center"]`,
          template: '{{catalog[namespace.labels.team]}}',
          inputs: [
            { from: 'namespace', object: { kind: 'Namespace', name: ns }, read: 'labels.team', value: 'red' },
            { from: 'source', source: 'catalog', key: 'red', value: 'cc-1' },
          ],
          desired: 'cc-1',
          value: 'cc-1',
          owners: ours,
          state: 'applied',
          next: 'nothing',
        } satisfies KeyExplanation,
      );
      const app = keys.get('example.com/app');
      assert.deepEqual([app?.state, app?.desired, app?.inputs.at(-1)], ['applied', 'Deployment.web', {
        from: 'root',
        object: { kind: 'Deployment', name: 'web' },
        read: 'name',
        value: 'web',
      }]);
      const tier = keys.get('example.com/tier');
      assert.deepEqual([tier?.state, tier?.why, tier?.next], [
        'unwanted',
        'the object has no label tier, so the key is not wanted on this object',
        'nothing',
      ]);
      const team = keys.get('example.com/team');
      assert.deepEqual([team?.state, team?.desired, team?.value, team?.owners, team?.next], [
        'pending',
        'red',
        'blue',
        [{ manager: 'argocd-controller', operation: 'Update' }],
        'set to "red", taken over from argocd-controller (conflicts: force)',
      ]);
      assert.equal(report.explanation?.pending, true);
      assert.deepEqual(report.sources, { catalog: `ConfigMap ${ns}/catalog` });

      // status counts the same object the same way: pending, in conflict.
      const status = await new Labeller(['status', '--config', withApp, ...common, '-o', 'json']).exited;
      assert.equal(status.code, 0, status.stderr);
      const row = (JSON.parse(status.stdout) as StatusReport).kinds[0];
      assert.deepEqual([row?.seen, row?.managed, row?.pending, row?.conflicts], [1, 1, 1, 1]);

      // Coverage says the same per label: carried, or why not.
      const covered = await new Labeller(['status', '--coverage', '--config', withApp, ...common, '-o', 'json']).exited;
      assert.equal(covered.code, 0, covered.stderr);
      const coverage = (JSON.parse(covered.stdout) as StatusReport).kinds[0]?.coverage;
      assert.deepEqual(coverage?.map((c) => [c.key, c.covered, c.objects, c.ratio, c.shortfalls]), [
        ['example.com/cost-center', 1, 1, 1, {}],
        ['example.com/app', 1, 1, 1, {}],
        ['example.com/tier', 0, 1, 0, { 'unwanted: the object has no label tier': 1 }],
        ['example.com/team', 0, 1, 0, { contested: 1 }],
      ]);
      const coverageTable = await new Labeller(['status', '--coverage', '--config', withApp, ...common]).exited;
      assert.match(coverageTable.stdout, /^KIND +LABEL +COVERAGE +OBJECTS +SHORT OF IT$/m);
      assert.match(
        coverageTable.stdout,
        /^pods +example\.com\/tier +0\.0 % +0\/1 +1 unwanted: the object has no label tier$/m,
      );

      // A key the config no longer wants: labeller owns it, so the next apply removes it.
      const stale = await explainOf(configFile(config(ns, false)));
      assert.deepEqual(stale.explanation?.stale, [{
        field: 'labels',
        key: 'example.com/app',
        value: 'Deployment.web',
        owners: ours,
        next: 'removed',
      }]);

      // The table says the same to a person.
      const table = await new Labeller(
        ['explain', `pod/${pod.metadata.name}`, '-n', ns, '--config', withApp, '--field-manager', FIELD_MANAGER],
      ).exited;
      assert.equal(table.code, 0, table.stderr);
      assert.match(table.stdout, /^KEY +DESIRED +ON OBJECT +OWNERS +STATE +NEXT APPLY$/m);
      assert.match(
        table.stdout,
        /^example\.com\/team +red +blue +argocd-controller \(Update\) +pending +set to "red"/m,
      );
      assert.match(table.stdout, /read +namespace Namespace \S+: labels\.team = "red"/);
      assert.match(table.stdout, new RegExp(`source catalog \\(ConfigMap ${ns}/catalog\\): entry "red" = "cc-1"`));
      assert.match(table.stdout, /^next apply: changes the object$/m);

      // An object the config does not label is a usage error naming the fix.
      const unlabelled = await new Labeller(['explain', 'deploy/web', '-n', ns, '--config', withApp]).exited;
      assert.equal(unlabelled.code, 2);
      assert.match(
        unlabelled.fatal ?? '',
        /labeller does not label deployments\.apps: .*add "- resource: deployments"/,
      );
    },
  );
});
