// Labels from related objects against the real API server (issue 12): a namespace's label on
// every object in it, a Deployment's label on its ReplicaSets and Pods (made here with
// ownerReferences, as the test control plane runs no controller manager), kept right when the
// related object changes, with one PATCH per affected object and none elsewhere; a restart
// sends nothing; an owner kind labeller may not read is reported and the other kinds go on; an
// owner kind whose CRD comes after labeller is picked up.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { assertCleanExit } from '../process/crash.ts';
import { type AuditEvent, byLabeller, describeFills, fillStarted, receivedAt } from '../cluster/audit.ts';
import { figure } from '../process/figures.ts';
import {
  adminClient,
  auditEvents,
  auditSkip,
  auditTail,
  configFile,
  create,
  createCrd,
  createNamespace,
  eventually,
  labelsOf,
  patchLabels,
  serviceAccountKubeconfig,
} from './cluster.ts';
import { freePorts } from '../controlplane/controlplane.ts';
import { cacheFills, Labeller, runLabeller, watchFailed } from '../process/labeller.ts';
import { sample } from '../process/metrics.ts';
import type { Runtime } from '../process/runtime.ts';
import { sleep } from '../process/sleep.ts';

/** Objects in the namespace whose label changes, spread over 3 kinds (the acceptance size); the bench runs 10 000. */
const TOTAL = 2000;
const KINDS = [
  ['configmaps', (name: string) => ({ metadata: { name } })],
  ['secrets', (name: string) => ({ metadata: { name }, stringData: { k: 'v' } })],
  ['serviceaccounts', (name: string) => ({ metadata: { name } })],
] as const;

/** This file's labellers write as their own field manager, so a labeller another test file runs cluster-wide is not counted. */
const FIELD_MANAGER = 'labeller-related-e2e';

/** Arguments of a labeller of `config` (a kinds.yaml) in namespace `ns`, as this file's field manager. */
const withConfig = (config: string, ns: string): string[] => [
  '--config',
  configFile(config),
  '--namespace',
  ns,
  '--field-manager',
  FIELD_MANAGER,
];

/**
 * The requests of this file's labellers about `namespaces` (each test's own: their names are
 * random), read from the audit log as it grows from now on: `requests(since, filter)` answers
 * those received since `since` (ms) that match `filter`.
 */
function audited(
  namespaces: readonly string[],
): (since: number, filter: (event: AuditEvent) => boolean) => AuditEvent[] {
  const tail = auditTail((e) =>
    byLabeller(e) && namespaces.some((n) => e.requestURI.includes(n)) &&
    (e.verb !== 'patch' || e.requestURI.includes(`fieldManager=${FIELD_MANAGER}`))
  );
  const seen: AuditEvent[] = [];
  return (since, filter) => {
    for (const event of tail()) seen.push(event);
    return seen.filter((e) => receivedAt(e) >= since && filter(e));
  };
}

/** Creates `count` objects in `ns`, round-robin over the three kinds, `inFlight` requests at a time. */
async function createMany(ns: string, count: number, inFlight = 50): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < count; i = next++) {
      const [resource, make] = KINDS[i % KINDS.length]!;
      await create(`/api/v1/namespaces/${ns}/${resource}`, make(`o-${i}`));
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
}

