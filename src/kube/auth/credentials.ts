// Who labeller is to the API server, and how that changes while it runs. A CredentialSource
// gives the headers and connection settings for the next request; the client asks it before
// every request and again after a 401. Sources are picked as client-node and kubectl do:
// --kubeconfig, $KUBECONFIG, ~/.kube/config, then the pod's service account.
// Token files, certificate files and exec plugins are handled here, as client-go handles them;
// only auth providers and proxies load @kubernetes/client-node (clientnode.ts), on demand.
import { readFileSync } from 'node:fs';
import { type KeyPair, keyPair, keyPairFiles, tokenFile } from './credentialfiles.ts';
import { KubeConfigError } from '../../apimachinery/errors.ts';
import { type ExecCredential, execSource } from './exec.ts';
import { inCluster, inClusterAvailable, SERVICE_ACCOUNT_DIR } from './incluster.ts';
import { kubeconfigFiles, type KubeconfigSelection, loadKubeconfig } from './kubeconfig.ts';
import { Refreshing } from './refreshing.ts';
import { parseProxyUrl, proxyFor } from '../proxy.ts';
import { keepAliveTransport, type Transport } from '../transport.ts';
import type { Credential, CredentialSource, Identity } from './types.ts';

export interface Connection {
  readonly server: string;
  readonly context: string;
  /** The context's namespace, or the pod's own namespace in-cluster. */
  readonly namespace: string | undefined;
  readonly credentials: CredentialSource;
}

export interface ConnectOptions {
  readonly kubeconfig?: string | undefined;
  readonly context?: string | undefined;
  /** The service-account folder for in-cluster config (default: the kubelet's mount point); for tests. */
  readonly serviceAccountDir?: string | undefined;
  readonly env?: NodeJS.ProcessEnv | undefined;
}

/** Finds the cluster and identity to use. Configuration problems throw KubeConfigError. */
export async function connect(options: ConnectOptions = {}): Promise<Connection> {
  const env = options.env ?? process.env;
  const files = kubeconfigFiles(options.kubeconfig, env);
  if (!files) {
    const dir = options.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
    if (!inClusterAvailable(env, dir)) {
      // In a pod (the service variables are there) without a token: say so, not "no kubeconfig".
      if (env['KUBERNETES_SERVICE_HOST']) {
        throw new KubeConfigError(
          `running in a pod without a service-account token (${dir}/token is missing): set automountServiceAccountToken: true on the pod or its ServiceAccount, or mount a projected token there, or pass --kubeconfig`,
        );
      }
      throw new KubeConfigError(
        'no kubeconfig ($KUBECONFIG is unset and ~/.kube/config does not exist) and not inside a cluster (no KUBERNETES_SERVICE_HOST/PORT and service-account token). Pass --kubeconfig, or run where kubectl works',
      );
    }
    if (options.context) {
      throw new KubeConfigError(
        `--context ${options.context} needs a kubeconfig, and none was found (in-cluster config has no contexts). Pass --kubeconfig, or drop --context`,
      );
    }
    const pod = inCluster(env, dir);
    return {
      server: pod.server,
      context: 'in-cluster',
      namespace: pod.namespace,
      credentials: new CredentialsProvider(pod.identity, pod.server, proxyFor(new URL(pod.server), env)),
    };
  }
  const selection = loadKubeconfig(files, options.context);
  const server = selection.cluster.server.replace(/\/+$/, '');
  // A cluster's proxy-url wins over the environment, as in kubectl.
  const proxyUrl = selection.cluster['proxy-url'];
  const parsed = proxyUrl === undefined ? undefined : parseProxyUrl(proxyUrl);
  if (typeof parsed === 'string') {
    throw new KubeConfigError(`cluster of context "${selection.context}": ${parsed}`);
  }
  const proxy = parsed ?? proxyFor(new URL(server), env);
  if (selection.user['auth-provider']) {
    const { clientNodeCredentials } = await import('./clientnode.ts');
    return {
      server,
      context: selection.context,
      namespace: selection.namespace,
      credentials: await clientNodeCredentials(options.kubeconfig, selection.context, server, proxy),
    };
  }
  return {
    server,
    context: selection.context,
    namespace: selection.namespace,
    credentials: new CredentialsProvider(identity(selection, server), server, proxy),
  };
}

