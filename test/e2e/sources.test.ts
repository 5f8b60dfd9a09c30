// Labels from sources of truth against the real API server: a ConfigMap edited (one key: only the
// objects that looked it up get a PATCH, one each, and no GET or LIST), a file swapped as the
// kubelet swaps a mounted ConfigMap, an HTTPS endpoint with its own CA (304s, a changed body, the
// endpoint down for a minute, a malformed body), a source added by a live reload; status and
// prune with lookups; and a source that goes away keeps its last good content.
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, describe, test } from 'node:test';
import { type AuditEvent, byLabeller, receivedAt } from '../cluster/audit.ts';
import { Catalog } from '../cluster/catalog.ts';
import { ConfigMapVolume } from '../cluster/configmapvolume.ts';
import { assertCleanExit } from '../process/crash.ts';
import { Labeller, runLabeller } from '../process/labeller.ts';
import { sleep } from '../process/sleep.ts';
import {
  adminClient,
  auditSkip,
  auditTail,
  configFile,
  create,
  createNamespace,
  eventually,
  labelsOf,
  patchLabels,
  skip,
} from './cluster.ts';

const FIELD_MANAGER = 'labeller-sources-e2e';
const args = (config: string, namespaces: readonly string[]) => [
  '--config',
  config,
  '--namespace',
  namespaces.join(','),
  '--field-manager',
  FIELD_MANAGER,
];

/** The labels of every config map and secret in `ns`, by "kind/name". */
async function labelled(ns: string): Promise<Map<string, Record<string, string>>> {
  const admin = await adminClient();
  const found = new Map<string, Record<string, string>>();
  for (const resource of ['configmaps', 'secrets']) {
    const list = await admin.json<{ items: { metadata: { name: string; labels?: Record<string, string> } }[] }>(
      'GET',
      `/api/v1/namespaces/${ns}/${resource}`,
    );
    for (const item of list.items) {
      if (resource === 'configmaps' && item.metadata.name === 'kube-root-ca.crt') continue;
      found.set(`${resource}/${item.metadata.name}`, item.metadata.labels ?? {});
    }
  }
  return found;
}

/** Waits until every config map and secret in `ns` carries `key` = `value` (undefined: not that label). */
const allCarry = (ns: string, key: string, value: string | undefined) =>
  eventually(
    async () => [...(await labelled(ns)).values()].every((labels) => labels[key] === value),
    `every object in ${ns} to carry ${key}=${value}`,
    60_000,
  );

async function objects(ns: string, names: readonly string[], labels: Record<string, string> = {}): Promise<void> {
  for (const name of names) {
    await create(`/api/v1/namespaces/${ns}/configmaps`, { metadata: { name, labels } });
    await create(`/api/v1/namespaces/${ns}/secrets`, { metadata: { name, labels }, stringData: { k: 'v' } });
  }
}

/** An HTTPS catalogue serving `body` with bearer `token`, closed once the file's tests are done. */
async function catalogServing(token: string, body: string): Promise<Catalog> {
  const catalog = new Catalog(token);
  catalog.body = body;
  await catalog.up();
  after(() => catalog.close());
  return catalog;
}

/**
 * kinds.yaml labelling config maps and secrets `cost-center` from `{{<lookup>}}`, which reads URL
 * source `name` at `catalog` (polled every second; `fields` added to the source).
 */
const catalogConfig = (catalog: Catalog, name: string, lookup: string, fields: readonly string[] = []) =>
  configFile(`
sources:
  ${name}:
    url: ${catalog.url}
    interval: 1s
    caFile: ${catalog.caFile}
    bearerTokenFile: ${catalog.tokenFile}
${fields.map((field) => `    ${field}\n`).join('')}labels:
  cost-center: "{{${lookup}}}"
kinds:
  - resource: configmaps
  - resource: secrets
`);

