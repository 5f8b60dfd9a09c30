// `npm run controlplane [-- --full]`: starts the test control plane (with --full, the controllers,
// the scheduler and kwok's nodes too) and keeps it up until Ctrl-C, for trying labeller by hand:
// KUBECONFIG=<printed path> npx labeller --kinds deploy
import { startControlPlane } from './controlplane.ts';

const cp = await startControlPlane(undefined, { full: process.argv.includes('--full') });
console.log(
  `kube-apiserver at ${cp.server}${
    cp.full ? ' (full: controllers, scheduler, kwok nodes)' : ''
  }\nexport KUBECONFIG=${cp.kubeconfig}\n(Ctrl-C stops it and removes ${cp.dir})`,
);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => void cp.stop().then(() => process.exit(0)));
}
setInterval(() => {}, 1 << 30);
