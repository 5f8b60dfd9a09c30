// A real etcd + kube-apiserver on loopback for the e2e tests, in the spirit of
// controller-runtime's envtest: RBAC on, an admin identity, service-account token signing. With
// `full`, also the controllers, the scheduler and simulated nodes (controllers.ts).
import { type ChildProcess, execFileSync, spawnSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent } from 'undici';
import { startControllers } from './controllers.ts';
import { ControlPlaneUnavailable, freePorts, launch, stopProcess, waitFor } from './process.ts';

export { ControlPlaneUnavailable, freePorts } from './process.ts';

const here = dirname(fileURLToPath(import.meta.url));

export interface ControlPlane {
  readonly kubeconfig: string;
  readonly server: string;
  /** etcd's client URL, for tests that compact or inspect storage. */
  readonly etcd: string;
  readonly dir: string;
  /** Whether controllers, a scheduler and simulated nodes run (startControlPlane's `full`). */
  readonly full: boolean;
  /** The API server's audit log (JSON lines, Metadata level): tests count requests with it. */
  readonly auditLog: string;
  /** The CA the API server trusts for client certificates (`--client-ca-file`), with its key. */
  readonly clientCA: ClientCA;
  /** Stops kube-apiserver only (etcd keeps the data), for outage tests. */
  stopApiServer(): Promise<void>;
  startApiServer(): Promise<void>;
  stop(): Promise<void>;
}

