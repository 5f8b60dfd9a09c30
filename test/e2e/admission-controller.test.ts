// The controller keeping its admission policies in force (--admission-policies, issue 36 part 2),
// against the real API server. Where it serves admissionregistration.k8s.io/v1 (1.36 and later):
// the policies and bindings are applied under labeller's field manager and label objects in their
// create response; a live reload that changes a value and drops a kind changes the one policy and
// deletes the other with its binding; a policy the API server refuses (its params a ConfigMap, and
// labeller, run as a ServiceAccount, may not get every ConfigMap) is reported (log, Event, /readyz
// note, metric) while the others and the controller carry on; status lists them; a
// second labeller of another config under the field manager is refused by the guard and touches
// nothing; --dry-run applies nothing; prune, even without the flag, removes them all. Where the
// server does not serve them (1.30–1.35): one line says so, and the controller labels as ever,
// with no error. Each config limits the policies to this file's namespaces: they act on every
// create of the shared cluster.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { after, describe, test } from 'node:test';
import { policyName, policySelector } from '../../src/admission/names.ts';
import type { StatusReport } from '../../src/commands/status.ts';
import { isConflict, isNotFound } from '../../src/apimachinery/errors.ts';
import { type PolicyObject, PolicyStore } from '../../src/policies/store.ts';
import { ConfigMapVolume } from '../cluster/configmapvolume.ts';
import { freePorts } from '../controlplane/controlplane.ts';
import { assertCleanExit } from '../process/crash.ts';
import { Labeller, type LogLine, runLabeller } from '../process/labeller.ts';
import { scrape } from '../process/metrics.ts';
import { loadAll } from 'js-yaml';
import {
  adminClient,
  configFile,
  create,
  createNamespace,
  eventually,
  labelsOf,
  patchLabels,
  type PolicyRule,
  serviceAccountKubeconfig,
  skip,
} from './cluster.ts';
import { admission, apply, policiesOf, servesPolicies } from './admission.ts';
import { tool } from './helm.ts';
import { kubeconfig } from './cluster.ts';

const API = '/apis/admissionregistration.k8s.io/v1';
const KINDS = ['mutatingadmissionpolicies', 'mutatingadmissionpolicybindings'] as const;

interface Policy {
  readonly metadata: {
    readonly name: string;
    readonly resourceVersion: string;
    readonly managedFields?: readonly { readonly manager: string; readonly operation: string }[];
  };
  readonly spec: { readonly variables?: readonly { readonly expression: string }[] };
}

interface Created {
  readonly metadata: { readonly name: string; readonly labels?: Record<string, string> };
}

/** A policy or binding of `fieldManager`'s, or undefined when there is none of that name. */
async function read(kind: (typeof KINDS)[number], name: string): Promise<Policy | undefined> {
  const client = await adminClient();
  try {
    return await client.json<Policy>('GET', `${API}/${kind}/${name}`);
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
  }
}

/** Deletes `fieldManager`'s policies once the file's tests end, whatever they left. */
function cleanUp(fieldManager: string): void {
  after(async () => {
    await tool('kubectl', [
      '--kubeconfig',
      kubeconfig(),
      'delete',
      KINDS.join(','),
      '-l',
      policySelector(fieldManager),
    ]);
  });
}

const withName = (name: string) => (line: LogLine) => line['name'] === name;

/**
 * What the controller of the first test needs, as a ServiceAccount, and no more: its kinds, the
 * namespaces, Leases (guard, sources' memory), Events, its policies and bindings as the preflight
 * asks (server-side apply creates and changes them, the others are listed and deleted), and on
 * ConfigMaps no `get`: the source is watched by name, and the API server lets only whoever may get
 * every ConfigMap create a policy whose params are one.
 */
