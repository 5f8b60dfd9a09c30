// In-cluster configuration, as client-go's rest.InClusterConfig reads it: the API server from
// KUBERNETES_SERVICE_HOST/PORT, the service account's projected token (re-read, since the
// kubelet rotates it), its CA and the pod's namespace. No client-node: a pod pays nothing for
// the kubeconfig library it never uses.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { tokenFile } from './credentialfiles.ts';
import type { Identity } from './types.ts';
import { KubeConfigError } from '../../apimachinery/errors.ts';

/** Where the kubelet mounts a pod's service-account credentials. */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface InCluster {
  readonly server: string;
  readonly namespace: string | undefined;
  readonly identity: Identity;
}

/** True when this process runs in a pod with a service-account token at `dir`. */
export function inClusterAvailable(env: NodeJS.ProcessEnv, dir: string): boolean {
  return Boolean(env['KUBERNETES_SERVICE_HOST'] && env['KUBERNETES_SERVICE_PORT']) && existsSync(join(dir, 'token'));
}

/** The in-cluster server and identity; `dir` is the service-account folder (tests point it elsewhere). */
export function inCluster(env: NodeJS.ProcessEnv, dir: string, now?: () => number): InCluster {
  const host = env['KUBERNETES_SERVICE_HOST'] ?? '';
  const port = env['KUBERNETES_SERVICE_PORT'] ?? '';
  const read = (name: string): string => {
    try {
      return readFileSync(join(dir, name), 'utf8');
    } catch (error) {
      throw new KubeConfigError(
        `in-cluster config: cannot read ${join(dir, name)} (${
          (error as NodeJS.ErrnoException).code ?? String(error)
        }); mount the service account token (automountServiceAccountToken or a projected volume) or pass --kubeconfig`,
      );
    }
  };
  const namespace = existsSync(join(dir, 'namespace')) ? read('namespace').trim() || undefined : undefined;
  return {
    server: `https://${host.includes(':') ? `[${host}]` : host}:${port}`,
    namespace,
    identity: { ca: read('ca.crt'), token: tokenFile(join(dir, 'token'), now) },
  };
}
