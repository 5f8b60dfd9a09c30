// A real etcd + kube-apiserver on loopback for the e2e tests, in the spirit of
// controller-runtime's envtest: RBAC on, an admin identity, service-account token signing.
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, fetch } from 'undici';
import { sleep } from '../harness/sleep.ts';

const here = dirname(fileURLToPath(import.meta.url));

export interface ControlPlane {
  readonly kubeconfig: string;
  readonly server: string;
  /** etcd's client URL, for tests that compact or inspect storage. */
  readonly etcd: string;
  readonly dir: string;
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
 * the test control plane does not run. Returns PEM texts.
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

export class ControlPlaneUnavailable extends Error {
  override readonly name = 'ControlPlaneUnavailable';
}

/** Folder with kube-apiserver and etcd: KUBEBUILDER_ASSETS, else built (or taken from the cache) by build.sh. */
export function binaries(): string {
  const assets = process.env['KUBEBUILDER_ASSETS'];
  if (assets) {
    for (const bin of ['kube-apiserver', 'etcd']) {
      if (!existsSync(join(assets, bin))) {
        throw new ControlPlaneUnavailable(
          `KUBEBUILDER_ASSETS=${assets} has no ${bin}; point it at a folder with kube-apiserver and etcd, or unset it to build them`,
        );
      }
    }
    return assets;
  }
  const build = spawnSync('bash', [join(here, 'build.sh')], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  if (build.error) throw new ControlPlaneUnavailable(`cannot run test/controlplane/build.sh: ${build.error.message}`);
  if (build.status !== 0) {
    throw new ControlPlaneUnavailable(
      build.status === 3
        ? 'no Go toolchain to build kube-apiserver and etcd; install Go, or set KUBEBUILDER_ASSETS to a folder with both binaries'
        : `test/controlplane/build.sh failed with status ${build.status} (its output is above)`,
    );
  }
  return build.stdout.trim().split('\n').at(-1) ?? '';
}

/** Starts etcd and kube-apiserver; aborting `signal` stops whatever already started and rejects. */
export async function startControlPlane(signal?: AbortSignal): Promise<ControlPlane> {
  const bin = binaries();
  const dir = mkdtempSync(join(tmpdir(), 'labeller-controlplane-'));
  const processes: ChildProcess[] = [];
  let apiserver: ChildProcess | undefined;
  const stopProcess = async (p: ChildProcess): Promise<void> => {
    if (p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => p.once('exit', () => resolve()));
    p.kill('SIGTERM');
    const timer = setTimeout(() => p.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
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
      '--disable-admission-plugins=ServiceAccount',
      '--allow-privileged=true',
      `--audit-policy-file=${join(dir, 'audit-policy.yaml')}`,
      `--audit-log-path=${auditLog}`,
      '--audit-log-format=json',
      '--audit-log-mode=blocking',
      // Never rotate (0 means lumberjack's 100 MB): readers follow one file, and a 50k-object
      // bench writes several hundred MB.
      '--audit-log-maxsize=1000000',
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
    const ca = readFileSync(join(dir, 'certs', 'apiserver.crt')).toString('base64');
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'labeller-test', cluster: { server, 'certificate-authority-data': ca } }],
        users: [{ name: 'admin', user: { token } }],
        contexts: [{ name: 'labeller-test', context: { cluster: 'labeller-test', user: 'admin' } }],
        'current-context': 'labeller-test',
      }),
    );

    return {
      kubeconfig,
      server,
      etcd,
      dir,
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

function launch(dir: string, name: string, path: string, args: string[]): ChildProcess {
  const log = createWriteStream(join(dir, `${name}.log`), { flags: 'a' });
  const child = spawn(path, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  return child;
}

/** `n` TCP ports free on loopback right now. */
export async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from({ length: n }, () =>
      new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
        const s = createServer();
        s.once('error', reject);
        s.listen(0, '127.0.0.1', () => resolve(s));
      })),
  );
  const ports = servers.map((s) => {
    const address = s.address();
    if (address === null || typeof address === 'string') throw new Error('no port assigned');
    return address.port;
  });
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  return ports;
}

type FetchInit = Omit<NonNullable<Parameters<typeof fetch>[1]>, 'signal'> & {
  readonly signal?: AbortSignal | undefined;
};

async function waitFor(
  url: string,
  { signal, ...init }: FetchInit,
  process: () => ChildProcess | undefined,
  log: string,
): Promise<void> {
  const deadline = Date.now() + 120_000;
  let last = '';
  while (Date.now() < deadline) {
    signal?.throwIfAborted();
    const p = process();
    if (p && p.exitCode !== null) {
      throw new ControlPlaneUnavailable(
        `${url} never came up: the process exited with status ${p.exitCode}\n${tail(log)}`,
      );
    }
    try {
      const res = await fetch(url, { ...init, signal: AbortSignal.timeout(5_000) });
      if (res.ok) return;
      last = `HTTP ${res.status}: ${(await res.text()).slice(0, 500)}`;
    } catch (error) {
      last = error instanceof Error ? error.message : String(error);
    }
    await sleep(250);
  }
  throw new ControlPlaneUnavailable(`${url} not ready after 120 s (last: ${last})\n${tail(log)}`);
}

function tail(path: string): string {
  try {
    return readFileSync(path, 'utf8').split('\n').slice(-30).join('\n');
  } catch {
    return '';
  }
}
