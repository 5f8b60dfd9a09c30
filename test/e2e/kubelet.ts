// A stand-in for the kubelet, for the Pods `helm test` creates: the test control plane has no
// scheduler and no node, so nothing would ever run them and `helm test` would wait until its
// timeout. This runs each Pod it is given as a local process, as a kubelet runs its one container,
// then writes the Pod's phase (Succeeded or Failed, with the exit code) through its status, which
// is what Helm waits for:
//  - the command: the image's entry point (`node … /app/dist/cli.js`) is labeller from the sources
//    (bin/labeller.js, as test/process/labeller.ts runs it), `/usr/local/bin/node` this Node;
//  - the ServiceAccount token, when the Pod mounts one: a TokenRequest bound to the Pod, with the
//    cluster's CA and the namespace, at the kubelet's mount point (a private mount namespace:
//    test/cluster/incluster.ts), and KUBERNETES_SERVICE_HOST/PORT: labeller's in-cluster config;
//  - env: values and the downward API's metadata fields;
//  - volumes (ConfigMaps, Secrets, their projections, emptyDirs): written to a folder each, from
//    the API server, and the container's arguments rewritten from the mount path to that folder
//    (a real mount would need the mount point on this host);
//  - Service names (`<name>.<namespace>.svc`) resolve to 127.0.0.1 through a hosts file mounted over
//    /etc/hosts: where the test runs the release's labeller, on the Service's own port.
// Not like a kubelet: no image, no container runtime, no security context (the process runs as
// this user, on this root filesystem), no resource limits, no probes, no logs API.
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiError } from '../../src/apimachinery/errors.ts';
import type { KubeClient } from '../../src/kube/client.ts';
import { type Exit, start } from '../process/child.ts';
import { executable } from '../process/runtime.ts';
import { podWrapper } from '../cluster/incluster.ts';
import { adminClient, kubeconfig } from './cluster.ts';
import { ROOT } from './helm.ts';

/** The image's entry point (image/build.sh, the Dockerfile). */
const IMAGE_NODE = '/usr/local/bin/node';
const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

interface KeyToPath {
  readonly key: string;
  readonly path: string;
}
interface Volume {
  readonly name: string;
  readonly configMap?: { name: string; items?: KeyToPath[]; optional?: boolean };
  readonly secret?: { secretName: string; items?: KeyToPath[]; optional?: boolean };
  readonly projected?: {
    sources: {
      configMap?: { name: string; items?: KeyToPath[]; optional?: boolean };
      secret?: { name: string; items?: KeyToPath[]; optional?: boolean };
    }[];
  };
  readonly emptyDir?: object;
}
interface EnvVar {
  readonly name: string;
  readonly value?: string;
  readonly valueFrom?: { fieldRef?: { fieldPath: string } };
}
interface ContainerSpec {
  readonly name: string;
  readonly image: string;
  readonly command?: string[];
  readonly args?: string[];
  readonly env?: EnvVar[];
  readonly volumeMounts?: { name: string; mountPath: string }[];
}
export interface Pod {
  readonly metadata: {
    readonly name: string;
    readonly namespace: string;
    readonly uid: string;
    readonly labels?: Record<string, string>;
    readonly annotations?: Record<string, string>;
  };
  readonly spec: {
    readonly serviceAccountName?: string;
    readonly automountServiceAccountToken?: boolean;
    readonly initContainers?: ContainerSpec[];
    readonly containers: ContainerSpec[];
    readonly volumes?: Volume[];
  };
  readonly status?: { readonly phase?: string };
}

/** One Pod run: its container's command line as run here, and how it ended. */
export interface PodRun {
  readonly pod: string;
  readonly container: string;
  /** The ServiceAccount whose token it had, if any. */
  readonly serviceAccount: string | undefined;
  readonly command: readonly string[];
  readonly exit: Exit;
}

/** Runs the Pods of `namespace` that `select` picks, once each, until stopped. */
export class Kubelet {
  readonly runs: PodRun[] = [];
  /** Pods it could not run (what the chart renders, it can): each one's error. */
  readonly errors: string[] = [];
  readonly #seen = new Set<string>();
  readonly #dir = mkdtempSync(join(tmpdir(), 'labeller-kubelet-'));
  #stopped = false;
  readonly #loop: Promise<void>;
  #running: Promise<void> = Promise.resolve();

  readonly namespace: string;
  readonly select: (pod: Pod) => boolean;

