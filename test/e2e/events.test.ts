// Kubernetes Events against the real API server: one LabelConflict series per object, written
// back as counts within a bounded rate however often the conflict recurs (counted in the audit
// log); InvalidLabelValue on the object whose value cannot be rendered; KindForbidden on
// labeller's Pod, under the chart's RBAC, visible to `kubectl describe`; none with --events=false.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { RECORDER_DEFAULTS } from '../../src/runtime/recorder.ts';
import { figure } from '../process/figures.ts';
import { receivedAt } from '../cluster/audit.ts';
import { sleep } from '../process/sleep.ts';
import {
  adminClient,
  type AuditEvent,
  auditEvents,
  auditSkip,
  create,
  createNamespace,
  eventually,
  kubeconfig as adminKubeconfig,
  labelsOf,
  patchLabels,
  serviceAccountKubeconfig,
  skip,
} from './cluster.ts';
import { apply, deleteAfter, only, render, tool } from './helm.ts';
import { Labeller } from '../process/labeller.ts';
import type { Runtime } from '../process/runtime.ts';

interface Event {
  readonly metadata: { readonly name: string; readonly namespace: string };
  readonly regarding: {
    readonly apiVersion?: string;
    readonly kind: string;
    readonly name: string;
    readonly namespace?: string;
    readonly uid?: string;
  };
  readonly reason: string;
  readonly type: string;
  readonly action: string;
  readonly note: string;
  readonly reportingController: string;
  readonly reportingInstance: string;
  readonly series?: { readonly count: number; readonly lastObservedTime: string };
}

/** The Events labeller reported in a namespace. */
async function labellerEvents(namespace: string): Promise<Event[]> {
  const client = await adminClient();
  const list = await client.json<{ items: Event[] }>('GET', `/apis/events.k8s.io/v1/namespaces/${namespace}/events`);
  return list.items.filter((e) => e.reportingController === 'labeller');
}

/** labeller's Events in a namespace, once there is one. */
function someEvents(namespace: string, what: string): Promise<Event[]> {
  return eventually(
    async () => {
      const events = await labellerEvents(namespace);
      return events.length > 0 && events;
    },
    what,
    60_000,
    200,
  );
}

/** Event writes (create, patch) by labeller in a namespace, from the audit log. */
const eventWrites = (namespace: string) => (e: AuditEvent) =>
  e.objectRef?.resource === 'events' && e.objectRef.namespace === namespace &&
  (e.verb === 'create' || e.verb === 'patch') && (e.userAgent ?? '').startsWith('labeller/');

const CONFLICT = 'label set by another manager; left alone (conflicts: skip)';

/** A ConfigMap whose `team` label another field manager set. */
async function takenConfigMap(namespace: string, name: string, team = 'other'): Promise<string> {
  const created = await create<{ metadata: { uid: string } }>(
    `/api/v1/namespaces/${namespace}/configmaps?fieldManager=someone-else`,
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, labels: { team } } },
  );
  return created.metadata.uid;
}

/** labeller under `--conflicts skip`, reconciling every object of `ns` every second. */
const skipEverySecond = (ns: string): string[] => [
  '--kinds',
  'configmaps',
  '--label',
  'team=platform',
  '--conflicts',
  'skip',
  '--namespace',
  ns,
  '--requeue-after',
  '1s',
];

