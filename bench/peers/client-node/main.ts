// A ConfigMap labeller on @kubernetes/client-node 2.x as a TypeScript user would write it, for
// bench/run.ts --peers (bench/README.md, "Peers"): the client's informer (makeInformer: a list,
// then a watch, full objects cached), a queue that holds each key once, a pool of workers, and a
// forced server-side apply of one label (KubernetesObjectApi.patch with
// PatchStrategy.ServerSideApply) under its own field manager wherever the cached object lacks it.
// Logs one line once its cache is synced, nothing per object.
//
//   KUBECONFIG=… node main.js --namespace NS|--all-namespaces --label K=V --field-manager NAME --concurrency N
import {
  CoreV1Api,
  KubeConfig,
  KubernetesObjectApi,
  makeInformer,
  PatchStrategy,
  type V1ConfigMap,
} from '@kubernetes/client-node';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    namespace: { type: 'string' },
    'all-namespaces': { type: 'boolean', default: false },
    label: { type: 'string' },
    'field-manager': { type: 'string' },
    concurrency: { type: 'string' },
  },
});
function usage(message: string): never {
  console.error(
    `${message}\nusage: main.js --namespace NS|--all-namespaces --label K=V --field-manager NAME --concurrency N`,
  );
  process.exit(2);
}
const namespace = values.namespace;
if ((namespace === undefined) === !values['all-namespaces']) usage('give one of --namespace NS and --all-namespaces');
const [key, value] = values.label?.split('=') ?? [];
if (!key || value === undefined) usage(`--label ${values.label}: expected K=V`);
const fieldManager = values['field-manager'] ?? usage('--field-manager is required');
const concurrency = Number(values.concurrency);
if (!Number.isInteger(concurrency) || concurrency < 1) {
  usage(`--concurrency ${values.concurrency}: expected a whole number ≥ 1`);
}
const label = { key, value };

const kc = new KubeConfig();
kc.loadFromDefault();
const core = kc.makeApiClient(CoreV1Api);
const objects = KubernetesObjectApi.makeApiClient(kc);
const informer = makeInformer<V1ConfigMap>(
  kc,
  namespace === undefined ? '/api/v1/configmaps' : `/api/v1/namespaces/${namespace}/configmaps`,
  () => namespace === undefined ? core.listConfigMapForAllNamespaces() : core.listNamespacedConfigMap({ namespace }),
);

// Keys to reconcile, in arrival order, each at most once; idle workers wait for the next.
const queue = new Set<string>();
const idle: (() => void)[] = [];
const enqueue = (object: V1ConfigMap): void => {
  queue.add(`${object.metadata?.namespace ?? ''}/${object.metadata?.name ?? ''}`);
  idle.shift()?.();
};

async function reconcile(queued: string): Promise<void> {
  const [ns = '', name = ''] = queued.split('/');
  const object = informer.get(name, ns);
  if (object === undefined || object.metadata?.labels?.[label.key] === label.value) return;
  await objects.patch(
    { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: ns, labels: { [label.key]: label.value } } },
    undefined,
    undefined,
    fieldManager,
    true,
    PatchStrategy.ServerSideApply,
  );
}

async function worker(): Promise<void> {
  for (;;) {
    const [next] = queue;
    if (next === undefined) {
      await new Promise<void>((resolve) => idle.push(resolve));
      continue;
    }
    queue.delete(next);
    try {
      await reconcile(next);
    } catch (error) {
      console.error(`apply ${next} failed: ${String(error)}`);
      setTimeout(() => {
        const [ns, name] = next.split('/');
        const object = informer.get(name ?? '', ns);
        if (object) enqueue(object);
      }, 5000);
    }
  }
}

informer.on('add', enqueue);
informer.on('update', enqueue);
// The informer stops on an error; start it again, as the client's examples do.
informer.on('error', (error: unknown) => {
  console.error(`watch failed: ${String(error)}`);
  setTimeout(() => void informer.start(), 5000);
});
process.on('SIGTERM', () => {
  void informer.stop();
  process.exit(0);
});
for (let i = 0; i < concurrency; i++) void worker();
await informer.start();
console.error(`synced: ${informer.list().length} objects cached`);
