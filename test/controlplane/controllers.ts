// What turns the test control plane's API server into a cluster that behaves like a real one:
// kube-controller-manager (garbage collection, namespaces, Deployments, ReplicaSets, Jobs,
// CronJobs, ServiceAccount tokens, CSR signing…), kube-scheduler, and kwok, which plays the
// kubelet of a few simulated nodes: scheduled pods become Running and Ready, Job pods complete,
// deleted pods go away. Nothing runs a container.
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Agent, fetch, type Response } from 'undici';
import { ControlPlaneUnavailable, freePorts, launch, poll, tail, waitFor } from './process.ts';

/** kwok manages the nodes with this annotation (kwokctl's convention) and leaves any other alone. */
const KWOK_NODE = { key: 'kwok.x-k8s.io/node', value: 'fake' } as const;

export interface ControllersSetup {
  /** The folder with the binaries (build.sh --full). */
  readonly bin: string;
  /** The control plane's folder: logs, serving certificates. */
  readonly dir: string;
  readonly server: string;
  /** The API server's serving certificate file (what its clients trust). */
  readonly serverCA: string;
  /** The admin token, for creating the nodes and watching the cluster come up. */
  readonly adminToken: string;
  /** Each component's kubeconfig, with a client certificate for its own identity. */
  readonly kubeconfigs: { readonly controllerManager: string; readonly scheduler: string; readonly kwok: string };
  /** The key the API server signs service-account tokens with, for the token controller. */
  readonly serviceAccountKey: string;
  /** The client CA's files: the controller manager signs approved CSRs with them. */
  readonly clientCA: { readonly cert: string; readonly key: string };
  /** Names of the simulated nodes to create. */
  readonly nodes: readonly string[];
  readonly signal?: AbortSignal | undefined;
}

/**
 * Starts the controllers, the scheduler and kwok against a ready API server, pushing each process
 * onto `processes` (the control plane stops them), creates the nodes and resolves once all of
 * them are up: both components healthy, every node Ready, the `default` ServiceAccount made.
 */
