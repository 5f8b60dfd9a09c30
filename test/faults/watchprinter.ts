// Runs labeller's own watcher (src/runtime/watcher.ts) over config maps of one namespace and prints
// every event as a JSON line, on Node or Deno, so a test can break the connection under it:
//   node --import tsx test/faults/watchprinter.ts KUBECONFIG NAMESPACE TIMEOUT_SECONDS IDLE_MS
//   deno run -A test/faults/watchprinter.ts …
// It stops when its standard input closes.
import { MetadataApi } from '../../src/kube/api.ts';
import { KubeClient } from '../../src/kube/client.ts';
import { CONFIGMAPS as configmaps } from '../cluster/resources.ts';
import { watcher } from '../../src/runtime/watcher.ts';

const [kubeconfig, namespace, timeout, idle] = process.argv.slice(2);
if (!kubeconfig || !namespace || !timeout || !idle) {
  throw new Error('usage: watchprinter.ts KUBECONFIG NAMESPACE TIMEOUT_SECONDS IDLE_MS');
}
const client = await KubeClient.load({ kubeconfig, userAgent: 'labeller-faults-watch' });
const abort = new AbortController();
process.stdin.on('data', () => {});
process.stdin.on('end', () => abort.abort());
process.stdin.on('close', () => abort.abort());
const print = (line: object): void => void process.stdout.write(`${JSON.stringify({ t: Date.now(), ...line })}\n`);
try {
  print({ type: 'started' });
  for await (
    const event of watcher(new MetadataApi(client, configmaps, namespace), {
      watchTimeoutSeconds: Number(timeout),
      idleMs: Number(idle),
      signal: abort.signal,
    })
  ) {
    if (event.type === 'error') {
      print({
        type: 'error',
        error: `${event.error.name}: ${event.error.message}`,
        retryInMs: Math.round(event.retryInMs),
      });
    } else if (event.type === 'apply' || event.type === 'delete' || event.type === 'initApply') {
      print({ type: event.type, name: event.object.metadata.name });
    } else print({ type: event.type });
  }
} finally {
  await client.close();
}
print({ type: 'stopped' });
process.exit(0);
