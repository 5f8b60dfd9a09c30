// Running a command as in a pod, with a service-account folder at the kubelet's mount point.
import { SERVICE_ACCOUNT_DIR } from '../../src/kube/auth/incluster.ts';

/**
 * A command prefix that runs a command as in a pod with its service account mounted: the
 * folder `serviceAccountDir` (token, ca.crt, namespace) appears at the kubelet's mount point for
 * that process only (a private mount namespace with a tmpfs over /var/run; as root, or as root of
 * a user namespace otherwise). Add KUBERNETES_SERVICE_HOST/PORT to its environment.
 */
export function inClusterWrapper(serviceAccountDir: string): string[] {
  return podWrapper({ serviceAccountDir });
}

/**
 * The same for a pod of the chart's: the service-account folder only when the pod mounts a token
 * (else the tmpfs hides the host's /var/run, so no token leaks in), and `hosts` over /etc/hosts, so
 * that names such as a Service's resolve where the test says.
 */
export function podWrapper(options: { serviceAccountDir?: string | undefined; hosts?: string | undefined }): string[] {
  const steps = ['mount -t tmpfs tmpfs /var/run'];
  const args: string[] = [];
  if (options.serviceAccountDir !== undefined) {
    steps.push(`mkdir -p ${SERVICE_ACCOUNT_DIR}`, `mount --bind "$1" ${SERVICE_ACCOUNT_DIR}`, 'shift');
    args.push(options.serviceAccountDir);
  }
  if (options.hosts !== undefined) {
    steps.push('mount --bind "$1" /etc/hosts', 'shift');
    args.push(options.hosts);
  }
  return [
    'unshare',
    '--mount',
    '--propagation',
    'private',
    ...(process.getuid?.() === 0 ? [] : ['--map-root-user']),
    'sh',
    '-c',
    `${steps.join(' && ')} && exec "$@"`,
    'pod',
    ...args,
  ];
}