describe('events', { skip }, () => {
  test(
    '200 config maps in conflict: one LabelConflict series each; the conflict recurring in a loop keeps event writes within the bucket',
    { skip: auditSkip },
    async (t) => {
      const N = 200;
      const ns = await createNamespace('events-conflict');
      const names = Array.from({ length: N }, (_, i) => `cm-${String(i).padStart(3, '0')}`);
      const uids = new Map<string, string>();
      for (let i = 0; i < N; i += 25) {
        await Promise.all(names.slice(i, i + 25).map(async (name) => uids.set(name, await takenConfigMap(ns, name))));
      }
      const started = Date.now();
      // Every object is reconciled, and conflicts, every second.
      const labeller = new Labeller(skipEverySecond(ns), { env: { POD_NAME: 'labeller-e2e' } });
      try {
        const first = await eventually(
          async () => {
            const events = (await labellerEvents(ns)).filter((e) => e.reason === 'LabelConflict');
            return events.length >= N && events;
          },
          `${N} LabelConflict Events`,
          180_000,
          500,
        );
        const seriesAt = Date.now();
        assert.equal(first.length, N, 'one series per object');
        assert.deepEqual(new Set(first.map((e) => e.regarding.name)), new Set(names));
        for (const e of first) {
          assert.deepEqual(e.regarding, {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            name: e.regarding.name,
            namespace: ns,
            uid: uids.get(e.regarding.name),
          });
          assert.equal(e.type, 'Warning');
          assert.equal(e.action, 'Labelling');
          assert.equal(e.reportingInstance, 'labeller-e2e');
          assert.match(
            e.note,
            /^left to another field manager \(conflicts: skip\): label team is "other"; labeller wants "platform"$/,
          );
        }
        // The other manager keeps re-applying its values while labeller keeps re-checking.
        const loopStart = Date.now();
        for (let round = 0; Date.now() - loopStart < 25_000; round++) {
          await Promise.all(
            names.slice(0, 20).map((name) =>
              patchLabels(`/api/v1/namespaces/${ns}/configmaps/${name}`, { team: round % 2 ? 'other' : 'other-2' })
            ),
          );
          await sleep(2_000);
        }
        const loopEnd = Date.now();
        const events = (await labellerEvents(ns)).filter((e) => e.reason === 'LabelConflict');
        assert.equal(events.length, N, 'still one series per object: counted, not repeated');
        const counts = events.map((e) => e.series?.count ?? 1);
        assert.ok(Math.max(...counts) >= 2, 'series counts are written back');
        assert.deepEqual(
          await labelsOf(`/api/v1/namespaces/${ns}/configmaps/${names[50]}`),
          { team: 'other' },
          'left alone',
        );

        const occurrences = labeller.logs.filter((l) => l.msg === CONFLICT).length;
        const writes = auditEvents(eventWrites(ns));
        const inLoop = writes.filter((e) => receivedAt(e) >= loopStart && receivedAt(e) <= loopEnd);
        const creates = writes.filter((e) => e.verb === 'create').length;
        const seconds = (Date.now() - started) / 1000;
        const { burst, qps } = RECORDER_DEFAULTS;
        const bound = Math.ceil(burst + qps * seconds);
        figure(
          t,
          `events: ${N} objects in conflict for ${seconds.toFixed(0)} s (${
            (seriesAt - started) / 1000
          } s to every series): ${occurrences} conflicts seen, ${writes.length} event writes (${creates} creates, ${
            writes.length - creates
          } series patches; bound burst ${burst} + ${qps}/s = ${bound}); in the ${
            ((loopEnd - loopStart) / 1000).toFixed(0)
          } s loop: ${inLoop.length} writes, ${
            inLoop.filter((e) => e.verb === 'create').length
          } creates; series counts up to ${Math.max(...counts)}`,
        );
        assert.equal(creates, N, 'one create per series');
        assert.ok(
          writes.length <= bound,
          `${writes.length} event writes in ${seconds.toFixed(0)} s, over the bound ${bound}`,
        );
        assert.ok(inLoop.length <= qps * ((loopEnd - loopStart) / 1000) + burst, `${inLoop.length} writes in the loop`);
        assert.ok(
          occurrences > 10 * writes.length,
          `${occurrences} occurrences aggregated into ${writes.length} writes`,
        );
        assert.deepEqual(labeller.logs.filter((l) => l.msg.startsWith('event not written')), []);
      } finally {
        const exit = await labeller.stop();
        assert.equal(exit.code, 0, exit.stderr.slice(-3000));
      }
    },
  );

  for (const runtime of ['node', 'deno'] as Runtime[]) {
    test(`a value that cannot be rendered: an InvalidLabelValue Event on that object only (${runtime})`, async () => {
      const ns = await createNamespace(`events-invalid-${runtime}`);
      const long = 'x'.repeat(70);
      const uid = (await create<{ metadata: { uid: string } }>(`/api/v1/namespaces/${ns}/configmaps`, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'long', annotations: { 'example.com/x': long } },
      })).metadata.uid;
      await create(`/api/v1/namespaces/${ns}/configmaps`, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: 'fine', annotations: { 'example.com/x': 'ok' } },
      });
      const labeller = new Labeller([
        '--kinds',
        'configmaps',
        '--label',
        'example.com/x={{annotations.example.com/x}}',
        '--namespace',
        ns,
      ], { runtime });
      try {
        const [event] = await someEvents(ns, 'an InvalidLabelValue Event');
        assert.equal(event?.reason, 'InvalidLabelValue');
        assert.equal(event.type, 'Warning');
        assert.deepEqual(event.regarding, { apiVersion: 'v1', kind: 'ConfigMap', name: 'long', namespace: ns, uid });
        assert.match(
          event.note,
          new RegExp(
            `^label example\\.com/x: "\\{\\{annotations\\.example\\.com/x\\}\\}" rendered "${long}": .*; that key is held, the rest applied$`,
          ),
        );
        // The other object is labelled: its apply may still be under way when the Event is there.
        await eventually(
          async () => (await labelsOf(`/api/v1/namespaces/${ns}/configmaps/fine`))['example.com/x'] === 'ok',
          'the other ConfigMap labelled',
        );
        await sleep(1_000);
        assert.deepEqual((await labellerEvents(ns)).map((e) => e.regarding.name), ['long']);
      } finally {
        const exit = await labeller.stop();
        assert.equal(exit.code, 0, exit.stderr.slice(-3000));
      }
    });
  }

  test('--events=false writes no Event', { skip: auditSkip }, async () => {
    const ns = await createNamespace('events-off');
    await takenConfigMap(ns, 'taken');
    const labeller = new Labeller([...skipEverySecond(ns), '--events=false']);
    try {
      await labeller.waitForLog((l) => l.msg === CONFLICT);
      // A few more conflicts (one a second), time enough for an Event to be written.
      await sleep(3_000);
      assert.ok(labeller.logs.filter((l) => l.msg === CONFLICT).length >= 2);
    } finally {
      const exit = await labeller.stop();
      assert.equal(exit.code, 0, exit.stderr.slice(-3000));
    }
    assert.deepEqual(await labellerEvents(ns), []);
    assert.deepEqual(auditEvents(eventWrites(ns)), []);
  });

  test("under the chart's namespaced RBAC: LabelConflict in the watched namespace, KindForbidden on labeller's Pod, shown by kubectl describe", async () => {
    const release = await createNamespace('events-rel');
    const watched = await createNamespace('events-watched');
    const manifests = await render({
      release,
      namespace: release,
      values: {
        labels: { team: 'platform' },
        conflicts: 'skip',
        watchNamespaces: [watched],
        kinds: [{ resource: 'configmaps' }],
      },
    });
    deleteAfter(manifests);
    await apply(
      manifests.filter((m) =>
        ['ServiceAccount', 'Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding'].includes(m.kind)
      ),
    );
    const kubeconfig = await serviceAccountKubeconfig(release, only(manifests, 'ServiceAccount').metadata.name);
    // The Pod labeller "runs in", as the downward API would describe it (nothing runs pods here).
    const pod = await create<{ metadata: { uid: string } }>(`/api/v1/namespaces/${release}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'labeller-0' },
      spec: { containers: [{ name: 'labeller', image: 'labeller' }] },
    });
    await takenConfigMap(watched, 'taken');
    // Secrets are not in the chart's kinds: their list is refused.
    const labeller = new Labeller([
      '--kinds',
      'configmaps,secrets',
      '--label',
      'team=platform',
      '--conflicts',
      'skip',
      '--namespace',
      watched,
    ], {
      kubeconfig,
      env: { POD_NAME: 'labeller-0', POD_NAMESPACE: release, POD_UID: pod.metadata.uid },
    });
    try {
      const [conflict] = await someEvents(watched, 'a LabelConflict Event in the watched namespace');
      assert.equal(conflict?.reason, 'LabelConflict');
      assert.equal(conflict.regarding.name, 'taken');
      assert.equal(conflict.reportingInstance, 'labeller-0');
      const [refused] = await someEvents(release, 'a KindForbidden Event on the Pod');
      assert.equal(refused?.reason, 'KindForbidden');
      assert.equal(refused.type, 'Warning');
      assert.deepEqual(refused.regarding, {
        apiVersion: 'v1',
        kind: 'Pod',
        name: 'labeller-0',
        namespace: release,
        uid: pod.metadata.uid,
      });
      assert.match(refused.note, /^secrets\/.+: .*403 Forbidden/);

      const described = await tool('kubectl', [
        '--kubeconfig',
        adminKubeconfig(),
        'describe',
        'pod',
        'labeller-0',
        '-n',
        release,
      ]);
      assert.match(described.stdout, /Warning\s+KindForbidden\s+.*labeller/);
      const listed = await tool('kubectl', [
        '--kubeconfig',
        adminKubeconfig(),
        'events',
        '-n',
        watched,
        '--for',
        'configmap/taken',
      ]);
      assert.match(listed.stdout, /Warning\s+LabelConflict\s+ConfigMap\/taken\s+left to another field manager/);
      assert.deepEqual(
        labeller.logs.filter((l) => l.msg.startsWith('event not written')),
        [],
        "the chart's RBAC lets labeller write its Events",
      );
    } finally {
      const exit = await labeller.stop();
      assert.equal(exit.code, 0, exit.stderr.slice(-3000));
    }
  });
});
