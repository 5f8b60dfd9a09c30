// `npm run demo`: labeller without a cluster of your own. Starts the local control plane,
// creates a few deployments, services and config maps, runs `labeller --config kinds.yaml
// --once`, and prints every object's labels before and after.
import { type ControlPlane, ControlPlaneUnavailable, startControlPlane } from './controlplane/controlplane.ts';
import { describeExit } from './process/child.ts';
import { Cluster } from './cluster/cluster.ts';
import { runLabeller } from './process/labeller.ts';

const cp: ControlPlane = await startControlPlane().catch((error: unknown) => {
  // No Go and no binaries (or a bad KUBEBUILDER_ASSETS): say what to do, not where it failed.
  if (!(error instanceof ControlPlaneUnavailable)) throw error;
  process.stderr.write(`demo: cannot start the local control plane: ${error.message}\n`);
  process.exit(2);
});
const stop = () => void cp.stop().then(() => process.exit(130));
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
const cluster = await Cluster.connect(cp.kubeconfig).catch(async (error: unknown) => {
  await cp.stop();
  throw error;
});
try {
  for (const app of ['web', 'api', 'worker']) {
    await cluster.post('/apis/apps/v1/namespaces/default/deployments', {
      metadata: { name: app, labels: { app } },
      spec: {
        selector: { matchLabels: { app } },
        template: { metadata: { labels: { app } }, spec: { containers: [{ name: app, image: `example/${app}` }] } },
      },
    });
    if (app !== 'worker') {
      await cluster.post('/api/v1/namespaces/default/services', {
        metadata: { name: app, labels: { app } },
        spec: { ports: [{ port: 80 }] },
      });
    }
  }
  await cluster.post('/api/v1/namespaces/default/configmaps', {
    metadata: { name: 'settings' },
    data: { mode: 'demo' },
  });

  const paths = [
    '/apis/apps/v1/namespaces/default/deployments',
    '/api/v1/namespaces/default/services',
    '/api/v1/namespaces/default/configmaps',
  ];
  const snapshot = async (): Promise<Map<string, string>> => {
    const labels = new Map<string, string>();
    for (const path of paths) {
      const list = await cluster.get<
        { items: { kind?: string; metadata: { name: string; labels?: Record<string, string> } }[] }
      >(path);
      const kind = path.split('/').at(-1) ?? '';
      for (const item of list.items) {
        labels.set(
          `${kind}/${item.metadata.name}`,
          Object.entries(item.metadata.labels ?? {}).map(([k, v]) => `${k}=${v}`).join(', ') || '(none)',
        );
      }
    }
    return labels;
  };

  const before = await snapshot();
  console.log(`kube-apiserver at ${cp.server}; running: labeller --config kinds.yaml --once\n`);
  const run = await runLabeller(
    ['--kubeconfig', cp.kubeconfig, '--config', 'kinds.yaml', '--once', '--log-level', 'warn'],
    { raw: true },
  );
  process.stderr.write(run.stderr);
  if (run.code !== 0) throw new Error(`labeller exited with ${describeExit(run)}`);
  const summary = run.stdout;
  const after = await snapshot();

  const width = Math.max(...[...before.keys()].map((k) => k.length));
  for (const [object, labels] of before) {
    console.log(`${object.padEnd(width)}  before: ${labels}\n${' '.repeat(width)}  after:  ${after.get(object)}\n`);
  }
  console.log(summary.trim());
} finally {
  await cluster.close();
  await cp.stop();
}