  constructor(namespace: string, select: (pod: Pod) => boolean) {
    this.namespace = namespace;
    this.select = select;
    this.#loop = this.#watch();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#loop;
    await this.#running;
    rmSync(this.#dir, { recursive: true, force: true });
  }

  async #watch(): Promise<void> {
    const client = await adminClient();
    while (!this.#stopped) {
      const { items } = await client.json<{ items: Pod[] }>('GET', `/api/v1/namespaces/${this.namespace}/pods`);
      for (const pod of items) {
        if (this.#seen.has(pod.metadata.uid) || !this.select(pod) || (pod.status?.phase ?? 'Pending') !== 'Pending') {
          continue;
        }
        this.#seen.add(pod.metadata.uid);
        // One at a time, as helm test creates them.
        this.#running = this.#running.then(() =>
          this.#run(client, pod).catch((error: unknown) => {
            this.errors.push(`pod ${pod.metadata.name}: ${error instanceof Error ? error.message : String(error)}`);
          })
        );
      }
      await sleep(200);
    }
  }

  async #run(client: KubeClient, pod: Pod): Promise<void> {
    const [container, ...more] = pod.spec.containers;
    if (!container || more.length > 0 || pod.spec.initContainers?.length) {
      throw new Error('the stand-in kubelet runs one container, and no init container');
    }
    const where = mkdtempSync(join(this.#dir, `${pod.metadata.name}-`));
    const account = pod.spec.serviceAccountName ?? 'default';
    const mountsToken = pod.spec.automountServiceAccountToken ?? true;
    const serviceAccountDir = mountsToken ? await this.#serviceAccount(client, pod, account, where) : undefined;
    // Each volume mount: a folder of its own, which the arguments name instead of the mount path.
    const paths = new Map<string, string>();
    for (const mount of container.volumeMounts ?? []) {
      if (mount.mountPath === SERVICE_ACCOUNT_DIR) continue;
      const volume = pod.spec.volumes?.find((v) => v.name === mount.name);
      if (!volume) throw new Error(`no volume ${mount.name}`);
      paths.set(mount.mountPath, await this.#volume(client, pod.metadata.namespace, volume, join(where, volume.name)));
    }
    const local = (arg: string): string => {
      for (const [mountPath, dir] of paths) {
        if (arg === mountPath) return dir;
        arg = arg.replaceAll(`${mountPath}/`, `${dir}/`);
      }
      return arg;
    };
    const image = [...(container.command ?? []), ...(container.args ?? [])].map(local);
    const command = container.command === undefined
      ? [executable('node'), join(ROOT, 'bin', 'labeller.js'), ...image]
      : container.command[0] === IMAGE_NODE
      ? [executable('node'), ...image.slice(1)]
      : undefined;
    if (!command) throw new Error(`cannot run ${container.command?.join(' ')} here`);

    const server = new URL(
      (JSON.parse(readFileSync(kubeconfig(), 'utf8')) as { clusters: { cluster: { server: string } }[] }).clusters[0]!
        .cluster.server,
    );
    const env: Record<string, string> = {
      KUBERNETES_SERVICE_HOST: server.hostname.replace(/^\[|\]$/g, ''),
      KUBERNETES_SERVICE_PORT: server.port || '443',
      KUBECONFIG: '',
      HOME: mkdtempSync(join(where, 'home-')),
    };
    const fields: Record<string, string> = {
      'metadata.name': pod.metadata.name,
      'metadata.namespace': pod.metadata.namespace,
      'metadata.uid': pod.metadata.uid,
      'spec.serviceAccountName': account,
    };
    for (const variable of container.env ?? []) {
      const path = variable.valueFrom?.fieldRef?.fieldPath;
      if (variable.valueFrom && (path === undefined || fields[path] === undefined)) {
        throw new Error(`env ${variable.name}: only values and metadata fields here`);
      }
      env[variable.name] = local(path === undefined ? variable.value ?? '' : fields[path]!);
    }
    const hosts = join(where, 'hosts');
    writeFileSync(hosts, `${readFileSync('/etc/hosts', 'utf8')}\n${await this.#serviceNames(client)}`);

    const [bin, ...args] = [...podWrapper({ serviceAccountDir, hosts }), ...command];
    const startedAt = new Date().toISOString();
    const exit = await start(bin!, args, { env, cwd: where }).exited;
    this.runs.push({
      pod: pod.metadata.name,
      container: container.name,
      serviceAccount: mountsToken ? account : undefined,
      command,
      exit,
    });
    const code = exit.code ?? 128;
    const terminated = {
      exitCode: code,
      reason: code === 0 ? 'Completed' : 'Error',
      startedAt,
      finishedAt: new Date().toISOString(),
    };
    await client.json('PATCH', `/api/v1/namespaces/${pod.metadata.namespace}/pods/${pod.metadata.name}/status`, {
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({
        status: {
          phase: code === 0 ? 'Succeeded' : 'Failed',
          startTime: startedAt,
          containerStatuses: [{
            name: container.name,
            image: container.image,
            imageID: '',
            ready: false,
            restartCount: 0,
            started: false,
            state: { terminated },
          }],
        },
      }),
    }).catch((error: unknown) => {
      // Deleted meanwhile: nothing waits for it.
      if (!(error instanceof ApiError && error.status === 404)) throw error;
    });
  }

  /** The folder a kubelet mounts for the Pod's ServiceAccount: a token bound to the Pod, the cluster's CA, the namespace. */
  async #serviceAccount(client: KubeClient, pod: Pod, account: string, where: string): Promise<string> {
    const { status } = await client.json<{ status: { token: string } }>(
      'POST',
      `/api/v1/namespaces/${pod.metadata.namespace}/serviceaccounts/${account}/token`,
      {
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenRequest',
          spec: {
            expirationSeconds: 3600,
            boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.metadata.name, uid: pod.metadata.uid },
          },
        }),
      },
    );
    const config = JSON.parse(readFileSync(kubeconfig(), 'utf8')) as {
      clusters: { cluster: { 'certificate-authority-data': string } }[];
    };
    const dir = join(where, 'serviceaccount');
    mkdirSync(dir);
    writeFileSync(join(dir, 'token'), status.token);
    writeFileSync(
      join(dir, 'ca.crt'),
      Buffer.from(config.clusters[0]!.cluster['certificate-authority-data'], 'base64'),
    );
    writeFileSync(join(dir, 'namespace'), pod.metadata.namespace);
    return dir;
  }

  /** A volume's files in `dir`, read from the API server as a kubelet reads them. */
  async #volume(client: KubeClient, namespace: string, volume: Volume, dir: string): Promise<string> {
    mkdirSync(dir, { recursive: true });
    const write = async (
      kind: 'configmaps' | 'secrets',
      name: string,
      items: readonly KeyToPath[] | undefined,
      optional: boolean | undefined,
    ): Promise<void> => {
      let stored: Record<string, string> = {};
      try {
        stored = (await client.json<{ data?: Record<string, string> }>(
          'GET',
          `/api/v1/namespaces/${namespace}/${kind}/${name}`,
        )).data ?? {};
      } catch (error) {
        if (!optional) throw error;
      }
      const decode = (value: string) => (kind === 'secrets' ? Buffer.from(value, 'base64').toString() : value);
      for (const { key, path } of items ?? Object.keys(stored).map((key) => ({ key, path: key }))) {
        const value = stored[key];
        if (value === undefined) continue;
        mkdirSync(dirname(join(dir, path)), { recursive: true });
        writeFileSync(join(dir, path), decode(value));
      }
    };
    if (volume.configMap) {
      await write('configmaps', volume.configMap.name, volume.configMap.items, volume.configMap.optional);
    } else if (volume.secret) {
      await write('secrets', volume.secret.secretName, volume.secret.items, volume.secret.optional);
    } else if (volume.projected) {
      for (const source of volume.projected.sources) {
        if (source.configMap) {
          await write('configmaps', source.configMap.name, source.configMap.items, source.configMap.optional);
        } else if (source.secret) {
          await write('secrets', source.secret.name, source.secret.items, source.secret.optional);
        } else throw new Error(`volume ${volume.name}: only ConfigMaps and Secrets are projected here`);
      }
    } else if (!volume.emptyDir) {
      throw new Error(`volume ${volume.name}: only ConfigMaps, Secrets, their projections and emptyDirs here`);
    }
    return dir;
  }

  /** Hosts-file lines: the namespace's Services at 127.0.0.1, by the names a pod of the cluster resolves. */
  async #serviceNames(client: KubeClient): Promise<string> {
    const { items } = await client.json<{ items: { metadata: { name: string } }[] }>(
      'GET',
      `/api/v1/namespaces/${this.namespace}/services`,
    );
    return items.map(({ metadata: { name } }) => {
      const svc = `${name}.${this.namespace}.svc`;
      return `127.0.0.1 ${svc} ${svc}.cluster.local\n`;
    }).join('');
  }
}