const CONTROLLER_RULES: readonly PolicyRule[] = [
  { apiGroups: [''], resources: ['configmaps', 'secrets', 'services'], verbs: ['list', 'watch', 'patch'] },
  { apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list', 'watch'] },
  { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list', 'create', 'update', 'delete'] },
  { apiGroups: ['', 'events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
  { apiGroups: ['admissionregistration.k8s.io'], resources: [...KINDS], verbs: ['list', 'create', 'patch', 'delete'] },
];

/** What `labeller status --admission-policies -o json` says of the policies, for the config of `args`. */
async function policyStatus(args: readonly string[]): Promise<StatusReport['admissionPolicies']> {
  const status = await runLabeller(['status', ...args, '--admission-policies', '--preflight=false', '-o', 'json']);
  assert.equal(status.code, 0, status.stderr);
  return (JSON.parse(status.stdout) as StatusReport).admissionPolicies;
}

describe('the controller keeps its admission policies in force', { skip }, () => {
  test(
    'applied under its field manager, labelling creates; a reload changes and deletes them; a refused policy is reported while the rest works; the guard, --dry-run and prune',
    { timeout: 300_000 },
    async (t) => {
      if (!(await servesPolicies(await adminClient()))) {
        t.skip('the API server does not serve admissionregistration.k8s.io/v1: see the controller-only test');
        return;
      }
      const client = await adminClient();
      const ns = await createNamespace('admit-ctl');
      await patchLabels(`/api/v1/namespaces/${ns}`, { team: 'payments' });
      const fieldManager = `admit-ctl-${randomBytes(3).toString('hex')}`;
      cleanUp(fieldManager);
      const policy = (...parts: string[]) => policyName(fieldManager, ...parts);
      await create(`/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'tiers' }, data: { web: 'frontend' } });
      const kinds = (managed: string, secrets: boolean) => `
labels:
  example.com/managed: ${managed}
  example.com/team: "{{namespace.labels.team}}"
sources:
  tiers: {configMap: {namespace: ${ns}, name: tiers}}
kinds:
  - resource: configmaps
    namespaces: [${ns}]
${secrets ? `  - resource: secrets\n    namespaces: [${ns}]\n` : ''}  - resource: services
    namespaces: [${ns}]
    labels:
      # A lookup in a ConfigMap source without key: a policy of its own, its params the ConfigMap,
      # which the API server refuses to labeller (it may not get every ConfigMap).
      example.com/tier: "{{tiers[labels.app]}}"
`;
      const volume = new ConfigMapVolume(kinds('labeller', true));
      after(() => rmSync(volume.dir, { recursive: true, force: true }));
      const [port] = await freePorts(1);
      const account = await serviceAccountKubeconfig(ns, 'labeller', CONTROLLER_RULES);
      const labeller = new Labeller([
        '--config',
        volume.path,
        '--field-manager',
        fieldManager,
        '--admission-policies',
        '--http-port',
        String(port),
      ], { kubeconfig: account, env: { POD_NAME: 'labeller-0', POD_NAMESPACE: ns } });
      try {
        const applied = (name: string, kind: string, from = 0) =>
          labeller.waitForLog(
            (l) => l.msg === 'admission policy applied' && l['name'] === name && l['kind'] === kind,
            30_000,
            from,
          );
        for (const kind of ['configmaps', 'secrets', 'services']) {
          await applied(policy(kind), 'MutatingAdmissionPolicy');
          await applied(policy(kind), 'MutatingAdmissionPolicyBinding');
        }
        // Owned by labeller's field manager, applied.
        for (const kind of KINDS) {
          const object = await read(kind, policy('configmaps'));
          assert.deepEqual(
            object?.metadata.managedFields?.map((f) => `${f.manager}/${f.operation}`),
            [`${fieldManager}/Apply`],
            kind,
          );
        }

        // The policy reading the source, which the API server refuses: a log line naming it, an
        // Event on labeller's Pod, a /readyz note (ready all the same), the gauge; its binding never
        // applied.
        const refused = await labeller.waitForLog(
          (l) => l.msg.startsWith('admission policy refused') && withName(policy('services', 'tiers'))(l),
        );
        t.diagnostic(String(refused['error']));
        assert.equal(refused.level, 'error');
        assert.equal(refused['kind'], 'MutatingAdmissionPolicy');
        assert.match(
          String(refused['error']),
          /^spec\.paramKind: Forbidden: user .* must have "get" permission on all objects of the referenced paramKind \(kind=ConfigMap/,
        );
        assert.equal(await read('mutatingadmissionpolicies', policy('services', 'tiers')), undefined);
        assert.equal(await read('mutatingadmissionpolicybindings', policy('services', 'tiers')), undefined);
        const readyz = await eventually(async () => {
          const response = await fetch(`http://127.0.0.1:${port}/readyz`);
          const text = await response.text();
          return response.ok && text.includes('refused') && text;
        }, '/readyz ok, noting the refusal');
        assert.match(
          readyz,
          new RegExp(`admission MutatingAdmissionPolicy ${policy('services', 'tiers')}: refused by the API server`),
        );
        assert.equal(await scrape(port!, 'labeller_admission_policies', { state: 'applied' }), 3);
        assert.equal(await scrape(port!, 'labeller_admission_policies', { state: 'refused' }), 1);
        const event = await eventually(async () => {
          const list = await client.json<{ items: { reason: string; note: string; regarding: { name: string } }[] }>(
            'GET',
            `/apis/events.k8s.io/v1/namespaces/${ns}/events`,
          );
          return list.items.find((e) => e.reason === 'AdmissionPolicyRefused');
        }, 'the AdmissionPolicyRefused Event');
        assert.equal(event.regarding.name, 'labeller-0');
        assert.match(event.note, new RegExp(`MutatingAdmissionPolicy ${policy('services', 'tiers')} refused`));

        // Objects created from now on carry their labels in the create response (the API server
        // enforces a new policy within a few seconds); the refused policy's, from the controller.
        let probes = 0;
        const configMap = await eventually(async () => {
          const created = await create<Created>(`/api/v1/namespaces/${ns}/configmaps`, {
            metadata: { name: `probe-${probes++}` },
          });
          return created.metadata.labels?.['example.com/team'] === 'payments' && created;
        }, 'a ConfigMap labelled at its create');
        assert.deepEqual(configMap.metadata.labels, {
          'example.com/managed': 'labeller',
          'example.com/team': 'payments',
        });
        const secret = await create<Created>(`/api/v1/namespaces/${ns}/secrets`, { metadata: { name: 'secret' } });
        assert.equal(secret.metadata.labels?.['example.com/managed'], 'labeller');
        const service = await eventually(async () => {
          const created = await create<Created>(`/api/v1/namespaces/${ns}/services`, {
            metadata: { name: `web-${probes++}`, labels: { app: 'web' } },
            spec: { ports: [{ port: 80 }] },
          });
          return created.metadata.labels?.['example.com/team'] === 'payments' && created;
        }, 'a Service labelled at its create');
        assert.equal(service.metadata.labels?.['example.com/tier'], undefined, 'its source policy refused');
        await eventually(
          async () =>
            (await labelsOf(`/api/v1/namespaces/${ns}/services/${service.metadata.name}`))['example.com/tier'] ===
              'frontend',
          'the controller to label the service',
        );

        // status: the policies in force, and that the server serves them.
        assert.deepEqual(await policyStatus(['--config', volume.path, '--field-manager', fieldManager]), {
          served: true,
          policies: [policy('configmaps'), policy('secrets'), policy('services')],
          bindings: [policy('configmaps'), policy('secrets'), policy('services')],
        });

        // A reload: a value changes (its policy with it), a kind goes (its policy and binding deleted).
        const before = await read('mutatingadmissionpolicies', policy('configmaps'));
        const from = labeller.logs.length;
        volume.update(kinds('labeller-2', false));
        await labeller.waitForLog((l) => l.msg === 'config reloaded', 60_000, from);
        await applied(policy('configmaps'), 'MutatingAdmissionPolicy', from);
        for (const kind of ['MutatingAdmissionPolicy', 'MutatingAdmissionPolicyBinding']) {
          await labeller.waitForLog(
            (l) => l.msg === 'admission policy deleted' && l['kind'] === kind && l['name'] === policy('secrets'),
            30_000,
            from,
          );
        }
        const changed = await read('mutatingadmissionpolicies', policy('configmaps'));
        assert.notEqual(changed?.metadata.resourceVersion, before?.metadata.resourceVersion);
        assert.ok(changed?.spec.variables?.some((v) => v.expression.includes('"labeller-2"')));
        assert.deepEqual(await policiesOf(fieldManager), [
          `mutatingadmissionpolicies/${policy('configmaps')}`,
          `mutatingadmissionpolicies/${policy('services')}`,
          `mutatingadmissionpolicybindings/${policy('configmaps')}`,
          `mutatingadmissionpolicybindings/${policy('services')}`,
        ]);
        await eventually(async () => {
          const created = await create<Created>(`/api/v1/namespaces/${ns}/configmaps`, {
            metadata: { name: `probe-${probes++}` },
          });
          return created.metadata.labels?.['example.com/managed'] === 'labeller-2';
        }, 'the changed policy in force');
        // The refusal stays reported once: the same policy, refused the same way, is not said again.
        assert.equal(labeller.logs.filter((l) => l.msg.startsWith('admission policy refused')).length, 1);

        // Another config under the same field manager: refused by the guard, the policies untouched.
        const versions = await Promise.all(KINDS.map((kind) => read(kind, policy('configmaps'))));
        const other = await runLabeller([
          '--kinds',
          'pods',
          '--namespace',
          ns,
          '--label',
          'team=other',
          '--field-manager',
          fieldManager,
          '--admission-policies',
        ]);
        assert.equal(other.code, 2, other.stderr);
        assert.match(other.fatal ?? '', new RegExp(`field manager "${fieldManager}" is held by another labeller`));
        assert.match(other.fatal ?? '', /also writes mutatingadmissionpolicies\.admissionregistration\.k8s\.io@\*/);
        assert.doesNotMatch(other.stderr, /admission policy (applied|deleted)/);
        assert.deepEqual(
          (await Promise.all(KINDS.map((kind) => read(kind, policy('configmaps'))))).map((p) =>
            p?.metadata.resourceVersion
          ),
          versions.map((p) => p?.metadata.resourceVersion),
        );

        // --dry-run, under a field manager of its own and the same rights: each object checked and
        // logged, the refusal said, none kept.
        const dryManager = `${fieldManager}-dry`;
        cleanUp(dryManager);
        const dry = new Labeller([
          '--config',
          volume.path,
          '--field-manager',
          dryManager,
          '--admission-policies',
          '--dry-run',
        ], { kubeconfig: account });
        try {
          await dry.waitForLog((l) =>
            l.msg === 'admission policy would be applied (dry run)' && l['kind'] === 'MutatingAdmissionPolicyBinding'
          );
          await dry.waitForLog((l) => l.msg.startsWith('admission policy refused'));
        } finally {
          assertCleanExit(await dry.stop());
        }
        assert.deepEqual(await policiesOf(dryManager), []);

        // The controller stops: with no owner (--admission-policies-owner) and no replica to take
        // over, nothing else would remove its policies, so it does (issue 46, item 5).
        assertCleanExit(await labeller.stop());
        assert.equal(
          labeller.logs.filter((l) =>
            l.msg === 'admission policy deleted' && /^labeller stopped/.test(String(l['why']))
          )
            .length,
          4,
        );
        assert.deepEqual(await policiesOf(fieldManager), []);
        // Policies an earlier run left (applied by hand here, as `labeller admission` prints them):
        // prune, without the flag, removes them.
        await apply((await admission(['--config', volume.path, '--field-manager', fieldManager])).stdout, fieldManager);
        const left = (await policiesOf(fieldManager)).length;
        assert.ok(left >= 4, String(left));
        const pruned = await runLabeller(['prune', '--config', volume.path, '--field-manager', fieldManager]);
        assert.equal(pruned.code, 0, pruned.stderr);
        assert.equal(pruned.stderr.match(/"msg":"admission policy deleted"/g)?.length, left, pruned.stderr);
        assert.deepEqual(await policiesOf(fieldManager), []);
      } finally {
        labeller.kill();
      }
    },
  );

  test(
    'sharded: only the member writing the cluster-scoped objects applies them; when it leaves, the member taking its buckets applies them',
    { timeout: 180_000 },
    async (t) => {
      if (!(await servesPolicies(await adminClient()))) {
        t.skip('the API server does not serve admissionregistration.k8s.io/v1: see the controller-only test');
        return;
      }
      const ns = await createNamespace('admit-shards');
      const fieldManager = `admit-shards-${randomBytes(3).toString('hex')}`;
      cleanUp(fieldManager);
      const ports = await freePorts(2);
      const member = (port: number) =>
        new Labeller([
          ...['--kinds', 'configmaps', '--namespace', ns, '--label', 'team=platform', '--field-manager', fieldManager],
          '--admission-policies',
          ...['--shards', 'auto', '--shard-group', fieldManager, '--leader-elect-resource-namespace', ns],
          ...['--leader-elect-lease-duration', '4s', '--leader-elect-renew-deadline', '3s'],
          ...['--leader-elect-retry-period', '1s', '--http-port', String(port)],
        ]);
      const members = ports.map((port) => ({ port: port!, labeller: member(port!) }));
      const applying = async () =>
        (await Promise.all(
          members.filter((m) => m.labeller.running).map(async (m) =>
            (await scrape(m.port, 'labeller_admission_policies', { state: 'applied' })) === 1 ? [m] : []
          ),
        )).flat();
      try {
        // Both members live and ready: one of them reports the policy applied, the other none.
        await eventually(
          async () => {
            const ready = await Promise.all(
              members.map(async (m) => (await fetch(`http://127.0.0.1:${m.port}/readyz`)).ok),
            );
            return ready.every(Boolean) && (await applying()).length === 1;
          },
          'one member applying the policies',
          60_000,
        );
        assert.deepEqual(await policiesOf(fieldManager), [
          `mutatingadmissionpolicies/${policyName(fieldManager, 'configmaps')}`,
          `mutatingadmissionpolicybindings/${policyName(fieldManager, 'configmaps')}`,
        ]);
        const [holder] = await applying();
        const other = members.find((m) => m !== holder)!;
        assert.equal(await scrape(other.port, 'labeller_admission_policies', { state: 'applied' }), 0);
        const from = other.labeller.logs.length;
        assertCleanExit(await holder!.labeller.stop());
        // The other takes every bucket, the cluster-scoped objects' too, and applies them.
        await other.labeller.waitForLog(
          (l) => l.msg === 'admission policy applied' && l['kind'] === 'MutatingAdmissionPolicyBinding',
          60_000,
          from,
        );
        await eventually(async () => (await applying())[0] === other, 'the other member reporting them applied');
      } finally {
        for (const m of members) if (m.labeller.running) assertCleanExit(await m.labeller.stop());
      }
    },
  );

  test(
    "a policy's apply is fenced by the version it was made over: a late one, after another writer's, is refused and changes nothing",
    async (t) => {
      const client = await adminClient();
      if (!(await servesPolicies(client))) {
        t.skip('the API server does not serve admissionregistration.k8s.io/v1');
        return;
      }
      const fieldManager = `admit-fence-${randomBytes(3).toString('hex')}`;
      cleanUp(fieldManager);
      const config = configFile('labels: {example.com/fenced: "yes"}\nkinds: [{resource: configmaps}]\n');
      const { stdout } = await admission(['--config', config, '--field-manager', fieldManager]);
      const policy = (loadAll(stdout) as PolicyObject[]).find((o) => o.kind === 'MutatingAdmissionPolicy')!;
      const store = new PolicyStore(client, fieldManager);
      const first = await store.apply(policy, { dryRun: false });
      // A successor applies over the version it read, changing the policy.
      const changed = { ...policy, metadata: { ...policy.metadata, labels: { ...policy.metadata.labels, next: 'x' } } };
      const second = await store.apply(changed, { dryRun: false, resourceVersion: first.metadata.resourceVersion });
      assert.notEqual(second.metadata.resourceVersion, first.metadata.resourceVersion);
      // The predecessor's write, made over the first version, lands late: refused.
      await assert.rejects(
        store.apply(policy, { dryRun: false, resourceVersion: first.metadata.resourceVersion }),
        (error: unknown) => isConflict(error),
      );
      const [now] = (await store.list({ served: (kind) => kind === 'MutatingAdmissionPolicy' }))
        .filter((o) => o.name === policy.metadata.name);
      assert.equal(now?.resourceVersion, second.metadata.resourceVersion, 'the successor write stands');
    },
  );

  test(
    'controller only where the API server does not serve them: said once, no error, labels applied after the create',
    { timeout: 120_000 },
    async (t) => {
      const client = await adminClient();
      if (await servesPolicies(client)) {
        t.skip('the API server serves admissionregistration.k8s.io/v1 (1.36 and later): see the test above');
        return;
      }
      const ns = await createNamespace('admit-none');
      const fieldManager = `admit-none-${randomBytes(3).toString('hex')}`;
      const [port] = await freePorts(1);
      const args = [
        '--kinds',
        'configmaps',
        '--namespace',
        ns,
        '--label',
        'team=platform',
        '--field-manager',
        fieldManager,
      ];
      const labeller = new Labeller([...args, '--admission-policies', '--http-port', String(port)]);
      try {
        const said = await labeller.waitForLog((l) => /does not serve .*MutatingAdmissionPolicies/.test(l.msg));
        assert.equal(said.level, 'info');
        const created = await create<Created>(`/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: 'app' } });
        assert.equal(created.metadata.labels, undefined, 'no policy: nothing at the create');
        await eventually(
          async () => (await labelsOf(`/api/v1/namespaces/${ns}/configmaps/app`))['team'] === 'platform',
          'the controller to label',
        );
        const readyz = await fetch(`http://127.0.0.1:${port}/readyz`);
        assert.equal(readyz.status, 200);
        assert.match(await readyz.text(), /admission policies: the API server does not serve/);
        assert.equal(await scrape(port!, 'labeller_admission_policies', { state: 'applied' }), 0);
        assert.deepEqual(await policyStatus(args), { served: false, policies: [], bindings: [] });
      } finally {
        assertCleanExit(await labeller.stop());
      }
      assert.equal(labeller.logs.filter((l) => /does not serve .*MutatingAdmissionPolicies/.test(l.msg)).length, 1);
      // (The test run's own LABELLER_K8S_VERSION reaches labeller's environment, which says it names no option.)
      const problems = labeller.logs.filter((l) => l.level === 'error' || l.level === 'warn');
      assert.deepEqual(problems.filter((l) => l['name'] !== 'LABELLER_K8S_VERSION'), []);
      const pruned = await runLabeller(['prune', ...args, '--admission-policies']);
      assert.equal(pruned.code, 0, pruned.stderr);
    },
  );
});
