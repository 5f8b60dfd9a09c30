// Sources of truth as the chart deploys them: file sources mounted from their ConfigMap or Secret
// (each file on its own, so that two files share a folder; a folder the chart mounts already is
// refused with the source it collides with). Rendered, then validated by the API server
// (server-side dry run).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createNamespace, skip } from './cluster.ts';
import { apply, type Manifest, only, render, template } from './helm.ts';

interface Projection {
  readonly configMap?: { name: string; items: { key: string; path: string }[] };
  readonly secret?: { name: string; items: { key: string; path: string }[] };
}
interface Pod {
  readonly containers: { name: string; volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[] }[];
  readonly volumes: { name: string; projected?: { sources: Projection[] } }[];
}
const podOf = (manifests: Manifest[]) =>
  (only(manifests, 'Deployment')['spec'] as { template: { spec: Pod } }).template.spec;
/** The files a volume mounted at `folder` holds, as "<folder>/<path> ← <configMap|secret>/<name>:<key>". */
function filesAt(pod: Pod, folder: string): string[] {
  const mounts = pod.containers[0]?.volumeMounts.filter((m) => m.mountPath === folder) ?? [];
  assert.equal(mounts.length, 1, `one mount at ${folder}: ${JSON.stringify(mounts)}`);
  assert.equal(mounts[0]?.readOnly, true);
  const volume = pod.volumes.find((v) => v.name === mounts[0]?.name);
  return (volume?.projected?.sources ?? []).flatMap((source) =>
    Object.entries(source).flatMap(([type, from]: [string, { name: string; items: { key: string; path: string }[] }]) =>
      from.items.map((item) => `${folder}/${item.path} ← ${type}/${from.name}:${item.key}`)
    )
  ).sort();
}

const BASE = { labels: { 'example.com/cost-center': '{{teams[name].costCenter}}' }, kinds: [{ resource: 'cm' }] };
const TWO_IN_ONE_FOLDER = {
  ...BASE,
  sources: {
    teams: { file: '/etc/sources/teams.yaml', fileFrom: { configMap: 'teams' } },
    owners: { file: '/etc/sources/owners.yaml', fileFrom: { secret: 'owners' } },
    costs: { file: '/etc/sources/costs.yaml', fileFrom: { configMap: 'teams' } },
    rota: { file: '/var/run/rota/rota.json', fileFrom: { configMap: 'rota' } },
  },
};

describe('chart: file sources', () => {
  test('two file sources in one folder: one mount there, each file from its own ConfigMap or Secret key', async () => {
    const pod = podOf(await render({ values: TWO_IN_ONE_FOLDER }));
    const paths = pod.containers[0]?.volumeMounts.map((m) => m.mountPath) ?? [];
    assert.equal(new Set(paths).size, paths.length, `mount paths are unique: ${paths.join(', ')}`);
    assert.deepEqual(filesAt(pod, '/etc/sources'), [
      '/etc/sources/costs.yaml ← configMap/teams:costs.yaml',
      '/etc/sources/owners.yaml ← secret/owners:owners.yaml',
      '/etc/sources/teams.yaml ← configMap/teams:teams.yaml',
    ]);
    assert.deepEqual(filesAt(pod, '/var/run/rota'), ['/var/run/rota/rota.json ← configMap/rota:rota.json']);
  });

  const refused: [what: string, sources: object, message: RegExp, extra?: object][] = [
    [
      "a file in the config file's folder",
      { teams: { file: '/etc/labeller/teams.yaml', fileFrom: { configMap: 'teams' } } },
      /sources\.teams: file \/etc\/labeller\/teams\.yaml is in \/etc\/labeller, where the chart mounts labeller's config \(kinds\.yaml\): put it in another folder, e.g\. \/etc\/labeller-sources\/teams\.yaml/,
    ],
    [
      "a file below the config file's folder",
      { teams: { file: '/etc/labeller/sources/teams.yaml', fileFrom: { configMap: 'teams' } } },
      /sources\.teams: file \/etc\/labeller\/sources\/teams\.yaml is in \/etc\/labeller/,
    ],
    [
      'one file from two places',
      {
        a: { file: '/etc/sources/teams.yaml', fileFrom: { configMap: 'teams' } },
        b: { file: '/etc/sources/teams.yaml', fileFrom: { secret: 'teams' } },
      },
      /sources\.a and sources\.b: both mount \/etc\/sources\/teams\.yaml, from configMap teams and secret teams: give one of them another file name/,
    ],
    [
      "a folder inside another source's",
      {
        a: { file: '/etc/sources/teams.yaml', fileFrom: { configMap: 'teams' } },
        b: { file: '/etc/sources/more/owners.yaml', fileFrom: { configMap: 'owners' } },
      },
      /sources\.b: file \/etc\/sources\/more\/owners\.yaml is in \/etc\/sources, where the chart mounts sources\.a: put both files in one folder, or in folders side by side/,
    ],
    [
      'a relative file',
      { teams: { file: 'teams.yaml', fileFrom: { configMap: 'teams' } } },
      /sources\.teams: file teams\.yaml: give an absolute path/,
    ],
    [
      'fileFrom without file',
      { teams: { fileFrom: { configMap: 'teams' } } },
      /sources\.teams: fileFrom mounts the file a `file` source reads: add `file: \/path\/to\/<key>`/,
    ],
    [
      'an extra mount where a source is mounted',
      { teams: { file: '/etc/sources/teams.yaml', fileFrom: { configMap: 'teams' } } },
      /extraVolumeMounts\[0\] \(extra\) is mounted at \/etc\/sources, where the chart mounts sources\.teams: mount it elsewhere/,
      {
        extraVolumes: [{ name: 'extra', emptyDir: {} }],
        extraVolumeMounts: [{ name: 'extra', mountPath: '/etc/sources' }],
      },
    ],
  ];
  for (const [what, sources, message, extra] of refused) {
    test(`the chart refuses ${what}, naming the sources and the fix`, async () => {
      const run = await template({ values: { ...BASE, sources, ...extra } });
      assert.notEqual(run.code, 0, `rendered: ${run.stdout.slice(0, 200)}`);
      assert.match(run.stderr, message);
    });
  }
});

describe('chart: sources against the API server', { skip }, () => {
  test('the Deployment with two file sources in one folder passes server-side validation', async () => {
    const namespace = await createNamespace('chart-sources');
    const manifests = await render({ release: namespace, namespace, values: TWO_IN_ONE_FOLDER });
    const run = await apply([only(manifests, 'Deployment')], ['--dry-run=server', '--validate=strict']);
    assert.match(run.stdout, /deployment\.apps\/\S+ created \(server dry run\)/);
  });
});
