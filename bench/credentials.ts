// RSS at rest of the labeller CLI under each kind of credentials: in-cluster (service-account
// folder at the kubelet's mount point, no kubeconfig), a kubeconfig with a token, with client
// certificate files, and with an exec plugin. 3 kinds watched, 0 objects. Prints a markdown
// table (median of --repeat runs): VmRSS once /readyz is 200 and --rest-seconds have passed,
// and VmHWM (the peak) at that moment.
//
//   node --import tsx bench/credentials.ts [--repeat 3] [--rest-seconds 10] [--checkout DIR] [--preload MODULE]
//     [--build dist] [--v8-flags F,…] [--env K=V,…]
//
// --checkout runs `bin/labeller.js` of another checkout (e.g. `git archive main | tar -x -C
// /tmp/before` with node_modules linked), for before/after figures; the control plane and the
// credentials are this one's. --preload MODULE starts Node with `--import MODULE`: with
// @kubernetes/client-node it shows what loading that library for every kubeconfig would cost.
// --build DIR runs the checkout's build (DIR/cli.js) instead of its sources, and --v8-flags gives
// node flags, e.g. the image's `--max-semi-space-size=1,--optimize-for-size`; --env adds to its
// environment, e.g. the image's `MALLOC_ARENA_MAX=1`.
// Nothing is pass/fail: the figures go in docs/performance.md.
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { fetch } from 'undici';
import { freePorts, signClientCertificate, startControlPlane } from '../test/controlplane/controlplane.ts';
import { Cluster, type PolicyRule } from '../test/cluster/cluster.ts';
import { eventually } from '../test/process/eventually.ts';
import { stats } from '../test/process/figures.ts';
import { inClusterWrapper } from '../test/cluster/incluster.ts';
import { Labeller } from '../test/process/labeller.ts';
import { exitWithUsage, parseOrExit } from './lib/cli.ts';
import { parseEnv } from './lib/launch.ts';
import { procSample } from '../test/process/procstat.ts';
import { executable } from '../test/process/runtime.ts';
import { sleep } from '../test/process/sleep.ts';

const USAGE = `usage: bench/credentials.ts [--repeat 3] [--rest-seconds 10] [--checkout DIR] [--preload MODULE]
  [--build dist] [--v8-flags F,…] [--env K=V,…]`;

function options() {
  return parseOrExit('credentials', USAGE, () => {
    const { values } = parseArgs({
      options: {
        repeat: { type: 'string', default: '3' },
        'rest-seconds': { type: 'string', default: '10' },
        checkout: { type: 'string', default: '.' },
        preload: { type: 'string' },
        build: { type: 'string' },
        'v8-flags': { type: 'string' },
        env: { type: 'string' },
        help: { type: 'boolean', default: false },
      },
    });
    if (values.help) exitWithUsage(USAGE);
    const repeat = Number(values.repeat);
    const rest = Number(values['rest-seconds']);
    if (!Number.isInteger(repeat) || repeat < 1) {
      throw new Error(`--repeat ${values.repeat}: expected a whole number ≥ 1`);
    }
    if (!Number.isFinite(rest) || rest < 0) {
      throw new Error(`--rest-seconds ${values['rest-seconds']}: expected seconds ≥ 0`);
    }
    return { values, repeat, restMs: rest * 1000, env: parseEnv(values.env) };
  });
}

const { values, repeat, restMs, env } = options();
const entry = values.build === undefined ? 'bin/labeller.js' : `${values.build.replace(/\/+$/, '')}/cli.js`;
const v8Flags = values['v8-flags']?.split(',').filter(Boolean) ?? [];
const checkout = resolve(values.checkout);

const KINDS = ['configmaps', 'secrets', 'services'];
const RULES: PolicyRule[] = [{ apiGroups: [''], resources: KINDS, verbs: ['get', 'list', 'watch', 'patch'] }];

interface Mode {
  readonly name: string;
  readonly kubeconfig: string | undefined;
  readonly env?: Record<string, string>;
  readonly wrapper?: readonly string[];
}

