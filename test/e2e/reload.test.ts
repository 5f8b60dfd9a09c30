// Live config reload against the real API server, the file updated as the kubelet updates a
// mounted ConfigMap (a new folder, then the `..data` symlink swapped): a kind added, a label
// dropped, a template changed, a selector changed, broken YAML, a kind removed. The audit log shows PATCHes for exactly the
// objects whose desired labels changed, a LIST only for the added kind, nothing for the broken
// change, after which the last good config is still in force. Then templates that start and
// stop reading related objects: a namespace's label, and an owner's (which every cache shares).
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, describe, test } from 'node:test';
import {
  adminClient,
  auditEvents,
  auditSkip,
  create,
  createNamespace,
  eventually,
  labelsOf,
  patchLabels,
  skip,
} from './cluster.ts';
import { type AuditEvent, describeFills, fillStarted } from '../cluster/audit.ts';
import { figure } from '../process/figures.ts';
import { assertCleanExit } from '../process/crash.ts';
import { freePorts } from '../controlplane/controlplane.ts';
import { cacheFills, Labeller, type LogLine } from '../process/labeller.ts';
import { scrape } from '../process/metrics.ts';
import { sleep } from '../process/sleep.ts';
import { ConfigMapVolume } from '../cluster/configmapvolume.ts';

const service = (name: string, app: string) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name, labels: { app } },
  spec: { ports: [{ port: 80 }] },
});
const deployment = (name: string) => ({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name },
  spec: {
    selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'c', image: 'nginx' }] } },
  },
});

/** Waits until the object at `path` carries `expected` (undefined: not that label). */
const labelled = (path: string, expected: Record<string, string | undefined>) =>
  eventually(async () => {
    const labels = await labelsOf(path);
    return Object.entries(expected).every(([key, value]) => labels[key] === value);
  }, `${path} labelled ${JSON.stringify(expected)}`);
/** The reload's log line, from index `from` on: applied or rejected. */
const reloads = (labeller: Labeller, from: number) =>
  labeller.waitForLog((l) => l.msg === 'config reloaded' || l.msg.startsWith('config change rejected'), 30_000, from);