// Every request, at Metadata level (who, verb, object, status), written when it completes.
const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
`;

export interface ClientCA {
  readonly cert: string;
  readonly key: string;
}

/** The client CA of the control plane whose files are in `dir` (the folder of its kubeconfig). */
export function clientCAFiles(dir: string): ClientCA {
  return { cert: join(dir, 'client-ca.crt'), key: join(dir, 'client-ca.key') };
}

/**
 * A client certificate for `user` in `groups` (CN and O, as the API server reads them), signed
 * by the control plane's client CA: the CSR API's signer runs in kube-controller-manager, which
 * only a full control plane runs. Returns PEM texts.
 */
export function signClientCertificate(
  ca: ClientCA,
  user: string,
  groups: readonly string[] = [],
  days = 1,
): { cert: string; key: string } {
  const work = mkdtempSync(join(tmpdir(), 'labeller-clientcert-'));
  try {
    const subject = `/CN=${user}${groups.map((g) => `/O=${g}`).join('')}`;
    openssl([
      'req',
      '-new',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      join(work, 'key.pem'),
      '-out',
      join(work, 'csr.pem'),
      '-subj',
      subject,
    ]);
    writeFileSync(join(work, 'ext.cnf'), 'extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n');
    openssl([
      'x509',
      '-req',
      '-in',
      join(work, 'csr.pem'),
      '-CA',
      ca.cert,
      '-CAkey',
      ca.key,
      '-set_serial',
      `0x${randomBytes(8).toString('hex')}`,
      '-days',
      String(days),
      '-extfile',
      join(work, 'ext.cnf'),
      '-out',
      join(work, 'cert.pem'),
    ]);
    return { cert: readFileSync(join(work, 'cert.pem'), 'utf8'), key: readFileSync(join(work, 'key.pem'), 'utf8') };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function openssl(args: readonly string[]): void {
  try {
    execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (error) {
    const stderr = (error as { stderr?: Buffer }).stderr?.toString() ?? '';
    throw new ControlPlaneUnavailable(
      `openssl ${args[0]} failed (the test control plane signs client certificates with it): ${
        stderr || String(error)
      }`,
    );
  }
}

const BARE = ['kube-apiserver', 'etcd'];
const FULL = [...BARE, 'kube-controller-manager', 'kube-scheduler', 'kwok', 'kwok-stages.yaml'];

/**
 * Folder with the binaries (with `full`, those of controllers.ts too): KUBEBUILDER_ASSETS, else
 * built (or taken from the cache) by build.sh.
 */
export function binaries(full = false): string {
  const needed = full ? FULL : BARE;
  const listed = `${needed.slice(0, -1).join(', ')} and ${needed.at(-1)}`;
  const assets = process.env['KUBEBUILDER_ASSETS'];
  if (assets) {
    for (const bin of needed) {
      if (!existsSync(join(assets, bin))) {
        throw new ControlPlaneUnavailable(
          `KUBEBUILDER_ASSETS=${assets} has no ${bin}; point it at a folder with ${listed}${
            full ? ' (as test/controlplane/build.sh --full leaves them)' : ''
          }, or unset it to build them`,
        );
      }
    }
    return assets;
  }
  const build = spawnSync('bash', [join(here, 'build.sh'), ...(full ? ['--full'] : [])], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  if (build.error) throw new ControlPlaneUnavailable(`cannot run test/controlplane/build.sh: ${build.error.message}`);
  if (build.status !== 0) {
    throw new ControlPlaneUnavailable(
      build.status === 3
        ? `no Go toolchain to build ${listed}; install Go, or set KUBEBUILDER_ASSETS to a folder with ${
          full ? 'them' : 'both binaries'
        }`
        : `test/controlplane/build.sh failed with status ${build.status} (its output is above)`,
    );
  }
  return build.stdout.trim().split('\n').at(-1) ?? '';
}

export interface ControlPlaneOptions {
  /**
   * Also kube-controller-manager, kube-scheduler and kwok with `nodes` simulated nodes: what
   * tests of objects the cluster's own controllers make need. Off, the API server alone starts
   * in seconds and nothing acts on the objects a test creates.
   */
  readonly full?: boolean;
  /** Simulated nodes of a full control plane (default 3). */
  readonly nodes?: number;
  /**
   * Server-side sharded list and watch (KEP-5866, the ShardedListAndWatch gate, alpha from 1.36):
   * on by default where the API server has it, so sharded replicas get only their slice; off, the
   * server ignores `shardSelector`, as a server without it does, and replicas filter on their side.
   */
  readonly shardedListAndWatch?: boolean;
}

/** The API server's minor version, from `kube-apiserver --version` ("Kubernetes v1.37.2"). */
function minorVersion(apiserver: string): number {
  const version = execFileSync(apiserver, ['--version'], { encoding: 'utf8' });
  return Number(version.match(/v1\.(\d+)\./)?.[1] ?? 0);
}

/**
 * Starts etcd and kube-apiserver (and, `full`, the rest of a cluster); aborting `signal` stops
 * whatever already started and rejects.
 */
export async function startControlPlane(
  signal?: AbortSignal,
  options: ControlPlaneOptions = {},
): Promise<ControlPlane> {
  const full = options.full ?? false;
  const bin = binaries(full);
  const dir = mkdtempSync(join(tmpdir(), 'labeller-controlplane-'));
  const processes: ChildProcess[] = [];
  let apiserver: ChildProcess | undefined;
  const stop = async (): Promise<void> => {
    for (const p of processes.reverse()) await stopProcess(p);
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    const [etcdClient, etcdPeer, securePort] = await freePorts(3);
    const etcd = `http://127.0.0.1:${etcdClient}`;
    processes.push(
      launch(dir, 'etcd', join(bin, 'etcd'), [
        `--data-dir=${join(dir, 'etcd')}`,
        `--listen-client-urls=${etcd}`,
        `--advertise-client-urls=${etcd}`,
        `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
        `--initial-cluster=default=http://127.0.0.1:${etcdPeer}`,
        '--unsafe-no-fsync',
        '--log-level=warn',
      ]),
    );
    await waitFor(`${etcd}/health`, { signal }, () => processes[0], join(dir, 'etcd.log'));

    const token = randomBytes(24).toString('hex');
    writeFileSync(join(dir, 'tokens.csv'), `${token},admin,admin,"system:masters"\n`);
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    writeFileSync(join(dir, 'sa.key'), privateKey.export({ type: 'pkcs1', format: 'pem' }));
    const clientCA = clientCAFiles(dir);
    openssl([
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      clientCA.key,
      '-out',
      clientCA.cert,
      '-subj',
      '/CN=labeller-test-client-ca',
      '-days',
      '30',
    ]);
    const server = `https://127.0.0.1:${securePort}`;
    const auditLog = join(dir, 'audit.log');
    writeFileSync(join(dir, 'audit-policy.yaml'), AUDIT_POLICY);
    const apiserverArgs = [
      `--etcd-servers=${etcd}`,
      `--cert-dir=${join(dir, 'certs')}`,
      `--secure-port=${securePort}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      '--authorization-mode=RBAC',
      `--token-auth-file=${join(dir, 'tokens.csv')}`,
      `--client-ca-file=${clientCA.cert}`,
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${join(dir, 'sa.key')}`,
      `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
      '--service-cluster-ip-range=10.0.0.0/24',
      // The API server may not advertise a loopback address while it maintains the `kubernetes`
      // Service's endpoints (refused from 1.37 on); nothing here reaches it through the Service.
      '--endpoint-reconciler-type=none',
      // The admission that gives pods their ServiceAccount needs the `default` one, which the
      // controller manager makes: only a full control plane has it.
      ...(full ? [] : ['--disable-admission-plugins=ServiceAccount']),
      '--allow-privileged=true',
      `--audit-policy-file=${join(dir, 'audit-policy.yaml')}`,
      `--audit-log-path=${auditLog}`,
      '--audit-log-format=json',
      '--audit-log-mode=blocking',
      // Never rotate (0 means lumberjack's 100 MB): readers follow one file, and a 50k-object
      // bench writes several hundred MB.
      '--audit-log-maxsize=1000000',
      ...(options.shardedListAndWatch !== false && minorVersion(join(bin, 'kube-apiserver')) >= 36
        ? ['--feature-gates=ShardedListAndWatch=true']
        : []),
      '--v=1',
    ];
    const startApiServer = async (): Promise<void> => {
      apiserver = launch(dir, 'kube-apiserver', join(bin, 'kube-apiserver'), apiserverArgs);
      processes.push(apiserver);
      const dispatcher = new Agent({ connect: { rejectUnauthorized: false } });
      try {
        await waitFor(
          `${server}/readyz`,
          { signal, dispatcher, headers: { authorization: `Bearer ${token}` } },
          () => apiserver,
          join(dir, 'kube-apiserver.log'),
        );
      } finally {
        await dispatcher.close();
      }
    };
    await startApiServer();

    // The API server signs its self-generated serving certificate with its own CA and writes
    // both to apiserver.crt, so clients verify TLS for real.
    const serverCA = join(dir, 'certs', 'apiserver.crt');
    const kubeconfigFor = (file: string, name: string, user: Readonly<Record<string, string>>): string => {
      const path = join(dir, file);
      writeFileSync(path, JSON.stringify(kubeconfigOf(server, readFileSync(serverCA), name, user)));
      return path;
    };
    const kubeconfig = kubeconfigFor('kubeconfig', 'admin', { token });
    if (full) {
      /** A kubeconfig with a client certificate for `user` in `groups`, as kubeadm writes its components'. */
      const identity = (name: string, user: string, groups: readonly string[] = []): string => {
        const { cert, key } = signClientCertificate(clientCA, user, groups, 30);
        return kubeconfigFor(`${name}.kubeconfig`, name, {
          'client-certificate-data': Buffer.from(cert).toString('base64'),
          'client-key-data': Buffer.from(key).toString('base64'),
        });
      };
      await startControllers({
        bin,
        dir,
        server,
        serverCA,
        adminToken: token,
        kubeconfigs: {
          // The users the bootstrap RBAC policy binds system:kube-controller-manager and
          // system:kube-scheduler to.
          controllerManager: identity('kube-controller-manager', 'system:kube-controller-manager'),
          scheduler: identity('kube-scheduler', 'system:kube-scheduler'),
          // kwok plays every node's kubelet at once, so no one node's identity fits it.
          kwok: identity('kwok', 'kwok', ['system:masters']),
        },
        serviceAccountKey: join(dir, 'sa.key'),
        clientCA,
        nodes: Array.from({ length: options.nodes ?? 3 }, (_, i) => `kwok-node-${i}`),
        signal,
      }, processes);
    }

    return {
      kubeconfig,
      server,
      etcd,
      dir,
      full,
      auditLog,
      clientCA,
      stop,
      startApiServer,
      async stopApiServer() {
        if (apiserver) await stopProcess(apiserver);
      },
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** A kubeconfig for `server`, trusting the PEM `ca`, as `user` (a kubeconfig user entry named `name`). */
function kubeconfigOf(server: string, ca: Buffer, name: string, user: Readonly<Record<string, string>>): object {
  return {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'labeller-test', cluster: { server, 'certificate-authority-data': ca.toString('base64') } }],
    users: [{ name, user }],
    contexts: [{ name: 'labeller-test', context: { cluster: 'labeller-test', user: name } }],
    'current-context': 'labeller-test',
  };
}
