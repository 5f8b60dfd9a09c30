// The kubeconfig feature labeller leaves to @kubernetes/client-node: auth providers (oidc, azure,
// gcp). Imported on demand by credentials.ts, so nothing else pays for the library (its generated
// API costs about 80 MiB and a second or two). Connections go through labeller's own transport,
// a proxy included (proxy.ts), as for every other kubeconfig.
import { KubeConfig } from '@kubernetes/client-node';
import type { RequestOptions as HttpsOptions } from 'node:https';
import type { Credential, CredentialSource } from './types.ts';
import { KubeConfigError } from '../../apimachinery/errors.ts';
import { keepAliveTransport, type TlsOptions } from '../transport.ts';

/** Auth providers refresh their tokens inside client-node; ask it again this often. */
const REFRESH_MS = 60_000;

export async function clientNodeCredentials(
  kubeconfig: string | undefined,
  context: string,
  server: string,
  proxy: URL | undefined,
): Promise<CredentialSource> {
  const kc = new KubeConfig();
  try {
    if (kubeconfig) kc.loadFromFile(kubeconfig);
    else kc.loadFromDefault();
    kc.setCurrentContext(context);
  } catch (error) {
    throw new KubeConfigError(
      `cannot load kubeconfig${kubeconfig ? ` ${kubeconfig}` : ''}: ${
        error instanceof Error ? error.message : String(error)
      }. Pass --kubeconfig with a valid file`,
    );
  }
  return new ClientNodeSource(kc, server, proxy);
}

class ClientNodeSource implements CredentialSource {
  readonly #kc: KubeConfig;
  readonly #server: string;
  readonly #proxy: URL | undefined;
  #credential: Credential | undefined;
  #tls = '';
  #at = -Infinity;
  #making: Promise<Credential> | undefined;

  constructor(kc: KubeConfig, server: string, proxy: URL | undefined) {
    this.#kc = kc;
    this.#server = server;
    this.#proxy = proxy;
  }

  current(): Promise<Credential> {
    const ready = this.ready();
    return ready ? Promise.resolve(ready) : this.#make();
  }

  ready(): Credential | undefined {
    return Date.now() - this.#at < REFRESH_MS ? this.#credential : undefined;
  }

  refresh(rejected: Credential): Promise<Credential> {
    if (this.#credential && this.#credential !== rejected) return Promise.resolve(this.#credential);
    return this.#make();
  }

  #make(): Promise<Credential> {
    this.#making ??= this.#authenticate().finally(() => {
      this.#making = undefined;
    });
    return this.#making;
  }

  async #authenticate(): Promise<Credential> {
    try {
      const options: HttpsOptions = {};
      await this.#kc.applyToHTTPSOptions(options);
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(options.headers ?? {})) {
        if (value !== undefined) headers[name.toLowerCase()] = String(value);
      }
      if (options.auth) headers['authorization'] = `Basic ${Buffer.from(options.auth).toString('base64')}`;
      const { ca, cert, key, pfx, passphrase, rejectUnauthorized, servername } = options as HttpsOptions & {
        servername?: string;
      };
      const tls: TlsOptions = { ca, cert, key, pfx, passphrase, rejectUnauthorized, servername };
      const tlsKey = JSON.stringify(tls);
      const transport = this.#credential && tlsKey === this.#tls
        ? this.#credential.transport
        : keepAliveTransport(this.#server, tls, this.#proxy);
      this.#tls = tlsKey;
      this.#at = Date.now();
      this.#credential = { headers, transport };
      return this.#credential;
    } catch (error) {
      throw new KubeConfigError(
        `cannot authenticate to ${this.#server}: ${
          error instanceof Error ? error.message : String(error)
        }. Check the user in the kubeconfig`,
      );
    }
  }
}
