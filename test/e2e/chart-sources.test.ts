// Sources of truth as the chart deploys them: file sources mounted from their ConfigMap or Secret
// (each file on its own, so that two files share a folder; a folder the chart mounts already is
// refused with the source it collides with), the Secret holding the sources' memory key, and the
// NetworkPolicy letting labeller resolve and reach its URL sources. Rendered, then validated by
// the API server (server-side dry run).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createNamespace, skip } from './cluster.ts';
import { apply, type Manifest, only, render, template } from './helm.ts';

interface From {
  readonly name: string;
  readonly items: { key: string; path: string }[];
  readonly optional?: boolean;
}
interface Projection {
  readonly configMap?: From;
  readonly secret?: From;
}
interface Pod {
  readonly containers: { name: string; volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[] }[];
  readonly volumes: { name: string; projected?: { sources: Projection[] } }[];
}
const podOf = (manifests: Manifest[]) =>
  (only(manifests, 'Deployment')['spec'] as { template: { spec: Pod } }).template.spec;
/**
 * The files a volume mounted at `folder` holds, as "<folder>/<path> ← <configMap|secret>/<name>:<key>",
 * marked " (required)" unless optional: a file not there yet must be a source not loaded, not a pod
 * that cannot start.
 */
function filesAt(pod: Pod, folder: string): string[] {
  const mounts = pod.containers[0]?.volumeMounts.filter((m) => m.mountPath === folder) ?? [];
  assert.equal(mounts.length, 1, `one mount at ${folder}: ${JSON.stringify(mounts)}`);
  assert.equal(mounts[0]?.readOnly, true);
  const volume = pod.volumes.find((v) => v.name === mounts[0]?.name);
  return (volume?.projected?.sources ?? []).flatMap((source) =>
    Object.entries(source).flatMap(([type, from]: [string, From]) =>
      from.items.map((item) =>
        `${folder}/${item.path} ← ${type}/${from.name}:${item.key}${from.optional ? '' : ' (required)'}`
      )
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
      "a file in the sources' memory key's folder",
      { teams: { file: '/var/run/secrets/labeller/sources-memory/teams.yaml', fileFrom: { configMap: 'teams' } } },
      /sources\.teams: file \/var\/run\/secrets\/labeller\/sources-memory\/teams\.yaml is in \/var\/run\/secrets\/labeller\/sources-memory, where the chart mounts the sources' memory key: put it in another folder/,
    ],
    [
      "an extra mount where the sources' memory key is mounted",
      { teams: { configMap: { namespace: 'platform', name: 'teams' } } },
      /extraVolumeMounts\[0\] \(extra\) is mounted at \/var\/run\/secrets\/labeller\/sources-memory, where the chart mounts the sources' memory key: mount it elsewhere/,
      {
        extraVolumes: [{ name: 'extra', emptyDir: {} }],
        extraVolumeMounts: [{ name: 'extra', mountPath: '/var/run/secrets/labeller/sources-memory' }],
      },
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

describe("chart: the sources' memory key", () => {
  interface KeyPod extends Pod {
    readonly containers: (Pod['containers'][number] & { args: string[] })[];
    readonly volumes: (Pod['volumes'][number] & { secret?: { secretName: string; items: object[] } })[];
  }
  const FOLDER = '/var/run/secrets/labeller/sources-memory';
  /** The Secret the pod mounts the key from, with the flag and mount that read it; undefined when none. */
  const keyOf = (manifests: Manifest[]) => {
    const pod = podOf(manifests) as KeyPod;
    const flag = pod.containers[0]?.args.filter((a) => a.startsWith('--sources-memory-key-file'));
    const mounts = pod.containers[0]?.volumeMounts.filter((m) => m.mountPath === FOLDER) ?? [];
    const volume = pod.volumes.find((v) => v.name === mounts[0]?.name);
    if (flag?.length === 0 && mounts.length === 0) return undefined;
    assert.deepEqual(flag, [`--sources-memory-key-file=${FOLDER}/key`]);
    assert.deepEqual(mounts, [{ name: 'sources-memory-key', mountPath: FOLDER, readOnly: true }]);
    assert.deepEqual(volume?.secret?.items, [{ key: 'key', path: 'key' }]);
    return volume?.secret?.secretName;
  };
  const secrets = (manifests: Manifest[]) => manifests.filter((m) => m.kind === 'Secret');

  test('none without sources; with sources, or a ConfigMap of your own that may name some, a Secret of its own holding a random key', async () => {
    const none = await render({ values: BASE });
    assert.equal(keyOf(none), undefined);
    assert.deepEqual(secrets(none), []);
    for (const values of [{ ...BASE, sources: URLS }, { ...BASE, existingConfigMap: 'mine' }]) {
      const manifests = await render({ release: 'rel', values });
      assert.equal(keyOf(manifests), 'rel-labeller-sources-memory');
      const [secret, ...more] = secrets(manifests);
      assert.equal(more.length, 0);
      assert.equal(secret?.metadata.name, 'rel-labeller-sources-memory');
      assert.equal(secret?.metadata.labels?.['app.kubernetes.io/instance'], 'rel');
      const key = Buffer.from((secret?.['data'] as { key: string }).key, 'base64').toString();
      assert.match(key, /^[A-Za-z0-9]{48}$/, 'random, 48 letters and digits (helm template finds no Secret to keep)');
    }
  });

  test('sourcesMemory.existingSecret: that Secret is mounted, and none is made', async () => {
    const manifests = await render({ values: { ...BASE, sources: URLS, sourcesMemory: { existingSecret: 'mine' } } });
    assert.equal(keyOf(manifests), 'mine');
    assert.deepEqual(secrets(manifests), []);
    const run = await template({ values: { ...BASE, sourcesMemory: { existingSecret: 'mine', other: 1 } } });
    assert.notEqual(run.code, 0);
  });
});

/** The NetworkPolicy's egress rules as "<protocol>/<port> → <peers as JSON, or 'any'>". */
function egress(manifests: Manifest[]): string[] {
  const spec = only(manifests, 'NetworkPolicy')['spec'] as {
    egress: { ports: { port: number | string; protocol: string }[]; to?: object[] }[];
  };
  return spec.egress.flatMap((rule) =>
    rule.ports.map((p) => `${p.protocol}/${p.port} → ${rule.to ? JSON.stringify(rule.to) : 'any'}`)
  ).sort();
}
const KUBE_DNS = [{
  namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
  podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
}];
const URLS = {
  catalog: { url: 'https://catalog.example.com/teams.json' },
  cmdb: { url: 'https://cmdb.example.com:8443/api/teams' },
  legacy: { url: 'http://10.1.2.3:8080/teams', allowHTTP: true },
  v6: { url: 'https://[fd00::7]/teams' },
};

describe('chart: NetworkPolicy egress', () => {
  test('DNS is allowed, over UDP and TCP, to any destination or to the DNS servers given', async () => {
    const policy = { networkPolicy: { enabled: true } };
    assert.deepEqual(egress(await render({ values: { ...BASE, ...policy } })), [
      'TCP/443 → any',
      'TCP/53 → any',
      'TCP/6443 → any',
      'UDP/53 → any',
    ]);
    const dns = { networkPolicy: { enabled: true, dns: { to: KUBE_DNS } } };
    assert.deepEqual(
      egress(await render({ values: { ...BASE, ...dns } })).filter((rule) => rule.includes('/53 ')),
      [`TCP/53 → ${JSON.stringify(KUBE_DNS)}`, `UDP/53 → ${JSON.stringify(KUBE_DNS)}`],
    );
  });

  test('URL sources: their ports, to their addresses when the URL names one, else to sources.to or anywhere', async () => {
    const values = { ...BASE, sources: URLS, networkPolicy: { enabled: true, apiServer: { cidrs: ['10.0.0.1/32'] } } };
    assert.deepEqual(egress(await render({ values })), [
      'TCP/443 → [{"ipBlock":{"cidr":"10.0.0.1/32"}}]',
      'TCP/443 → [{"ipBlock":{"cidr":"fd00::7/128"}}]',
      'TCP/443 → any',
      'TCP/53 → any',
      'TCP/6443 → [{"ipBlock":{"cidr":"10.0.0.1/32"}}]',
      'TCP/8080 → [{"ipBlock":{"cidr":"10.1.2.3/32"}}]',
      'TCP/8443 → any',
      'UDP/53 → any',
    ]);
    const proxy = [{ ipBlock: { cidr: '192.0.2.0/24' } }];
    const to = { ...values, networkPolicy: { ...values.networkPolicy, sources: { to: proxy } } };
    assert.deepEqual(
      egress(await render({ values: to })).filter((rule) => /\/(443|8443) /.test(rule)),
      [
        'TCP/443 → [{"ipBlock":{"cidr":"10.0.0.1/32"}}]',
        'TCP/443 → [{"ipBlock":{"cidr":"fd00::7/128"}}]',
        `TCP/443 → ${JSON.stringify(proxy)}`,
        `TCP/8443 → ${JSON.stringify(proxy)}`,
      ].sort(),
    );
  });
});

describe('chart: sources against the API server', { skip }, () => {
  test('the Deployment with two file sources in one folder passes server-side validation', async () => {
    const namespace = await createNamespace('chart-sources');
    const manifests = await render({ release: namespace, namespace, values: TWO_IN_ONE_FOLDER });
    const run = await apply([only(manifests, 'Deployment')], ['--dry-run=server', '--validate=strict']);
    assert.match(run.stdout, /deployment\.apps\/\S+ created \(server dry run\)/);
  });

  test('the NetworkPolicy for DNS and URL sources passes server-side validation', async () => {
    const namespace = await createNamespace('chart-sources');
    const manifests = await render({
      release: namespace,
      namespace,
      values: { ...BASE, sources: URLS, networkPolicy: { enabled: true, dns: { to: KUBE_DNS } } },
    });
    const run = await apply([only(manifests, 'NetworkPolicy')], ['--dry-run=server', '--validate=strict']);
    assert.match(run.stdout, /networkpolicy\.networking\.k8s\.io\/\S+ created \(server dry run\)/);
  });
});