export async function startControllers(setup: ControllersSetup, processes: ChildProcess[]): Promise<void> {
  const { bin, dir, signal } = setup;
  const [controllerManagerPort, schedulerPort] = await freePorts(2);
  const serving = (name: string, port: number | undefined) => [
    `--secure-port=${port}`,
    '--bind-address=127.0.0.1',
    `--cert-dir=${join(dir, `${name}-certs`)}`,
  ];
  const identity = (kubeconfig: string) => [
    `--kubeconfig=${kubeconfig}`,
    `--authentication-kubeconfig=${kubeconfig}`,
    `--authorization-kubeconfig=${kubeconfig}`,
  ];
  const controllerManager = launch(dir, 'kube-controller-manager', join(bin, 'kube-controller-manager'), [
    ...identity(setup.kubeconfigs.controllerManager),
    ...serving('kube-controller-manager', controllerManagerPort),
    // Every controller a real cluster runs by default: one test cluster for every test.
    '--controllers=*',
    // Each controller under its own ServiceAccount in kube-system, with its bootstrap role.
    '--use-service-account-credentials=true',
    `--service-account-private-key-file=${setup.serviceAccountKey}`,
    `--root-ca-file=${setup.serverCA}`,
    `--cluster-signing-cert-file=${setup.clientCA.cert}`,
    `--cluster-signing-key-file=${setup.clientCA.key}`,
    // 5× the default request rate, as clusters of many pods set: a rollout of a thousand pods is
    // bound by it (every pod is created and deleted through it).
    '--kube-api-qps=100',
    '--kube-api-burst=200',
    '--leader-elect=false',
    '--v=1',
  ]);
  processes.push(controllerManager);
  const scheduler = launch(dir, 'kube-scheduler', join(bin, 'kube-scheduler'), [
    ...identity(setup.kubeconfigs.scheduler),
    ...serving('kube-scheduler', schedulerPort),
    '--leader-elect=false',
    '--v=1',
  ]);
  processes.push(scheduler);
  const kwok = launch(dir, 'kwok', join(bin, 'kwok'), [
    `--kubeconfig=${setup.kubeconfigs.kwok}`,
    `--config=${join(bin, 'kwok-stages.yaml')}`,
    `--manage-nodes-with-annotation-selector=${KWOK_NODE.key}=${KWOK_NODE.value}`,
    // A kubelet's Lease, renewed every quarter of it: nodes stay Ready, their pods stay bound.
    '--node-lease-duration-seconds=40',
  ]);
  processes.push(kwok);

  const api = new Api(setup.server, readFileSync(setup.serverCA), setup.adminToken);
  try {
    for (const name of setup.nodes) await api.send('POST', '/api/v1/nodes', node(name));
    const local = new Agent({ connect: { rejectUnauthorized: false } });
    try {
      await Promise.all([
        waitFor(
          `https://127.0.0.1:${controllerManagerPort}/healthz`,
          { signal, dispatcher: local },
          () => controllerManager,
          join(dir, 'kube-controller-manager.log'),
        ),
        waitFor(
          `https://127.0.0.1:${schedulerPort}/healthz`,
          { signal, dispatcher: local },
          () => scheduler,
          join(dir, 'kube-scheduler.log'),
        ),
      ]);
    } finally {
      await local.close();
    }
    const notReady = new Set(setup.nodes);
    const up = await poll(async () => {
      if (kwok.exitCode !== null) {
        throw new ControlPlaneUnavailable(`kwok exited with status ${kwok.exitCode}\n${tail(join(dir, 'kwok.log'))}`);
      }
      for (const name of notReady) {
        const { status } = await api.get<{ status?: { conditions?: { type: string; status: string }[] } }>(
          `/api/v1/nodes/${name}`,
        );
        if (status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) notReady.delete(name);
      }
      return notReady.size === 0 && (await api.exists('/api/v1/namespaces/default/serviceaccounts/default'));
    }, signal);
    if (!up) {
      throw new ControlPlaneUnavailable(
        notReady.size
          ? `kwok did not make node(s) ${[...notReady].join(', ')} Ready in 120 s\n${tail(join(dir, 'kwok.log'))}`
          : `kube-controller-manager made no default ServiceAccount in 120 s\n${
            tail(join(dir, 'kube-controller-manager.log'))
          }`,
      );
    }
  } finally {
    await api.close();
  }
}

/** A node as a kubelet registers it, for kwok to manage: no taints, so any pod may land on it. */
function node(name: string): object {
  const resources = { cpu: '32', memory: '256Gi', pods: '110' };
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      annotations: { [KWOK_NODE.key]: KWOK_NODE.value, 'node.alpha.kubernetes.io/ttl': '0' },
      labels: {
        'kubernetes.io/hostname': name,
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        type: 'kwok',
      },
    },
    status: { capacity: resources, allocatable: resources },
  };
}

/** The few admin requests the start-up needs, without the project's client (src/ is not a test dependency here). */
class Api {
  readonly #server: string;
  readonly #token: string;
  readonly #agent: Agent;

  constructor(server: string, ca: Buffer, token: string) {
    this.#server = server;
    this.#token = token;
    this.#agent = new Agent({ connect: { ca } });
  }

  async send(method: string, path: string, body?: object): Promise<Response> {
    const res = await fetch(`${this.#server}${path}`, {
      method,
      dispatcher: this.#agent,
      headers: { authorization: `Bearer ${this.#token}`, 'content-type': 'application/json' },
      ...(body ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(10_000),
    });
    if (!res.ok && res.status !== 404) {
      throw new ControlPlaneUnavailable(`${method} ${path}: HTTP ${res.status} ${(await res.text()).slice(0, 500)}`);
    }
    return res;
  }

  async get<T>(path: string): Promise<T> {
    return (await (await this.send('GET', path)).json()) as T;
  }

  async exists(path: string): Promise<boolean> {
    const res = await this.send('GET', path);
    await res.body?.cancel();
    return res.ok;
  }

  close(): Promise<void> {
    return this.#agent.close();
  }
}