/** How many objects of the three kinds in `ns` carry `team` = `value` (undefined: carry no `team`). */
async function carrying(ns: string, value: string | undefined): Promise<number> {
  const selector = encodeURIComponent(value === undefined ? '!team' : `team=${value}`);
  let n = 0;
  for (const [resource] of KINDS) {
    const list = await (await adminClient()).json<{ items: unknown[] }>(
      'GET',
      `/api/v1/namespaces/${ns}/${resource}?labelSelector=${selector}`,
      { headers: { accept: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1' } },
    );
    n += list.items.length;
  }
  return n;
}

describe('labels from related objects', { skip: auditSkip }, () => {
  test('a namespace label reaches every object in it; a change and a removal follow with one PATCH per object, none elsewhere; a restart sends none', async (t) => {
    const [ns, other] = [await createNamespace('related-team'), await createNamespace('related-other')];
    await patchLabels(`/api/v1/namespaces/${ns}`, { team: 'payments' });
    await patchLabels(`/api/v1/namespaces/${other}`, { team: 'search' });
    await createMany(ns, TOTAL);
    await createMany(other, 15);
    const args = [
      '--kinds',
      KINDS.map(([r]) => r).join(','),
      '--label',
      'team={{namespace.labels.team}}',
      '--namespace',
      `${ns},${other}`,
      '--field-manager',
      FIELD_MANAGER,
    ];
    const requests = audited([ns, other]);
    const inOther = (e: AuditEvent) => e.objectRef?.namespace === other;
    const patchesIn = (since: number, namespace: string) =>
      requests(
        since,
        (e) => e.verb === 'patch' && e.objectRef?.namespace === namespace && e.objectRef.resource !== 'namespaces',
      ).length;

    let labeller = new Labeller(args);
    try {
      await eventually(
        async () => (await carrying(ns, 'payments')) === TOTAL,
        `all ${TOTAL} objects to carry team=payments`,
        120_000,
        500,
      );
      await eventually(
        async () => (await carrying(other, 'search')) === 15,
        "the other namespace's objects to carry team=search",
      );

      // Change: every object follows, with one PATCH each, no GET and no LIST.
      let mark = Date.now();
      await patchLabels(`/api/v1/namespaces/${ns}`, { team: 'billing' });
      await eventually(
        async () => (await carrying(ns, 'billing')) === TOTAL,
        `all ${TOTAL} objects to carry team=billing`,
        120_000,
        500,
      );
      const changed = (Date.now() - mark) / 1000;
      await eventually(async () => patchesIn(mark, ns) >= TOTAL, 'the audit log to record the patches', 10_000);
      assert.equal(patchesIn(mark, ns), TOTAL, 'one PATCH per object');
      assert.equal(
        requests(mark, (e) => e.verb === 'get' || fillStarted(e)).length,
        0,
        'no GET, no LIST: related objects come from the caches',
      );
      assert.equal(
        requests(mark, (e) => e.verb === 'patch' && inOther(e)).length,
        0,
        'objects in the other namespace untouched',
      );

      // Removal: the derived label goes from every object.
      mark = Date.now();
      await patchLabels(`/api/v1/namespaces/${ns}`, { team: null });
      await eventually(
        async () => (await carrying(ns, undefined)) === TOTAL,
        `all ${TOTAL} objects to lose team`,
        120_000,
        500,
      );
      const removed = (Date.now() - mark) / 1000;
      await eventually(async () => patchesIn(mark, ns) >= TOTAL, 'the audit log to record the patches', 10_000);
      assert.equal(patchesIn(mark, ns), TOTAL, 'one PATCH per object');
      assert.equal(
        requests(mark, (e) => e.verb === 'patch' && inOther(e)).length,
        0,
        'objects in the other namespace untouched',
      );
      figure(
        t,
        `namespace label on ${TOTAL} objects (3 kinds): changed on all in ${
          changed.toFixed(1)
        } s, removed from all in ${
          removed.toFixed(1)
        } s, 1 PATCH per object, 0 GET/LIST, 0 PATCH in the other namespace`,
      );
      assertCleanExit(await labeller.stop());

      // Restart over the converged cluster: nothing to send.
      await patchLabels(`/api/v1/namespaces/${ns}`, { team: 'ops' });
      const dryRun = await new Labeller([...args, '--once', '--dry-run']).exited;
      assert.equal(dryRun.code, 0, dryRun.stderr);
      assert.match(dryRun.stdout, new RegExp(`^dry run: seen ${TOTAL + 15}, would patch ${TOTAL}, unchanged 15,`, 'm'));
      const line = dryRun.stderr.split('\n').find((l) => l.includes('would apply labels (dry run)'));
      assert.deepEqual((JSON.parse(line ?? '{}') as { patch?: unknown }).patch, [{
        op: 'add',
        path: '/metadata/labels/team',
        value: 'ops',
      }]);
      assert.equal(await carrying(ns, undefined), TOTAL, 'the dry run wrote nothing');
      await patchLabels(`/api/v1/namespaces/${ns}`, { team: null });

      mark = Date.now();
      labeller = new Labeller(args);
      for (const kind of ['ConfigMap', 'Secret', 'ServiceAccount']) {
        await labeller.waitForLog((l) => l.msg === 'initial list complete' && l.kind === kind, 60_000);
      }
      await sleep(3000);
      assert.equal(requests(mark, (e) => e.verb === 'patch').length, 0, 'the restart sent no PATCH');
    } finally {
      assertCleanExit(await labeller.stop());
    }
  });

  for (const runtime of ['node', 'deno'] as Runtime[]) {
    test(`a Deployment label reaches its ReplicaSets and Pods, follows a change, and leaves an orphaned ReplicaSet and its Pods (${runtime})`, async (t) => {
      const ns = await createNamespace(`related-owner-${runtime}`);
      const requests = audited([ns]);
      const apps = `/apis/apps/v1/namespaces/${ns}`;
      const core = `/api/v1/namespaces/${ns}`;
      const podSpec = { containers: [{ name: 'c', image: 'nginx' }] };
      const deployment = await create<{ metadata: { uid: string } }>(`${apps}/deployments`, {
        metadata: { name: 'web', labels: { app: 'web', 'app.kubernetes.io/part-of': 'shop' } },
        spec: {
          selector: { matchLabels: { app: 'web' } },
          template: { metadata: { labels: { app: 'web' } }, spec: podSpec },
        },
      });
      const controllerRef = (
        kind: string,
        name: string,
        uid: string,
        apiVersion = 'apps/v1',
      ) => [{ apiVersion, kind, name, uid, controller: true, blockOwnerDeletion: true }];
      const replicaSets: { name: string; uid: string }[] = [];
      for (const name of ['web-1', 'web-2']) {
        const rs = await create<{ metadata: { uid: string } }>(`${apps}/replicasets`, {
          metadata: {
            name,
            labels: { app: 'web' },
            ownerReferences: controllerRef('Deployment', 'web', deployment.metadata.uid),
          },
          spec: {
            selector: { matchLabels: { app: 'web' } },
            template: { metadata: { labels: { app: 'web' } }, spec: podSpec },
          },
        });
        replicaSets.push({ name, uid: rs.metadata.uid });
        for (const pod of ['a', 'b']) {
          await create(`${core}/pods`, {
            metadata: {
              name: `${name}-${pod}`,
              labels: { app: 'web' },
              ownerReferences: controllerRef('ReplicaSet', name, rs.metadata.uid),
            },
            spec: podSpec,
          });
        }
      }
      const config = `
  labels:
    example.com/part-of: "{{root.labels.app.kubernetes.io/part-of}}"
  kinds:
    - resource: replicasets
      labels:
        example.com/owner: "{{owner.kind}}.{{owner.name}}"
    - resource: pods
  `;
      const labeller = new Labeller(withConfig(config, ns), { runtime });
      const rsPath = (name: string) => `${apps}/replicasets/${name}`;
      const podPaths = (rs: string) => ['a', 'b'].map((p) => `${core}/pods/${rs}-${p}`);
      const all = ['web-1', 'web-2'].flatMap((rs) => [rsPath(rs), ...podPaths(rs)]);
      const partOf = async (paths: readonly string[], value: string | undefined) =>
        (await Promise.all(paths.map(labelsOf))).every((l) => l['example.com/part-of'] === value);
      try {
        const started = Date.now();
        await eventually(() => partOf(all, 'shop'), "the Deployment's label on its ReplicaSets and Pods");
        assert.equal((await labelsOf(rsPath('web-1')))['example.com/owner'], 'Deployment.web');
        // A labelled kind that is also an owner (replicasets) has one cache; deployments, only read, one.
        // Counted in labeller's log: a fill the server failed and labeller retried is one cache.
        const fills = cacheFills(labeller.logs);
        const requested = describeFills(requests(started, (e) => fillStarted(e)));
        assert.equal(fills['ReplicaSet'], 1, `replicasets listed once; requests:\n${requested}`);
        assert.equal(fills['Deployment'], 1, `deployments listed once; requests:\n${requested}`);

        let mark = Date.now();
        await patchLabels(`${apps}/deployments/web`, { 'app.kubernetes.io/part-of': 'mall' });
        await eventually(() => partOf(all, 'mall'), 'the changed label on every ReplicaSet and Pod');
        const followed = Date.now() - mark;
        assert.equal(requests(mark, (e) => e.verb === 'get').length, 0, 'no GET');

        // Orphan web-2 (as `kubectl delete --cascade=orphan` does): its derived labels go, from it and its Pods.
        mark = Date.now();
        await (await adminClient()).json('PATCH', rsPath('web-2'), {
          headers: { 'content-type': 'application/merge-patch+json' },
          body: JSON.stringify({ metadata: { ownerReferences: null } }),
        });
        await eventually(
          () => partOf([rsPath('web-2'), ...podPaths('web-2')], undefined),
          'the orphaned ReplicaSet and its Pods to lose the derived label',
        );
        assert.equal((await labelsOf(rsPath('web-2')))['example.com/owner'], undefined, 'no owner, no owner label');
        assert.ok(await partOf([rsPath('web-1'), ...podPaths('web-1')], 'mall'), 'the other ReplicaSet keeps it');
        assert.equal(
          requests(mark, (e) => e.verb === 'patch').length,
          3,
          'one PATCH each for the orphan and its two Pods',
        );
        figure(
          t,
          `owner chain (${runtime}): Deployment label change on its 2 ReplicaSets and 4 Pods in ${followed} ms; orphaning a ReplicaSet: 3 PATCHes`,
        );
        assertCleanExit(await labeller.stop());

        // Prune hands back labeller's labels and reads nothing but the labelled kinds: no owner kind, no namespace.
        mark = Date.now();
        const pruned = await runLabeller(
          ['prune', ...withConfig(config, ns)],
          { runtime },
        );
        assert.equal(pruned.code, 0, pruned.stderr);
        assert.ok(
          (await Promise.all(all.map(labelsOf))).every((l) =>
            l['example.com/part-of'] === undefined && l['example.com/owner'] === undefined
          ),
          'prune removed the derived labels',
        );
        assert.deepEqual(
          requests(mark, (e) => e.verb === 'list' || e.verb === 'watch').map((e) => e.objectRef?.resource)
            .sort(),
          ['pods', 'replicasets'],
          'prune lists the labelled kinds once each and watches nothing',
        );
      } finally {
        assertCleanExit(await labeller.stop());
      }
    });
  }

  test('an owner read by owner.* only is not followed up its own chain, though another kind reads root.*', async () => {
    const ns = await createNamespace('related-shallow');
    const requests = audited([ns]);
    const apps = `/apis/apps/v1/namespaces/${ns}`;
    const podSpec = { containers: [{ name: 'c', image: 'nginx' }] };
    const selector = { matchLabels: { app: 'web' } };
    const template = { metadata: { labels: { app: 'web' } }, spec: podSpec };
    const ref = (
      kind: string,
      name: string,
      uid: string,
    ) => [{ apiVersion: 'apps/v1', kind, name, uid, controller: true }];
    const deployment = await create<{ metadata: { uid: string } }>(`${apps}/deployments`, {
      metadata: { name: 'web' },
      spec: { selector, template },
    });
    const rs = await create<{ metadata: { uid: string } }>(`${apps}/replicasets`, {
      metadata: { name: 'web-1', ownerReferences: ref('Deployment', 'web', deployment.metadata.uid) },
      spec: { selector, template },
    });
    await create(`/api/v1/namespaces/${ns}/pods`, {
      metadata: { name: 'web-1-a', ownerReferences: ref('ReplicaSet', 'web-1', rs.metadata.uid) },
      spec: podSpec,
    });
    await create(`/apis/batch/v1/namespaces/${ns}/jobs`, {
      metadata: { name: 'once' },
      spec: { template: { spec: { ...podSpec, restartPolicy: 'Never' } } },
    });
    const config = `
kinds:
  - resource: pods
    labels: { example.com/owner: "{{owner.name}}" }
  - resource: jobs
    labels: { example.com/root: "{{root.name}}" }
`;
    const labeller = new Labeller(withConfig(config, ns));
    try {
      await eventually(
        async () => (await labelsOf(`/api/v1/namespaces/${ns}/pods/web-1-a`))['example.com/owner'] === 'web-1',
        "the pod labelled with its ReplicaSet's name",
      );
      await eventually(
        async () => (await labelsOf(`/apis/batch/v1/namespaces/${ns}/jobs/once`))['example.com/root'] === 'once',
        'the job labelled as its own root',
      );
      assert.deepEqual(
        [...new Set(requests(0, (e) => fillStarted(e)).map((e) => e.objectRef?.resource))].sort(),
        ['jobs', 'pods', 'replicasets'],
        "the ReplicaSets' Deployments are not listed: no template reads them",
      );
    } finally {
      assertCleanExit(await labeller.stop());
    }
  });

  test('an owner kind whose CRD is installed after labeller started is looked for again, and what it owns is labelled', async () => {
    const ns = await createNamespace('related-late-owner');
    const group = `${ns}.example.com`;
    const core = `/api/v1/namespaces/${ns}`;
    const owned = (name: string, owner: { name: string; uid: string }) => ({
      metadata: { name, ownerReferences: [{ apiVersion: `${group}/v1`, kind: 'Gadget', ...owner, controller: true }] },
    });
    // Owned by a kind no API serves yet: labeller finds no resource for it.
    await create(`${core}/configmaps`, owned('early', { name: 'gone', uid: '00000000-0000-0000-0000-000000000002' }));
    // Followed beyond the workload chain because the config names it.
    const config = `
ownerKinds: [gadgets.${group}]
kinds:
  - resource: configmaps
    labels: { example.com/owner: "{{owner.name}}" }
`;
    const labeller = new Labeller(withConfig(config, ns));
    try {
      await labeller.waitForLog((l) => /owner kind not served/.test(l.msg) && l.ownerKind === 'Gadget');
      // Past the discovery the miss sets off at once, so the CRD comes in a pause between discoveries.
      await sleep(2000);
      await createCrd(group, 'gadgets', 'Gadget');
      const gadget = await create<{ metadata: { uid: string } }>(`/apis/${group}/v1/namespaces/${ns}/gadgets`, {
        apiVersion: `${group}/v1`,
        kind: 'Gadget',
        metadata: { name: 'g' },
      });
      await create(`${core}/configmaps`, owned('late', { name: 'g', uid: gadget.metadata.uid }));
      await labeller.waitForLog(
        (l) => l.msg === 'owner kind is served now; watching it' && l.ownerKind === 'Gadget',
        60_000,
      );
      await eventually(
        async () => (await labelsOf(`${core}/configmaps/late`))['example.com/owner'] === 'g',
        "the config map labelled with its Gadget's name",
        30_000,
      );
      assert.equal(
        (await labelsOf(`${core}/configmaps/early`))['example.com/owner'],
        undefined,
        'its owner does not exist: held, so not set',
      );
    } finally {
      assertCleanExit(await labeller.stop());
    }
  });

  test('an owner kind labeller may not read holds only the labels that read it: reported, the rest applied, ready; namespaces by resourceNames', async () => {
    const ns = await createNamespace('related-forbidden');
    await patchLabels(`/api/v1/namespaces/${ns}`, { team: 'payments' });
    const core = `/api/v1/namespaces/${ns}`;
    await create(`${core}/configmaps`, { metadata: { name: 'cm' } });
    await create(`${core}/pods`, {
      metadata: {
        name: 'p',
        ownerReferences: [{
          apiVersion: 'apps/v1',
          kind: 'ReplicaSet',
          name: 'rs',
          uid: '00000000-0000-0000-0000-000000000001',
          controller: true,
        }],
      },
      spec: { containers: [{ name: 'c', image: 'nginx' }] },
    });
    const verbs = ['get', 'list', 'watch', 'patch'];
    // Pods and config maps, and only this one namespace (by name); no replicasets.
    const kubeconfig = await serviceAccountKubeconfig(ns, 'labeller', [
      { apiGroups: [''], resources: ['pods', 'configmaps'], verbs },
      { apiGroups: [''], resources: ['namespaces'], verbs: ['list', 'watch'], resourceNames: [ns] },
    ]);
    const config = `
labels: { team: "{{namespace.labels.team}}" }
kinds:
  - resource: configmaps
  - resource: pods
    labels: { example.com/root: "{{root.name}}" }
`;
    const [port] = await freePorts(1);
    const labeller = new Labeller([...withConfig(config, ns), '--http-port', String(port)], { kubeconfig });
    try {
      const refused = await labeller.waitForLog((l) => watchFailed(l) && l.kind === 'ReplicaSet', 30_000);
      assert.match(String(refused['error']), /403 Forbidden: .*replicasets/);
      const reported = await labeller.waitForLog((l) => /related objects may not be read/.test(l.msg));
      assert.equal(reported['hint'], 'grant list and watch on replicasets.apps', 'the grant to add');
      for (const path of [`${core}/configmaps/cm`, `${core}/pods/p`]) {
        await eventually(
          async () => (await labelsOf(path))['team'] === 'payments',
          `${path} labelled from its namespace, read by name`,
        );
      }
      assert.equal((await labelsOf(`${core}/pods/p`))['example.com/root'], undefined, 'the root label is held');
      const readyz = await fetch(`http://127.0.0.1:${port}/readyz`);
      const body = await readyz.text();
      assert.equal(readyz.status, 200, body);
      assert.match(
        body,
        new RegExp(`replicasets\\.apps/${ns} \\(read by templates\\): waiting for the first list: .*403`),
      );
      const metrics = await fetch(`http://127.0.0.1:${port}/metrics`);
      const text = await metrics.text();
      assert.equal(metrics.status, 200, text);
      assert.equal(
        sample(text, 'labeller_related_unreadable', { kind: `replicasets.apps/${ns}`, reason: 'forbidden' }),
        1,
      );
      assert.equal(sample(text, 'labeller_objects_held', { controller: `pods/${ns}` }), 1);
      assert.ok(labeller.running);
    } finally {
      assertCleanExit(await labeller.stop());
    }
  });
  test('a mirror pod (owned by a Node) and a pod a tenant points at its Secret hold only their root label: no informer of nodes or secrets, the other pods labelled, ready', async () => {
    const ns = await createNamespace('related-mirror');
    const core = `/api/v1/namespaces/${ns}`;
    const apps = `/apis/apps/v1/namespaces/${ns}`;
    const spec = { containers: [{ name: 'c', image: 'nginx' }] };
    const node = await create<{ metadata: { uid: string } }>('/api/v1/nodes', { metadata: { name: `${ns}-node` } });
    const secret = await create<{ metadata: { uid: string } }>(`${core}/secrets`, { metadata: { name: 'mine' } });
    const deployment = await create<{ metadata: { uid: string } }>(`${apps}/deployments`, {
      metadata: { name: 'web' },
      spec: { selector: { matchLabels: { app: 'web' } }, template: { metadata: { labels: { app: 'web' } }, spec } },
    });
    const controlled = (apiVersion: string, kind: string, name: string, uid: string) => ({
      ownerReferences: [{ apiVersion, kind, name, uid, controller: true }],
    });
    const rs = await create<{ metadata: { uid: string } }>(`${apps}/replicasets`, {
      metadata: { name: 'web-1', ...controlled('apps/v1', 'Deployment', 'web', deployment.metadata.uid) },
      spec: { selector: { matchLabels: { app: 'web' } }, template: { metadata: { labels: { app: 'web' } }, spec } },
    });
    const pods = {
      'web-1-a': controlled('apps/v1', 'ReplicaSet', 'web-1', rs.metadata.uid),
      plain: {},
      [`etcd-${ns}-node`]: controlled('v1', 'Node', `${ns}-node`, node.metadata.uid),
      tenant: controlled('v1', 'Secret', 'mine', secret.metadata.uid),
    };
    for (const [name, metadata] of Object.entries(pods)) {
      await create(`${core}/pods`, {
        metadata: { name, ...metadata, labels: { 'example.com/workload': 'before' } },
        spec,
      });
    }
    // What the chart grants for this config: the pods, and the workload chain's kinds to read.
    const read = ['list', 'watch'];
    const kubeconfig = await serviceAccountKubeconfig(ns, 'labeller', [
      { apiGroups: [''], resources: ['pods'], verbs: [...read, 'patch'] },
      { apiGroups: ['apps'], resources: ['replicasets', 'deployments', 'statefulsets', 'daemonsets'], verbs: read },
      { apiGroups: ['batch'], resources: ['jobs', 'cronjobs'], verbs: read },
      { apiGroups: [''], resources: ['replicationcontrollers'], verbs: read },
      { apiGroups: [''], resources: ['nodes', 'secrets'], verbs: read },
    ]);
    const config = `
kinds:
  - resource: pods
    labels:
      example.com/workload: "{{root.kind}}.{{root.name}}"
      example.com/managed: "yes"
`;
    const [port] = await freePorts(1);
    const labeller = new Labeller([...withConfig(config, ns), '--http-port', String(port)], { kubeconfig });
    try {
      await eventually(
        async () => (await labelsOf(`${core}/pods/plain`))['example.com/workload'] === 'Pod.plain',
        'the plain pod',
      );
      await eventually(
        async () => (await labelsOf(`${core}/pods/web-1-a`))['example.com/workload'] === 'Deployment.web',
        "the deployment's pod",
      );
      for (const held of [`etcd-${ns}-node`, 'tenant']) {
        await eventually(async () => (await labelsOf(`${core}/pods/${held}`))['example.com/managed'] === 'yes', held);
        assert.equal((await labelsOf(`${core}/pods/${held}`))['example.com/workload'], 'before', `${held}: held`);
      }
      const notFollowed = labeller.logs.filter((l) =>
        l.msg === 'owner kind not followed; labels that read it are held'
      );
      assert.deepEqual(
        notFollowed.map((l) => l['ownerKind']).sort(),
        ['Node', 'Secret'],
        'reported once per owner kind',
      );
      assert.match(String(notFollowed[0]?.['hint']), /add "(nodes|secrets)" to ownerKinds/);
      const readyz = await fetch(`http://127.0.0.1:${port}/readyz`);
      const body = await readyz.text();
      assert.equal(readyz.status, 200, body);
      assert.match(body, /owner kind not followed \(ownerKind Node/);
      const metrics = await fetch(`http://127.0.0.1:${port}/metrics`);
      const text = await metrics.text();
      assert.equal(metrics.status, 200);
      assert.equal(sample(text, 'labeller_related_unreadable', { kind: 'Node.v1', reason: 'not-followed' }), 1);
      assert.equal(sample(text, 'labeller_objects_held', { controller: `pods/${ns}` }), 2);
      // The field-manager guard lists Leases; informers list and watch what they cache.
      const lists = auditEvents((e) =>
        e.user?.username === `system:serviceaccount:${ns}:labeller` && (e.verb === 'list' || e.verb === 'watch') &&
        e.objectRef?.resource !== 'leases'
      );
      assert.deepEqual(
        [...new Set(lists.map((e) => e.objectRef?.resource))].sort(),
        ['deployments', 'pods', 'replicasets'],
        'no informer of nodes or secrets, whatever the pods point at',
      );
    } finally {
      assertCleanExit(await labeller.stop());
      await (await adminClient()).request('DELETE', `/api/v1/nodes/${ns}-node`).catch(() => {});
    }
  });
});
