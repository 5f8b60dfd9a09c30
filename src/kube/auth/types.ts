// The types of who labeller is to the API server, apart from the code that makes them, so every
// credential module (kubeconfig, in-cluster, exec plugins, client-node) can name them without
// importing the others.
import type { KeyPair } from './credentialfiles.ts';
import type { ExecCredential } from './exec.ts';
import type { Refreshing } from './refreshing.ts';
import type { Transport } from '../transport.ts';

export interface Credential {
  readonly headers: Readonly<Record<string, string>>;
  readonly transport: Transport;
}

export interface CredentialSource {
  /** The credential for the next request; reloads what is stale (files, expiring plugin credentials). */
  current(): Promise<Credential>;
  /**
   * current(), when nothing has to be reloaded first (almost every request: no promise made);
   * else undefined, and current() reloads.
   */
  ready(): Credential | undefined;
  /**
   * `rejected` got a 401: reload what can be reloaded, once however many requests were
   * rejected, and return the result (the same object when nothing changed: do not retry).
   */
  refresh(rejected: Credential): Promise<Credential>;
}

/** The parts of an identity; a Refreshing part is reloaded when stale or rejected. */
export interface Identity {
  /** PEM trust roots; default: the system's. */
  readonly ca?: string | undefined;
  readonly insecureSkipTLSVerify?: boolean;
  readonly servername?: string | undefined;
  readonly token?: string | Refreshing<string> | undefined;
  readonly basic?: { readonly username: string; readonly password: string } | undefined;
  readonly pair?: KeyPair | Refreshing<KeyPair> | undefined;
  readonly exec?: Refreshing<ExecCredential> | undefined;
  /** Impersonation headers. */
  readonly headers?: Readonly<Record<string, string>>;
}