function identity(selection: KubeconfigSelection, server: string): Identity {
  const { cluster, user } = selection;
  const where = `kubeconfig user of context "${selection.context}"`;
  const decode = (
    base64: string | undefined,
  ): string | undefined => (base64 === undefined ? undefined : Buffer.from(base64, 'base64').toString('utf8'));
  const file = (path: string | undefined, what: string): string | undefined => {
    if (path === undefined) return undefined;
    try {
      return readFileSync(path, 'utf8');
    } catch (error) {
      throw new KubeConfigError(
        `${what} ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}. Fix the path in the kubeconfig`,
      );
    }
  };
  const certFile = user['client-certificate'];
  const keyFile = user['client-key'];
  const certData = decode(user['client-certificate-data']);
  const keyData = decode(user['client-key-data']);
  let pair: Identity['pair'];
  if (certFile !== undefined && keyFile !== undefined) pair = keyPairFiles(certFile, keyFile);
  else if ((certFile ?? certData) !== undefined && (keyFile ?? keyData) !== undefined) {
    pair = keyPair(
      certData ?? file(certFile, 'client certificate') ?? '',
      keyData ?? file(keyFile, 'client key') ?? '',
      where,
    );
  } else if ((certFile ?? certData ?? keyFile ?? keyData) !== undefined) {
    throw new KubeConfigError(
      `${where} has a client certificate without its key, or a key without its certificate. Give both`,
    );
  }
  const impersonation: Record<string, string> = {};
  if (user.as) impersonation['impersonate-user'] = user.as;
  // Impersonate-Group needs one header line per group (the API server does not split ", "); a
  // credential carries one value per header.
  if (user['as-groups']?.length) {
    throw new KubeConfigError(
      `${where} uses as-groups, which labeller does not support. Remove it or run labeller as that identity`,
    );
  }
  const caData = decode(cluster['certificate-authority-data']);
  return {
    ca: caData ?? file(cluster['certificate-authority'], 'certificate authority'),
    insecureSkipTLSVerify: cluster['insecure-skip-tls-verify'] === true,
    servername: cluster['tls-server-name'],
    // client-go: the last read of tokenFile takes precedence over token.
    token: user.tokenFile ? tokenFile(user.tokenFile) : user.token,
    basic: user.username !== undefined ? { username: user.username, password: user.password ?? '' } : undefined,
    pair,
    exec: user.exec
      ? execSource(user.exec, {
        server,
        ...(cluster['certificate-authority-data']
          ? { 'certificate-authority-data': cluster['certificate-authority-data'] }
          : {}),
        ...(cluster['insecure-skip-tls-verify'] ? { 'insecure-skip-tls-verify': true } : {}),
        ...(cluster['tls-server-name'] ? { 'tls-server-name': cluster['tls-server-name'] } : {}),
      })
      : undefined,
    headers: impersonation,
  };
}

/**
 * Credentials from an Identity. The same Credential object is returned while nothing changed,
 * and the same Transport while the client certificate stays the same, so the pool is kept.
 */
export class CredentialsProvider implements CredentialSource {
  readonly #identity: Identity;
  readonly #server: string;
  readonly #proxy: URL | undefined;
  #last: {
    token: string | undefined;
    pair: KeyPair | undefined;
    exec: ExecCredential | undefined;
    credential: Credential;
  } | undefined;

  /** `server`: the API server's URL, whose scheme says whether connections use TLS; `proxy`: the one to tunnel through (proxyFor). */
  constructor(identity: Identity, server: string, proxy?: URL) {
    this.#identity = identity;
    this.#server = server;
    this.#proxy = proxy;
  }

  current(): Promise<Credential> {
    const ready = this.ready();
    if (ready) return Promise.resolve(ready);
    const { token, pair, exec } = this.#identity;
    return Promise.all([
      token instanceof Refreshing ? token.get() : token,
      pair instanceof Refreshing ? pair.get() : pair,
      exec?.get(),
    ]).then(([t, p, e]) => this.#credential(t, p, e));
  }

  ready(): Credential | undefined {
    const { token, pair, exec } = this.#identity;
    const t = token instanceof Refreshing ? token.peek() : token;
    const p = pair instanceof Refreshing ? pair.peek() : pair;
    const e = exec?.peek();
    // A part that is set but not loaded, or stale, is loaded by current().
    if ((token !== undefined && t === undefined) || (pair !== undefined && p === undefined)) return undefined;
    if (exec !== undefined && e === undefined) return undefined;
    return this.#credential(t, p, e);
  }

  async refresh(rejected: Credential): Promise<Credential> {
    const last = this.#last;
    if (last && last.credential === rejected) {
      const { token, pair, exec } = this.#identity;
      await Promise.all([
        token instanceof Refreshing && last.token !== undefined ? token.refresh(last.token) : undefined,
        pair instanceof Refreshing && last.pair !== undefined ? pair.refresh(last.pair) : undefined,
        exec && last.exec ? exec.refresh(last.exec) : undefined,
      ]);
    }
    return this.current();
  }

  #credential(token: string | undefined, filePair: KeyPair | undefined, exec: ExecCredential | undefined): Credential {
    const last = this.#last;
    if (last && last.token === token && last.pair === filePair && last.exec === exec) return last.credential;
    const pair = exec?.pair ?? filePair;
    const lastPair = last ? (last.exec?.pair ?? last.pair) : undefined;
    const samePair = lastPair?.cert === pair?.cert && lastPair?.key === pair?.key;
    const bearer = exec?.token ?? token;
    const { basic, headers } = this.#identity;
    const credential: Credential = {
      headers: {
        ...headers,
        ...(bearer
          ? { authorization: `Bearer ${bearer}` }
          : basic
          ? { authorization: `Basic ${Buffer.from(`${basic.username}:${basic.password}`).toString('base64')}` }
          : {}),
      },
      transport: last && samePair ? last.credential.transport : this.#transport(pair),
    };
    this.#last = { token, pair: filePair, exec, credential };
    return credential;
  }

  #transport(pair: KeyPair | undefined): Transport {
    const { ca, insecureSkipTLSVerify, servername } = this.#identity;
    return keepAliveTransport(this.#server, {
      ca,
      rejectUnauthorized: insecureSkipTLSVerify ? false : undefined,
      servername,
      cert: pair?.cert,
      key: pair?.key,
    }, this.#proxy);
  }
}
