// What the *-realshapes.test.ts files share: they run against a full control plane (test/run.ts),
// where Deployments, Jobs and CronJobs make their ReplicaSets, Jobs and Pods, pods are scheduled
// onto kwok's nodes and become Running and Ready, the garbage collector and the namespace
// controller delete what they should. Namespaces ready for pods, workloads, their pods with their
// controllers, and waiting for what the cluster does in its own time.
import { ApiError } from '../../src/apimachinery/errors.ts';
import { adminClient, createNamespace, eventually, kubeconfig } from './cluster.ts';
import { tool } from './helm.ts';

/** The metadata the tests read of any object. */
export interface Meta {
  readonly name: string;
  readonly namespace?: string;
  readonly uid: string;
  readonly labels?: Record<string, string>;
  readonly deletionTimestamp?: string;
  readonly ownerReferences?: readonly { kind: string; name: string; uid: string; controller?: boolean }[];
}

export interface Pod {
  readonly metadata: Meta;
  readonly spec: { readonly nodeName?: string };
  readonly status: { readonly phase?: string; readonly conditions?: readonly { type: string; status: string }[] };
}

/**
 * A namespace for workloads. Pods need its `default` ServiceAccount (the ServiceAccount
 * admission gives it to them), which the controller manager makes soon after the namespace:
 * waited for, so that a pod created right away is not refused.
 */
export async function workloadNamespace(prefix: string): Promise<string> {
  const ns = await createNamespace(prefix);
  await eventually(
    async () => Boolean(await (await adminClient()).json('GET', `/api/v1/namespaces/${ns}/serviceaccounts/default`)),
    `the default ServiceAccount of ${ns}`,
  );
  return ns;
}

/** A container kwok pretends to run: nothing pulls the image. */
const container = (name: string) => ({ name, image: 'registry.k8s.io/pause:3.10' });

/** A Deployment of `replicas` pods labelled `app: <name>` plus `labels` (on the Deployment and its pods). */
export function deployment(name: string, replicas: number, labels: Record<string, string> = {}): object {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, labels: { app: name, ...labels } },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name, ...labels } }, spec: { containers: [container(name)] } },
    },
  };
}

/** A pod labelled `labels`; `extra` adds metadata (annotations, ownerReferences) and spec fields (nodeName). */
export function pod(
  name: string,
  labels: Record<string, string>,
  extra: { metadata?: object; spec?: object } = {},
): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels, ...extra.metadata },
    spec: { containers: [container(name)], ...extra.spec },
  };
}

/** A CronJob that runs every minute, its pods labelled `labels`. */
export function cronJob(name: string, labels: Record<string, string>): object {
  return {
    apiVersion: 'batch/v1',
    kind: 'CronJob',
    metadata: { name, labels },
    spec: {
      schedule: '* * * * *',
      successfulJobsHistoryLimit: 1,
      jobTemplate: {
        metadata: { labels },
        spec: {
          template: { metadata: { labels }, spec: { restartPolicy: 'Never', containers: [container(name)] } },
        },
      },
    },
  };
}

/** The objects of a collection, with `selector`. */
export async function list<T extends { metadata: Meta }>(path: string, selector?: string): Promise<T[]> {
  const query = selector === undefined ? {} : { query: { labelSelector: selector } };
  return (await (await adminClient()).json<{ items: T[] }>('GET', path, query)).items;
}

/** The pods of `ns` with `selector`. */
export function pods(ns: string, selector?: string): Promise<Pod[]> {
  return list<Pod>(`/api/v1/namespaces/${ns}/pods`, selector);
}

/** The name of an object's controller (ownerReference with controller: true), if any. */
export function controllerOf(object: { metadata: Meta }): string | undefined {
  return object.metadata.ownerReferences?.find((r) => r.controller)?.name;
}

export const isReady = (p: Pod): boolean =>
  p.status.phase === 'Running' && Boolean(p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));

/** `kubectl` against the shared cluster (as admin); throws with its output if it fails. */
export async function kubectl(args: readonly string[]): Promise<string> {
  const run = await tool('kubectl', ['--kubeconfig', kubeconfig(), ...args]);
  if (run.code !== 0) throw new Error(`kubectl ${args.join(' ')} failed (${run.code}): ${run.stderr}`);
  return run.stdout;
}

/** Waits (kubectl rollout status) until a Deployment's pods are all of its current template, available, and the old ones gone. */
export async function rolledOut(ns: string, name: string): Promise<void> {
  await kubectl(['rollout', 'status', '-n', ns, `deployment/${name}`, '--timeout=180s']);
}

/** Resolves once GET `path` answers 404. */
export async function gone(path: string, what: string, timeoutMs = 120_000): Promise<void> {
  const admin = await adminClient();
  await eventually(
    async () => {
      try {
        await admin.json('GET', path);
        return false;
      } catch (error) {
        if (error instanceof ApiError && error.status === 404) return true;
        throw error;
      }
    },
    what,
    timeoutMs,
    250,
  );
}
