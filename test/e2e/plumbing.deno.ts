// The Deno smoke: `deno run -A test/e2e/plumbing.deno.ts KUBECONFIG NAMESPACE`.
import { KubeClient } from '../../src/kube/client.ts';
import { plumbing } from './plumbing.ts';

declare const Deno: { version: { deno: string } } | undefined;

const [kubeconfig, namespace] = process.argv.slice(2);
if (!kubeconfig || !namespace) throw new Error('usage: plumbing.deno.ts KUBECONFIG NAMESPACE');
const client = await KubeClient.load({ kubeconfig, userAgent: 'labeller-e2e-deno' });
try {
  const version = await plumbing(client, namespace);
  console.log(
    `plumbing ok: kube-apiserver ${version} on Deno ${typeof Deno === 'undefined' ? 'missing' : Deno.version.deno}`,
  );
} finally {
  await client.close();
}