describe('labels from sources of truth', { skip }, () => {
  test(
    'a ConfigMap source: one key changed relabels only the objects that looked it up, one PATCH each, no GET or LIST; status counts lookups; a source that goes away keeps its last content; prune',
    { skip: auditSkip },
    async () => {
      const [src, n1, n2] = [
        await createNamespace('sources-src'),
        await createNamespace('sources-a'),
        await createNamespace('sources-b'),
      ];
      await patchLabels(`/api/v1/namespaces/${n1}`, { team: 'payments' });
      await patchLabels(`/api/v1/namespaces/${n2}`, { team: 'search' });
      await objects(n1, ['a', 'b', 'c']);
      await objects(n2, ['a', 'b', 'c']);
      const teams = (payments: string) =>
        `payments: { costCenter: ${payments}, oncall: pay-primary }\nsearch: { costCenter: cc-2 }\n`;
      const source = `/api/v1/namespaces/${src}/configmaps/teams`;
      await create(`/api/v1/namespaces/${src}/configmaps`, {
        metadata: { name: 'teams' },
        data: { 'teams.yaml': teams('cc-1') },
      });
      const config = configFile(`
sources:
  teams:
    configMap: { namespace: ${src}, name: teams, key: teams.yaml }
labels:
  cost-center: "{{teams[namespace.labels.team].costCenter}}"
kinds:
  - resource: configmaps
  - resource: secrets
`);
      const requests = auditTail((e) =>
        byLabeller(e) && (e.objectRef?.namespace === n1 || e.objectRef?.namespace === n2) &&
        (e.verb !== 'patch' || e.requestURI.includes(`fieldManager=${FIELD_MANAGER}`))
      );
      const labeller = new Labeller(args(config, [n1, n2]));
      try {
        await allCarry(n1, 'cost-center', 'cc-1');
        await allCarry(n2, 'cost-center', 'cc-2');
        const status = await runLabeller(['status', ...args(config, [n1, n2]), '-o', 'json']);
        assert.equal(status.code, 0, status.stderr);
        assert.equal((JSON.parse(status.stdout) as { total: { pending: number } }).total.pending, 0);
        await sleep(1000);
        requests();

        // One key changed: the six objects of n1 get one PATCH each; n2's get nothing.
        const since = Date.now();
        await (await adminClient()).json('PATCH', source, {
          headers: { 'content-type': 'application/merge-patch+json' },
          body: JSON.stringify({ data: { 'teams.yaml': teams('cc-9') } }),
        });
        await allCarry(n1, 'cost-center', 'cc-9');
        await sleep(1500);
        const sent = requests().filter((e: AuditEvent) => receivedAt(e) >= since);
        const patches = sent.filter((e) => e.verb === 'patch');
        assert.equal(patches.length, 6, 'one PATCH per object that looked payments up');
        assert.ok(patches.every((e) => e.objectRef?.namespace === n1), 'none in the other namespace');
        assert.deepEqual(sent.filter((e) => e.verb !== 'patch').map((e) => e.verb), [], 'no GET, no LIST');
        assert.deepEqual([...(await labelled(n2)).values()].map((l) => l['cost-center']), Array(6).fill('cc-2'));

        // The source goes away: its last good content stays, and so do the labels.
        await (await adminClient()).request('DELETE', source);
        await labeller.waitForLog((l) => /source cannot be read; its last good content stays/.test(l.msg));
        await create(`/api/v1/namespaces/${n1}/configmaps`, { metadata: { name: 'late' } });
        await eventually(
          async () => (await labelsOf(`/api/v1/namespaces/${n1}/configmaps/late`))['cost-center'] === 'cc-9',
          'a new object labelled from the last good content',
        );
      } finally {
        assertCleanExit(await labeller.stop());
      }
      const pruned = await runLabeller(['prune', ...args(config, [n1, n2])]);
      assert.equal(pruned.code, 0, pruned.stderr);
      await allCarry(n1, 'cost-center', undefined);
      await allCarry(n2, 'cost-center', undefined);
    },
  );

  test('a file source swapped as the kubelet swaps a mounted ConfigMap, and a source added by a live reload', async () => {
    const ns = await createNamespace('sources-file');
    await objects(ns, ['web'], { app: 'web' });
    await objects(ns, ['api'], { app: 'api' });
    const owners = new ConfigMapVolume('web: alice\napi: bob\n', 'owners.yaml');
    const tiers = new ConfigMapVolume('web: { tier: frontend }\n', 'tiers.yaml');
    after(() => [owners, tiers].forEach((v) => rmSync(v.dir, { recursive: true, force: true })));
    const kinds = 'kinds:\n  - resource: configmaps\n  - resource: secrets\n';
    const config = new ConfigMapVolume(`
sources:
  owners: { file: ${owners.path} }
labels:
  owner: "{{owners[labels.app]}}"
${kinds}`);
    after(() => rmSync(config.dir, { recursive: true, force: true }));
    const labeller = new Labeller(args(config.path, [ns]));
    try {
      const owner = async (name: string) => (await labelled(ns)).get(`secrets/${name}`)?.['owner'];
      await eventually(async () => (await owner('web')) === 'alice' && (await owner('api')) === 'bob', 'owners');
      owners.update('web: carol\napi: bob\n');
      await eventually(async () => (await owner('web')) === 'carol', 'the swapped file relabels web');
      assert.equal(await owner('api'), 'bob');

      // A reload adds a source and a lookup in it: loaded, and the objects it names relabelled.
      const from = labeller.logs.length;
      config.update(`
sources:
  owners: { file: ${owners.path} }
  tiers: { file: ${tiers.path} }
labels:
  owner: "{{owners[labels.app]}}"
  tier: "{{tiers[labels.app].tier | default \\"none\\"}}"
${kinds}`);
      await labeller.waitForLog((l) => l.msg === 'config reloaded', 30_000, from);
      await eventually(async () => (await labelled(ns)).get('configmaps/web')?.['tier'] === 'frontend', 'web tier');
      await eventually(async () => (await labelled(ns)).get('configmaps/api')?.['tier'] === 'none', 'api default');
    } finally {
      assertCleanExit(await labeller.stop());
    }
  });

  test(
    'an HTTPS source with its own CA and a token: 304s while unchanged, a changed body relabels, a minute down changes nothing, a malformed body is refused and the last good content stays',
    { timeout: 240_000 },
    async () => {
      const ns = await createNamespace('sources-https');
      await objects(ns, ['web'], { app: 'web' });
      const token = 'catalog-secret-token-1';
      const catalog = await catalogServing(token, JSON.stringify({ web: { costCenter: 'cc-1' } }));
      const config = catalogConfig(catalog, 'catalog', 'catalog[labels.app].costCenter', ['timeout: 2s']);
      const labeller = new Labeller(args(config, [ns]));
      try {
        await allCarry(ns, 'cost-center', 'cc-1');
        await eventually(async () => catalog.answers.filter((s) => s === 304).length >= 2, 'polls answered 304');
        assert.ok(catalog.authorizations.every((a) => a === `Bearer ${token}`), 'the token, read from its file');

        catalog.body = JSON.stringify({ web: { costCenter: 'cc-2' } });
        await allCarry(ns, 'cost-center', 'cc-2');

        await catalog.down();
        await labeller.waitForLog((l) => /source cannot be read; its last good content stays/.test(l.msg), 15_000);
        await sleep(60_000);
        assert.deepEqual([...(await labelled(ns)).values()].map((l) => l['cost-center']), ['cc-2', 'cc-2']);
        catalog.body = '[1, 2, 3]';
        await catalog.up();
        await labeller.waitForLog(
          (l) => /source cannot be read/.test(l.msg) && /expected a mapping/.test(String(l['error'])),
          15_000,
        );
        await sleep(3000);
        assert.deepEqual([...(await labelled(ns)).values()].map((l) => l['cost-center']), ['cc-2', 'cc-2']);
        assert.ok(!labeller.stderr.includes(token), 'the token is never logged');
      } finally {
        assertCleanExit(await labeller.stop());
      }
    },
  );

  test(
    'a 200 that looks like an outage (null, {}, an error document) strips nothing; allowMassRemoval takes it',
    { timeout: 180_000 },
    async () => {
      const ns = await createNamespace('sources-outage');
      const colours = ['red', 'green', 'blue', 'pink', 'gray'];
      for (const colour of colours) await objects(ns, [colour], { app: colour });
      const good = JSON.stringify(Object.fromEntries(colours.map((colour, i) => [colour, { cc: `cc-${i + 1}` }])));
      const catalog = await catalogServing('outage-token', good);
      const source = (allow: boolean) =>
        catalogConfig(catalog, 'cmdb', 'cmdb[labels.app].cc', [`allowMassRemoval: ${allow}`]);
      const costCentres = async () => [...(await labelled(ns)).values()].map((l) => l['cost-center']).sort();
      const all = colours.flatMap((_, i) => [`cc-${i + 1}`, `cc-${i + 1}`]).sort();
      const labeller = new Labeller(args(source(false), [ns]));
      try {
        await eventually(async () => (await costCentres()).join() === all.join(), 'every object labelled', 60_000);
        for (
          const [body, why] of [['null', /empty/], ['{}', /no entries/], [
            '{"error": "maintenance window"}',
            /drops 5 of its 5 keys at once/,
          ]] as const
        ) {
          catalog.body = body;
          await labeller.waitForLog(
            (l) => /source cannot be read; its last good content stays/.test(l.msg) && why.test(String(l['error'])),
            15_000,
          );
          await sleep(3000);
          assert.deepEqual(await costCentres(), all, `${body}: no label stripped`);
          catalog.body = good;
          await labeller.waitForLog((l) => /source can be read again/.test(l.msg), 15_000);
        }
      } finally {
        assertCleanExit(await labeller.stop());
      }
      // Opted in: the same document is taken, and the labels that read it go.
      const allowing = new Labeller(args(source(true), [ns]));
      try {
        await eventually(async () => (await costCentres()).join() === all.join(), 'labelled again', 60_000);
        catalog.body = '{"error": "maintenance window"}';
        await allCarry(ns, 'cost-center', undefined);
      } finally {
        assertCleanExit(await allowing.stop());
      }
    },
  );

  test(
    'a restart into an outage: the first read is checked against the key set remembered before, and strips nothing',
    { timeout: 180_000 },
    async () => {
      const ns = await createNamespace('sources-restart');
      const teams = ['red', 'green', 'blue', 'gray'];
      for (const team of teams) await objects(ns, [team], { app: team });
      const good = JSON.stringify(Object.fromEntries(teams.map((team, i) => [team, `cc-${i + 1}`])));
      const catalog = await catalogServing('restart-token', good);
      // A name of its own: the memory keeps one record per source name.
      const config = catalogConfig(catalog, 'restarted', 'restarted[labels.app]');
      const costCentres = async () => [...(await labelled(ns)).values()].map((l) => l['cost-center']).sort();
      const all = teams.flatMap((_, i) => [`cc-${i + 1}`, `cc-${i + 1}`]).sort();
      const admin = await adminClient();
      const remembered = async () => {
        const leases = await admin.json<
          { items: { metadata: { name: string; annotations?: Record<string, string> } }[] }
        >(
          'GET',
          '/apis/coordination.k8s.io/v1/leases',
        );
        return leases.items.find((lease) => lease.metadata.name.startsWith(`sources-${FIELD_MANAGER}-`))?.metadata
          .annotations;
      };
      // One record per source name; those of the tests before (other sources under this field
      // manager) are deleted, as sources no longer in the config. Without a key, the count only.
      const records = async () => Object.entries((await remembered()) ?? {});
      const first = new Labeller(args(config, [ns]));
      try {
        await eventually(async () => (await costCentres()).join() === all.join(), 'every object labelled', 60_000);
        await eventually(async () => {
          const [record, ...others] = await records();
          return others.length === 0 && record?.[0] === 'sources.labeller/restarted' &&
            /^\{"v":2,"origin":"[0-9a-f]{16}","keys":4\}$/.test(record[1]);
        }, 'the key count remembered, in the only record');
      } finally {
        // Killed, then the source's outage begins before the next process starts.
        first.kill();
        await first.exited;
      }
      catalog.body = JSON.stringify({ gray: 'cc-9' });
      const second = new Labeller(args(config, [ns]));
      try {
        await second.waitForLog(
          (l) =>
            /source cannot be read; it has not loaded yet/.test(l.msg) &&
            /drops 3 of the 4 keys it had before labeller started, by count/.test(String(l['error'])),
          30_000,
        );
        await sleep(3000);
        assert.deepEqual(await costCentres(), all, 'no label stripped');
        assert.doesNotMatch(JSON.stringify(await remembered()), /restart-token/, 'the memory holds no URL or token');
        catalog.body = JSON.stringify({ red: 'cc-1', green: 'cc-2', blue: 'cc-3', gray: 'cc-5' });
        await eventually(
          async () =>
            (await costCentres()).join() === ['cc-1', 'cc-1', 'cc-2', 'cc-2', 'cc-3', 'cc-3', 'cc-5', 'cc-5'].join(),
          'the source back: its new value taken',
          60_000,
        );
      } finally {
        assertCleanExit(await second.stop());
      }
    },
  );
});