describe('live config reload', { skip }, () => {
  for (const [runtime, port] of [['node', 18398], ['deno', 18399]] as const) {
    test(
      `add a kind, drop a label, change a template and a selector, break the YAML, remove a kind: PATCHes for exactly the objects whose labels change, a LIST only for kinds added or whose selector changed (${runtime})`,
      { skip: auditSkip },
      async (t) => {
        const ns = await createNamespace(`reload-${runtime}`);
        for (const name of ['c1', 'c2', 'c3']) {
          await create(`/api/v1/namespaces/${ns}/configmaps`, {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            metadata: { name },
          });
        }
        await create(`/api/v1/namespaces/${ns}/services`, service('s1', 'web'));
        await create(`/api/v1/namespaces/${ns}/services`, service('s2', 'api'));
        await create(`/apis/apps/v1/namespaces/${ns}/deployments`, deployment('d1'));
        const configMaps = `  - resource: configmaps\n    labels: { example.com/name: "{{name}}" }\n`;
        const services = (app: string) => `  - resource: services\n    labels: { example.com/app: "${app}" }\n`;
        const volume = new ConfigMapVolume(
          `labels: { team: platform }\nkinds:\n${configMaps}${services('{{labels.app}}')}`,
        );
        after(() => rmSync(volume.dir, { recursive: true, force: true }));

        const ours = (request: (e: AuditEvent) => boolean, resource?: string) =>
          auditEvents((e) =>
            request(e) && e.objectRef?.namespace === ns && e.objectRef.resource !== 'events' &&
            (resource === undefined || e.objectRef.resource === resource) && (e.userAgent ?? '').startsWith('labeller/')
          ).length;
        const RESOURCES = { configmaps: 'ConfigMap', services: 'Service', deployments: 'Deployment' } as const;
        type Lists = Record<keyof typeof RESOURCES, number>;
        const snapshot = () => ({
          patch: ours((e) => e.verb === 'patch'),
          // Lists and streaming lists sent (a watch with sendInitialEvents, where the server has them).
          requested: Object.fromEntries(
            Object.keys(RESOURCES).map((r) => [r, ours(fillStarted, r)]),
          ) as Lists,
          from: labeller.logs.length,
        });
        /** PATCHes sent since `before`, and the caches filled: by labeller's log, so that a fill the server failed and labeller retried counts once. */
        const since = (before: ReturnType<typeof snapshot>) => {
          const now = snapshot();
          const fills = cacheFills(labeller.logs, before.from);
          const list = Object.fromEntries(
            Object.entries(RESOURCES).map(([r, kind]) => [r, fills[kind] ?? 0]),
          ) as Lists;
          const requested = Object.fromEntries(
            Object.keys(RESOURCES).map((
              r,
            ) => [r, now.requested[r as keyof Lists] - before.requested[r as keyof Lists]]),
          ) as Lists;
          return { counted: { patch: now.patch - before.patch, list }, requested };
        };
        const cm = (name: string) => `/api/v1/namespaces/${ns}/configmaps/${name}`;
        const svc = (name: string) => `/api/v1/namespaces/${ns}/services/${name}`;
        /** Whatever the change sets in motion has happened: wait for it, then a little longer for anything unexpected. */
        const settle = () => sleep(1500);

        // As in a pod (the downward API's variables), so a rejected change is an Event on it.
        const labeller = new Labeller([
          '--config',
          volume.path,
          '--namespace',
          ns,
          '--requeue-after',
          '0',
          '--metrics-bind-address',
          `127.0.0.1:${port}`,
        ], { runtime, env: { POD_NAME: 'labeller-0', POD_NAMESPACE: ns } });
        try {
          await labelled(svc('s2'), { team: 'platform', 'example.com/app': 'api' });
          await labelled(cm('c3'), { team: 'platform', 'example.com/name': 'c3' });
          await settle();
          const figures: string[] = [];
          const none = { configmaps: 0, services: 0, deployments: 0 };
          /** Writes `yaml`, checks the reload's log line, waits for `converged`, then counts the requests since. */
          const step = async (
            what: string,
            yaml: string,
            reported: (line: LogLine) => void,
            converged: () => Promise<unknown>,
            expected: ReturnType<typeof since>['counted'],
          ) => {
            const before = snapshot();
            const from = labeller.logs.length;
            volume.update(yaml);
            reported(await reloads(labeller, from));
            await converged();
            await settle();
            const { counted, requested } = since(before);
            figures.push(`${what}: ${counted.patch} PATCH, LIST ${JSON.stringify(counted.list)}`);
            const fills = auditEvents((e) =>
              e.objectRef?.namespace === ns && (e.userAgent ?? '').startsWith('labeller/')
            );
            assert.deepEqual(counted, expected, `${what}; every fill of a cache:\n${describeFills(fills)}`);
            // A kind the change leaves alone is not even asked for again.
            for (const [resource, n] of Object.entries(expected.list)) {
              if (n === 0) assert.equal(requested[resource as keyof Lists], 0, `${what}: ${resource} not listed`);
            }
          };

          // A kind added: its controller starts (one LIST), its one object is labelled; the others are not listed again.
          await step(
            'kind added',
            `labels: { team: platform }\nkinds:\n${configMaps}${services('{{labels.app}}')}  - resource: deployments\n`,
            (line) => assert.deepEqual(line['added'], ['deployments']),
            () => labelled(`/apis/apps/v1/namespaces/${ns}/deployments/d1`, { team: 'platform' }),
            { patch: 1, list: { ...none, deployments: 1 } },
          );
          // A label dropped from one kind: its three objects lose it, no relist.
          await step(
            'label dropped',
            `labels: { team: platform }\nkinds:\n  - resource: configmaps\n${
              services('{{labels.app}}')
            }  - resource: deployments\n`,
            (line) => assert.deepEqual(line['relabelled'], ['configmaps']),
            () =>
              Promise.all(
                ['c1', 'c2', 'c3'].map((name) =>
                  labelled(cm(name), { team: 'platform', 'example.com/name': undefined })
                ),
              ),
            { patch: 3, list: none },
          );
          // A template changed so that it renders another value for one of two services only.
          await step(
            'template changed',
            `labels: { team: platform }\nkinds:\n  - resource: configmaps\n${
              services('web')
            }  - resource: deployments\n`,
            (line) => assert.deepEqual(line['relabelled'], ['services']),
            () => labelled(svc('s2'), { 'example.com/app': 'web' }),
            { patch: 1, list: none },
          );
          // A selector changed: only that kind is listed again (s1 still matches and is right; s2 no longer matches).
          await step(
            'selector changed',
            `labels: { team: platform }\nkinds:\n  - resource: configmaps\n${
              services('web')
            }    selector: app=web\n  - resource: deployments\n`,
            (line) => assert.deepEqual(line['restarted'], ['services']),
            () =>
              labeller.waitForLog((l) =>
                l.msg === 'initial list complete' && l.kind === 'Service' && l['objects'] === 1
              ),
            { patch: 0, list: { ...none, services: 1 } },
          );
          // Broken YAML: rejected, nothing sent, and the last good config still in force.
          await step(
            'broken YAML',
            'labels: { team: platform\nkinds: [\n',
            (line) => {
              assert.equal(line.msg, 'config change rejected; the last good config stays in force');
              assert.match(String(line['error']), /kinds\.yaml:\d+:\d+: YAML syntax error/);
            },
            async () => {},
            { patch: 0, list: none },
          );
          assert.equal(await scrape(port, 'labeller_config_last_reload_successful'), 0);
          assert.equal(await scrape(port, 'labeller_config_reloads_total', { result: 'failure' }), 1);
          assert.equal(await scrape(port, 'labeller_config_reloads_total', { result: 'success' }), 4);
          const rejected = await eventually(async () => {
            const { items } = await (await adminClient()).json<
              { items: { reason: string; note: string; regarding: { kind: string; name: string } }[] }
            >('GET', `/apis/events.k8s.io/v1/namespaces/${ns}/events`);
            return items.find((e) => e.reason === 'ConfigRejected');
          }, 'a ConfigRejected Event');
          assert.deepEqual([rejected.regarding.kind, rejected.regarding.name], ['Pod', 'labeller-0']);
          assert.match(rejected.note, /YAML syntax error.*the last good config stays in force/s);
          await patchLabels(cm('c1'), { team: 'ops' });
          await labelled(cm('c1'), { team: 'platform' });
          // Its PATCH in the audit log before the next step counts from there (the log lags the answer).
          await settle();
          // A kind removed: its controller stops; a new object of that kind is left alone.
          await step(
            'kind removed',
            `labels: { team: platform }\nkinds:\n  - resource: configmaps\n${services('web')}    selector: app=web\n`,
            (line) => assert.deepEqual([line['removed'], line['restarted']], [['deployments'], undefined]),
            () => create(`/apis/apps/v1/namespaces/${ns}/deployments`, deployment('d2')),
            { patch: 0, list: none },
          );
          assert.equal((await labelsOf(`/apis/apps/v1/namespaces/${ns}/deployments/d2`))['team'], undefined);
          for (const line of figures) figure(t, `reload (${runtime}): ${line}`);
        } finally {
          const exit = await labeller.stop();
          assert.equal(exit.code, 0, exit.stderr.slice(-2000));
        }
      },
    );
  }
});

