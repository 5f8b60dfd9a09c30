// Running a command as in a pod, with a service-account folder at the kubelet's mount point.
import { SERVICE_ACCOUNT_DIR } from '../../src/kube/auth/incluster.ts';

/**
 * A command prefix that runs a command as in a pod with its service account mounted: the
 * folder `serviceAccountDir` (token, ca.crt, namespace) appears at the kubelet's mount point for
 * that process only (a private mount namespace with a tmpfs over /var/run; as root, or as root of
 * a user namespace otherwise). Add KUBERNETES_SERVICE_HOST/PORT to its environment.
 */
export function inClusterWrapper(serviceAccountDir: string): string[] {
  return [
    'unshare',
    '--mount',
    '--propagation',
    'private',
    ...(process.getuid?.() === 0 ? [] : ['--map-root-user']),
    'sh',
    '-c',
    `mount -t tmpfs tmpfs /var/run && mkdir -p ${SERVICE_ACCOUNT_DIR} && mount --bind "$0" ${SERVICE_ACCOUNT_DIR} && exec "$@"`,
    serviceAccountDir,
  ];
}