const cp = await startControlPlane();
const cluster = await Cluster.connect(cp.kubeconfig);
const work = mkdtempSync(join(tmpdir(), 'labeller-bench-credentials-'));
try {
  const ns = await cluster.namespace('bench-credentials');
  const sa = await cluster.serviceAccount(ns, 'labeller', RULES);
  const token = await cluster.boundToken(ns, 'labeller', 'bench-token');

  // Client certificate for a user bound to the same rules.
  const user = `bench-${ns}`;
  await cluster.post('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
    metadata: { name: user },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: sa.role },
    subjects: [{ kind: 'User', apiGroup: 'rbac.authorization.k8s.io', name: user }],
  });
  cluster.onClose(() => cluster.delete(`/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${user}`));
  const pair = signClientCertificate(cp.clientCA, user);
  writeFileSync(join(work, 'cert.pem'), pair.cert);
  writeFileSync(join(work, 'key.pem'), pair.key);

  // An exec plugin that hands out the token, valid for an hour.
  const plugin = join(work, 'plugin.sh');
  writeFileSync(
    plugin,
    `#!/bin/sh\nprintf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s","expirationTimestamp":"%s"}}\\n' "${token}" "$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)"\n`,
  );
  chmodSync(plugin, 0o755);

  // The service-account folder for in-cluster mode.
  const saDir = join(work, 'serviceaccount');
  const config = JSON.parse(readFileSync(cp.kubeconfig, 'utf8')) as {
    clusters: { cluster: { 'certificate-authority-data': string } }[];
  };
  mkdirSync(saDir);
  writeFileSync(join(saDir, 'token'), token);
  writeFileSync(
    join(saDir, 'ca.crt'),
    Buffer.from(config.clusters[0]!.cluster['certificate-authority-data'], 'base64'),
  );
  writeFileSync(join(saDir, 'namespace'), ns);
  const server = new URL(cp.server);

  const modes: Mode[] = [
    {
      name: 'in-cluster (service account)',
      kubeconfig: undefined,
      wrapper: inClusterWrapper(saDir),
      env: {
        KUBERNETES_SERVICE_HOST: server.hostname,
        KUBERNETES_SERVICE_PORT: server.port,
        KUBECONFIG: '',
        HOME: work,
      },
    },
    { name: 'kubeconfig, token', kubeconfig: cluster.writeKubeconfig({ user: { token } }) },
    {
      name: 'kubeconfig, client certificate files',
      kubeconfig: cluster.writeKubeconfig({
        user: { 'client-certificate': join(work, 'cert.pem'), 'client-key': join(work, 'key.pem') },
      }),
    },
    {
      name: 'kubeconfig, exec plugin',
      kubeconfig: cluster.writeKubeconfig({
        user: { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: plugin, interactiveMode: 'Never' } },
      }),
    },
  ];

  console.log(
    `labeller of ${checkout} (${Object.entries(env).map(([k, v]) => `${k}=${v} `).join('')}${entry}${
      v8Flags.length ? ` ${v8Flags.join(' ')}` : ''
    })${values.preload ? ` with ${values.preload} preloaded` : ''}; ${
      KINDS.join(', ')
    } watched in an empty namespace; RSS ${restMs / 1000} s after /readyz is 200; median of ${repeat}`,
  );
  console.log('\n| credentials | RSS at rest (MiB) | peak RSS (MiB) | runs (RSS) |\n|---|---|---|---|');
  for (const mode of modes) {
    const rss: number[] = [];
    const hwm: number[] = [];
    for (let i = 0; i < repeat; i++) {
      const reading = await atRest(mode, ns);
      rss.push(reading.rss);
      hwm.push(reading.hwm);
    }
    console.log(
      `| ${mode.name} | ${stats(rss).median.toFixed(0)} | ${stats(hwm).median.toFixed(0)} | ${
        rss.map((r) => r.toFixed(0)).join(', ')
      } |`,
    );
  }
} finally {
  await cluster.close();
  await cp.stop();
  rmSync(work, { recursive: true, force: true });
}

/** Starts labeller, waits for /readyz and the rest period, reads its memory, stops it. */
async function atRest(mode: Mode, ns: string): Promise<{ rss: number; hwm: number }> {
  const [port = 0] = await freePorts(1);
  const labeller = new Labeller(
    ['--kinds', KINDS.join(','), '--namespace', ns, '--label', 'team=platform', '--http-port', String(port)],
    {
      // The checkout's own source run or build, from there.
      command: [executable('node'), ...v8Flags, ...(values.preload ? ['--import', values.preload] : []), entry],
      cwd: checkout,
      kubeconfig: mode.kubeconfig ?? '',
      wrapper: mode.wrapper,
      env: { ...mode.env, ...env },
      outputLimit: 3000,
    },
  );
  try {
    await eventually(
      async () => {
        labeller.assertRunning();
        return (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200;
      },
      `${mode.name}: /readyz 200`,
      60_000,
      200,
    );
    await sleep(restMs);
    const reading = procSample(labeller.pid);
    if (!reading) throw new Error(`${mode.name}: labeller is gone`);
    return { rss: reading.rss / 2 ** 20, hwm: reading.peakRss / 2 ** 20 };
  } finally {
    await labeller.stop();
  }
}