describe('live config reload of templates that read related objects', { skip }, () => {
  test(
    'a namespace label read added, an owner label read added (new shared caches), the namespace read dropped: each object follows, later changes of the related objects too, and only the kinds concerned are listed again',
    { skip: auditSkip },
    async (t) => {
      const ns = await createNamespace('reload-related');
      const core = `/api/v1/namespaces/${ns}`;
      const apps = `/apis/apps/v1/namespaces/${ns}`;
      await patchLabels(`/api/v1/namespaces/${ns}`, { team: 'blue' });
      await create(`${core}/configmaps`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c1' } });
      const d1 = await create<{ metadata: { uid: string } }>(`${apps}/deployments`, {
        ...deployment('d1'),
        metadata: { name: 'd1', labels: { tier: 'web' } },
      });
      // As the test control plane runs no controller manager, the ReplicaSet is made here, with its controller reference.
      await create(`${apps}/replicasets`, {
        apiVersion: 'apps/v1',
        kind: 'ReplicaSet',
        metadata: {
          name: 'r1',
          ownerReferences: [
            { apiVersion: 'apps/v1', kind: 'Deployment', name: 'd1', uid: d1.metadata.uid, controller: true },
          ],
        },
        spec: deployment('d1').spec,
      });
      const kinds = (configMaps: string, more = '', deployments = '') =>
        `kinds:\n  - resource: configmaps\n    labels: { env: prod${configMaps} }\n  - resource: deployments\n    labels: { env: prod${deployments} }\n${more}`;
      const readsTeam = ", team: '{{namespace.labels.team}}'";
      const replicaSets = `  - resource: replicasets\n    labels: { tier: '{{owner.labels.tier}}' }\n`;
      const volume = new ConfigMapVolume(kinds(''));
      after(() => rmSync(volume.dir, { recursive: true, force: true }));
      /** LISTs (streaming ones too) labeller sent about this test's namespace (its objects, or the namespace itself), by resource. */
      const lists = (): Record<string, number> => {
        const counts: Record<string, number> = {};
        const events = auditEvents((e) =>
          fillStarted(e) && e.requestURI.includes(ns) && (e.userAgent ?? '').startsWith('labeller/')
        );
        for (const e of events) {
          const resource = e.objectRef?.resource ?? '';
          counts[resource] = (counts[resource] ?? 0) + 1;
        }
        return counts;
      };
      const RESOURCE_OF: Record<string, string> = {
        ConfigMap: 'configmaps',
        Namespace: 'namespaces',
        Deployment: 'deployments',
        ReplicaSet: 'replicasets',
      };
      const c1 = `${core}/configmaps/c1`;
      const r1 = `${apps}/replicasets/r1`;
      const [port] = await freePorts(1);
      const labeller = new Labeller([
        '--config',
        volume.path,
        '--namespace',
        ns,
        '--requeue-after',
        '0',
        '--http-port',
        String(port),
      ]);
      const figures: string[] = [];
      /** Writes `yaml`, checks the reload's log line, waits for `converged`, then checks the LISTs sent since. */
      const step = async (
        what: string,
        yaml: string,
        reported: (line: LogLine) => void,
        converged: () => Promise<unknown>,
        listed: Record<string, number>,
      ) => {
        const before = lists();
        const from = labeller.logs.length;
        volume.update(yaml);
        const line = await reloads(labeller, from);
        assert.equal(line.msg, 'config reloaded', String(line['error']));
        reported(line);
        await converged();
        // Anything unexpected has a moment to show.
        await sleep(1500);
        // Caches filled, by labeller's log (a fill the server failed and labeller retried counts once).
        const counted = Object.fromEntries(
          Object.entries(cacheFills(labeller.logs, from)).map(([kind, n]) => [RESOURCE_OF[kind] ?? kind, n]),
        );
        figures.push(`${what}: LIST ${JSON.stringify(counted)}`);
        const fills = auditEvents((e) => e.requestURI.includes(ns) && (e.userAgent ?? '').startsWith('labeller/'));
        assert.deepEqual(counted, listed, `${what}; every fill of a cache:\n${describeFills(fills)}`);
        // The kinds the change leaves alone are not even asked for again.
        const now = lists();
        const requested = Object.entries(now).filter(([resource, n]) =>
          n > (before[resource] ?? 0) && !(resource in listed)
        );
        assert.deepEqual(requested, [], `${what}: requests to fill caches the change leaves alone`);
      };
      try {
        await labelled(c1, { env: 'prod' });
        await labelled(`${apps}/deployments/d1`, { env: 'prod' });

        // configmaps start reading their namespace's label: restarted onto the namespace's cache, made now.
        await step(
          'namespace read added',
          kinds(readsTeam),
          (line) => assert.deepEqual([line['restarted'], line['relabelled']], [['configmaps'], undefined]),
          async () => {
            await labelled(c1, { env: 'prod', team: 'blue' });
            await patchLabels(`/api/v1/namespaces/${ns}`, { team: 'green' });
            await labelled(c1, { team: 'green' });
          },
          { configmaps: 1, namespaces: 1 },
        );
        // replicasets read their owner's label: every cache keeps what owners are read for, so the
        // caches of related objects are made again and every kind restarts onto them.
        await step(
          'owner read added',
          kinds(readsTeam, replicaSets),
          (line) =>
            assert.deepEqual(
              [line['added'], line['restarted'], line['relatedCachesRebuilt']],
              [['replicasets'], ['configmaps', 'deployments'], ['owner.* read']],
            ),
          async () => {
            await labelled(r1, { tier: 'web' });
            await patchLabels(`${apps}/deployments/d1`, { tier: 'api' });
            await labelled(r1, { tier: 'api' });
            await patchLabels(`/api/v1/namespaces/${ns}`, { team: 'red' });
            await labelled(c1, { env: 'prod', team: 'red' });
          },
          { configmaps: 1, deployments: 1, replicasets: 1, namespaces: 1 },
        );
        // The namespace read dropped: the label labeller set goes. Deployments restarted too (they
        // read an annotation): the owners' cache replicasets read is their new one, not the stopped one.
        await step(
          'namespace read dropped',
          kinds('', replicaSets, ", note: '{{annotations.example.com/note}}'"),
          (line) =>
            assert.deepEqual(
              [line['restarted'], line['relatedCachesRebuilt']],
              [['configmaps', 'deployments'], undefined],
            ),
          async () => {
            await labelled(c1, { env: 'prod', team: undefined });
            await patchLabels(`${apps}/deployments/d1`, { tier: 'db' });
            await labelled(r1, { tier: 'db' });
          },
          { configmaps: 1, deployments: 1 },
        );
        // No template reads namespaces any more: their cache stopped, its samples and readiness line with it.
        assert.equal(await scrape(port!, 'labeller_objects_cached', { controller: `namespaces/${ns}` }), undefined);
        assert.notEqual(await scrape(port!, 'labeller_objects_cached', { controller: `configmaps/${ns}` }), undefined);
        for (const line of figures) figure(t, `reload, related: ${line}`);
      } finally {
        assertCleanExit(await labeller.stop());
      }
    },
  );
});

describe('live config reload of two names of one resource', { skip }, () => {
  test('is rejected naming both entries, and the config in force stays', async () => {
    const ns = await createNamespace('reload-alias');
    await create(`/apis/apps/v1/namespaces/${ns}/deployments`, deployment('d1'));
    const volume = new ConfigMapVolume('kinds:\n  - resource: deployments\n    labels: { a: x }\n');
    after(() => rmSync(volume.dir, { recursive: true, force: true }));
    const labeller = new Labeller(['--config', volume.path, '--namespace', ns]);
    try {
      await labelled(`/apis/apps/v1/namespaces/${ns}/deployments/d1`, { a: 'x' });
      const from = labeller.logs.length;
      volume.update(
        'kinds:\n  - resource: deployments\n    labels: { a: x }\n  - resource: deploy\n    labels: { b: y }\n',
      );
      const line = await reloads(labeller, from);
      assert.equal(line.msg, 'config change rejected; the last good config stays in force');
      assert.match(
        String(line['error']),
        /kinds\[0\] \("deployments"\) and .*kinds\[1\] \("deploy"\) are both deployments\.apps/,
      );
      await sleep(1000);
      assert.deepEqual(await labelsOf(`/apis/apps/v1/namespaces/${ns}/deployments/d1`), { a: 'x' });
    } finally {
      assertCleanExit(await labeller.stop());
    }
  });
});
