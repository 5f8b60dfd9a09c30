// The permission preflight against the real API server's authorizer: `labeller status` and
// `labeller --once --dry-run` ask a SelfSubjectAccessReview for every right the controller would
// need with the config (each kind, the related objects its templates read, its ConfigMap source,
// Events and Leases), name what is missing with RBAC to apply, and exit 3 until it is granted.
// `--as` asks the same for another identity, as kubectl's --as does. With --shards auto it asks
// for the shard group's Leases too, which the chart's sharded RBAC grants.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { configFile, create, createNamespace, kubeconfig, serviceAccountKubeconfig, skip } from './cluster.ts';
import { installRbac, ownLabel } from './chart-rbac.ts';
import { containers, only, tempFile, tool } from './helm.ts';
import type { StatusReport } from '../../src/commands/status.ts';
import { Labeller } from '../process/labeller.ts';

describe('permission preflight', { skip }, () => {
  test('names each missing right and the RBAC that grants it; once applied, status passes; --as asks for another identity', async () => {
    const ns = await createNamespace('preflight');
    await create(`/api/v1/namespaces/${ns}/configmaps`, {
      metadata: { name: 'catalog', labels: { app: 'web' } },
      data: { web: 'cc-1' },
    });
    // Only list and watch on ConfigMaps here: no patch, nothing on namespaces, Events or Leases.
    const narrow = await serviceAccountKubeconfig(ns, 'narrow', [
      { apiGroups: [''], resources: ['configmaps'], verbs: ['list', 'watch'] },
    ]);
    const config = configFile(`
labels:
  team: "{{namespace.labels.team}}"
  example.com/cost-center: "{{catalog[labels.app]}}"
sources:
  catalog: {configMap: {namespace: ${ns}, name: catalog}}
kinds:
  - resource: configmaps
    namespaces: [${ns}]
`);
    const args = ['status', '--config', config, '--leader-elect', '--leader-elect-resource-namespace', ns];
    const status = async (extra: readonly string[], options: { kubeconfig?: string } = {}) => {
      const exit = await new Labeller([...args, ...extra], options).exited;
      return { ...exit, report: extra.includes('json') ? JSON.parse(exit.stdout) as StatusReport : undefined };
    };

    const before = await status(['-o', 'json'], { kubeconfig: narrow });
    assert.equal(before.code, 3, before.stderr);
    const permissions = before.report?.permissions;
    assert.equal(permissions?.user, `system:serviceaccount:${ns}:narrow`);
    const missing = permissions?.missing.map((need) =>
      `${need.verbs.join(',')} ${need.resource}${need.name ? `/${need.name}` : ''}@${need.namespace || '*'}`
    );
    assert.deepEqual(missing, [
      `patch configmaps@${ns}`,
      `list,watch namespaces/${ns}@*`,
      `create,patch events@${ns}`,
      `create leases@${ns}`,
      `get,update leases/labeller@${ns}`,
      // Every kind in a named namespace: the guard looks for other configs in labeller's own.
      `list leases@${ns}`,
      `get,update leases/labeller-field-manager@${ns}`,
      `delete leases/labeller-field-manager@${ns}`,
      `get,update leases/labeller-sources@${ns}`,
    ]);
    // The counts are there all the same: what it could list.
    assert.equal(before.report?.kinds[0]?.seen, 1);

    // An admin asks the same about the ServiceAccount with --as (impersonation).
    const as = await status(['-o', 'json', '--as', `system:serviceaccount:${ns}:narrow`]);
    assert.equal(as.code, 3, as.stderr);
    assert.deepEqual(as.report?.permissions, permissions);

    // --once --dry-run asks too (without leader election: a run that may not read its Lease waits
    // to lead for ever): each missing right and the RBAC in its log, exit 3.
    const dryRun = new Labeller(['--config', config, '--once', '--dry-run'], { kubeconfig: narrow });
    const dryRunExit = await dryRun.exited;
    assert.equal(dryRunExit.code, 3, dryRunExit.stderr);
    const logged = dryRun.logs.filter((l) => l.msg === 'labeller may not do what it needs');
    assert.deepEqual(logged.find((l) => l['resource'] === 'configmaps'), {
      ...logged.find((l) => l['resource'] === 'configmaps'),
      user: `system:serviceaccount:${ns}:narrow`,
      verbs: ['patch'],
      namespace: ns,
      for: 'kind configmaps',
    });
    assert.match(
      String(dryRun.logs.find((l) => l.msg.startsWith('grant the missing rights'))?.['rbac']),
      /kind: Role\n/,
    );

    // The table says the same for people, with the RBAC to apply.
    const table = await status([], { kubeconfig: narrow });
    assert.equal(table.code, 3);
    assert.match(
      table.stdout,
      new RegExp(`permissions: system:serviceaccount:${ns}:narrow lacks 14 of the \\d+ rights`),
    );
    assert.match(table.stdout, /^MISSING\s+RESOURCE\s+NAMESPACE\s+FOR$/m);
    assert.match(table.stdout, new RegExp(`^patch\\s+configmaps\\s+${ns}\\s+kind configmaps$`, 'm'));

    // The RBAC as printed, applied: nothing is missing, and status exits 0.
    const applied = await tool('kubectl', ['--kubeconfig', kubeconfig(), 'apply', '-f', '-'], permissions?.rbac);
    assert.equal(applied.code, 0, applied.stderr);
    const after = await status([], { kubeconfig: narrow });
    assert.equal(after.code, 0, after.stderr);
    assert.match(after.stdout, new RegExp(`^permissions: system:serviceaccount:${ns}:narrow has all \\d+ rights`, 'm'));

    // --preflight=false: counts only, as an identity that may only list needs.
    const off = await status(['--preflight=false', '-o', 'json'], { kubeconfig: narrow });
    assert.equal(off.code, 0, off.stderr);
    assert.equal(off.report?.permissions, undefined);
  });

  test("--shards auto: status and --once --dry-run ask for the shard group's Leases; the chart's sharded RBAC grants all the preflight asks", async () => {
    const ns = await createNamespace('preflight-shards');
    const narrow = await serviceAccountKubeconfig(ns, 'narrow', [
      { apiGroups: [''], resources: ['configmaps'], verbs: ['list', 'watch'] },
    ]);
    const sharded = ['--shards', 'auto', '--shard-group', 'pf-shards', '--leader-elect-resource-namespace', ns];
    const flags = ['--kinds', 'configmaps', '--label', 'team=platform', '--namespace', ns, ...sharded];
    const exit = await new Labeller(['status', ...flags, '-o', 'json'], { kubeconfig: narrow }).exited;
    assert.equal(exit.code, 3, exit.stderr);
    const missing = (JSON.parse(exit.stdout) as StatusReport).permissions?.missing.filter((need) =>
      need.resource === 'leases'
    ).map((need) =>
      `${need.verbs.join(',')} ${need.resource}${need.name ? `/${need.name}` : ''}@${
        need.namespace || '*'
      } for ${need.for}`
    );
    // Any name: a member's Lease is named after its identity; no leader-election Lease.
    assert.deepEqual(missing, [
      // The guard's list in labeller's own namespace (every kind in a named one) is among these.
      `get,list,create,update,delete leases@${ns} for shard group pf-shards`,
    ]);

    const dryRun = new Labeller([...flags, '--once', '--dry-run'], { kubeconfig: narrow });
    assert.equal((await dryRun.exited).code, 3, dryRun.stderr);
    assert.deepEqual(
      dryRun.logs.filter((l) => l.msg === 'labeller may not do what it needs' && l['resource'] === 'leases').map((
        l,
      ) => [l['verbs'], l['namespace'], l['for']]),
      [[['get', 'list', 'create', 'update', 'delete'], ns, 'shard group pf-shards']],
    );

    // The chart's sharded RBAC, through its ServiceAccount, with the Deployment's sharding flags.
    const { labels: own, selector } = ownLabel('preflight-shards');
    await create(`/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'app', labels: own } });
    const chart = await installRbac('preflight-chart', {
      labels: { team: 'platform' },
      kinds: [{ resource: 'configmaps' }],
      selector,
      replicaCount: 3,
      leaderElection: { enabled: false },
      sharding: { enabled: true },
    });
    const config = tempFile(
      'kinds.yaml',
      (only(chart.manifests, 'ConfigMap')['data'] as Record<string, string>)['kinds.yaml'] ?? '',
    );
    const args = (containers(only(chart.manifests, 'Deployment'))[0]?.args ?? []).filter((a) =>
      /^--(field-manager|selector|shards|shard-group|leader-elect)/.test(a)
    );
    assert.ok(args.includes('--shards=auto'), args.join(' '));
    const granted = await new Labeller(['status', '--config', config, ...args], { kubeconfig: chart.kubeconfig })
      .exited;
    assert.equal(granted.code, 0, `${granted.stdout}${granted.stderr}`);
    assert.match(granted.stdout, /^permissions: system:serviceaccount:\S+ has all \d+ rights labeller needs$/m);
  });
  test('every kind: the grants it recommends leave out Secrets, admission webhooks and policies, and CRDs (issue 46, item 8)', async () => {
    const ns = await createNamespace('preflight-every');
    const narrow = await serviceAccountKubeconfig(ns, 'narrow', [
      { apiGroups: [''], resources: ['configmaps'], verbs: ['list', 'watch'] },
    ]);
    const exit = await new Labeller(
      ['status', '--kinds', '*', '--label', 'team=platform', '--namespace', ns, '--events=false', '-o', 'json'],
      { kubeconfig: narrow },
    ).exited;
    assert.equal(exit.code, 3, exit.stderr);
    const report = JSON.parse(exit.stdout) as StatusReport;
    const resources = new Set(report.permissions?.missing.map((need) => need.resource));
    assert.ok(resources.has('pods') && resources.has('deployments'), [...resources].join(' '));
    for (const sensitive of ['secrets', 'mutatingwebhookconfigurations', 'customresourcedefinitions']) {
      assert.ok(!resources.has(sensitive), `${sensitive} recommended: ${[...resources].join(' ')}`);
    }
    assert.doesNotMatch(report.permissions?.rbac ?? '', /secrets|webhookconfigurations|admissionpolic/);
  });
});
