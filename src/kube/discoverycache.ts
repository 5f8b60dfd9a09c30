// What the API server serves, discovered once and kept (controller-runtime's DynamicRESTMapper):
// kinds to label, owner kinds, every-kind mode and a reloaded config all resolve against this one
// cache. It is refreshed when a lookup misses and, while somebody waits for resources to appear
// or go (a kind not served yet, every-kind mode), periodically; refreshes are rate-limited and
// jittered (5 s growing to 60 s while nothing changes), and listeners hear of every change.
import { Backoff } from '../util/backoff.ts';
import type { Logger } from '../util/log.ts';
import { sleep } from '../util/sleep.ts';
import type { KubeClient } from './client.ts';
import { discover, type Discovery } from './discovery.ts';
import { ConnectionError, isUnauthorized, KubeConfigError } from '../apimachinery/errors.ts';
import { resolveResource } from '../apimachinery/resolve.ts';
import type { ApiResource } from '../apimachinery/resource.ts';

export interface DiscoveryCacheOptions {
  /** The API server and kubeconfig context, for messages. */
  readonly server: string;
  readonly context: string;
  /** The first pause before a refresh, growing to `maxIntervalMs` while nothing changes (5 s, 60 s). */
  readonly minIntervalMs?: number;
  readonly maxIntervalMs?: number;
}

export class DiscoveryCache {
  readonly #discover: (signal: AbortSignal) => Promise<Discovery>;
  readonly #options: DiscoveryCacheOptions;
  readonly #log: Logger;
  readonly #pause: Backoff;
  #discovery: Discovery | undefined;
  #key = '';
  #failedKey = '';
  readonly #listeners = new Set<(discovery: Discovery) => void>();
  /** Standing demands for periodic refreshes, and whether a lookup missed since the last refresh. */
  #demands = 0;
  #missed = false;
  #wake: (() => void) | undefined;

  /** `read` discovers what is served (discover() over a client: see of()). */
  constructor(read: (signal: AbortSignal) => Promise<Discovery>, log: Logger, options: DiscoveryCacheOptions) {
    this.#discover = read;
    this.#options = options;
    this.#log = log;
    this.#pause = new Backoff({
      initialMs: options.minIntervalMs ?? 5_000,
      maxMs: options.maxIntervalMs ?? 60_000,
      jitter: 0.2,
      resetAfterMs: Infinity,
    });
  }

  /** The discovery cache of the API server `client` talks to. */
  static of(client: KubeClient, log: Logger): DiscoveryCache {
    return new DiscoveryCache((signal) => discover(client, signal), log, {
      server: client.server,
      context: client.context,
    });
  }

  /**
   * The first discovery, retried for a few seconds while the API server is unreachable (starting
   * or restarting). Undefined when `signal` aborts first; a 401 is a KubeConfigError.
   */
  async load(signal: AbortSignal): Promise<Discovery | undefined> {
    const backoff = new Backoff({ initialMs: 500, maxMs: 4000 });
    for (let attempt = 1;; attempt++) {
      try {
        return this.#store(await this.#discover(signal));
      } catch (error) {
        if (signal.aborted) return undefined;
        // Refused before anything ran: the identity is wrong (expired, revoked), not the cluster.
        if (isUnauthorized(error)) {
          throw new KubeConfigError(
            `the API server at ${this.#options.server} rejected the credentials of context "${this.#options.context}" (401 Unauthorized): they have expired or were revoked. Log in again or refresh the kubeconfig, or pick another --context`,
          );
        }
        // An API server that is still starting (or restarting) gets a few seconds, not forever.
        if (!(error instanceof ConnectionError) || attempt === 4) throw error;
        const retryInMs = Math.round(backoff.next());
        this.#log.warn('API server unreachable; retrying discovery', { error, retryInMs });
        await sleep(retryInMs, signal);
      }
    }
  }

  /** The last discovery; load() first. */
  get discovery(): Discovery {
    if (!this.#discovery) throw new Error('discovery not loaded');
    return this.#discovery;
  }

  get resources(): readonly ApiResource[] {
    return this.discovery.resources;
  }

  /** A kubectl-style name resolved (see resolveResource); a name not served asks for a refresh. */
  resolve(name: string, verbs?: readonly string[]): ApiResource {
    try {
      return resolveResource(name, this.resources, verbs);
    } catch (error) {
      this.#miss();
      throw error;
    }
  }

  /** The resource serving objects of `apiVersion` and `kind` with list and watch (an owner reference's), or undefined (a refresh is asked for). */
  forKind(apiVersion: string, kind: string): ApiResource | undefined {
    const slash = apiVersion.indexOf('/');
    const [group, version] = slash === -1
      ? ['', apiVersion]
      : [apiVersion.slice(0, slash), apiVersion.slice(slash + 1)];
    const candidates = this.resources.filter((r) =>
      r.group === group && r.kind === kind && !r.resource.includes('/') && r.verbs.includes('list') &&
      r.verbs.includes('watch')
    );
    const found = candidates.find((r) => r.version === version) ?? candidates.find((r) => r.preferred) ?? candidates[0];
    if (!found) this.#miss();
    return found;
  }

  /** A request found a resource not served (a 404 on its collection: a CRD removed): a refresh is asked for. */
  notServed(): void {
    this.#miss();
  }

  /** Tells `listener` of each new discovery whose resources differ from the last; returns the unsubscribe function. */
  onChange(listener: (discovery: Discovery) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Asks for periodic refreshes until the returned function is called (kinds waiting to be served, every-kind mode). */
  demand(): () => void {
    this.#demands++;
    this.#wake?.();
    let released = false;
    return () => {
      if (!released) this.#demands--;
      released = true;
    };
  }

  /** Refreshes while a lookup missed or somebody demands it, until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      if (this.#demands === 0 && !this.#missed) {
        let wake!: () => void;
        const woken = new Promise<void>((resolve) => (wake = resolve));
        // Removed once woken: the signal lives as long as the process, the wait does not.
        signal.addEventListener('abort', wake, { once: true });
        this.#wake = wake;
        await woken;
        signal.removeEventListener('abort', wake);
        this.#wake = undefined;
        continue;
      }
      await sleep(this.#pause.next(), signal);
      if (signal.aborted) return;
      this.#missed = false;
      try {
        if (await this.refresh(signal)) this.#pause.reset();
      } catch (error) {
        if (!signal.aborted) this.#log.warn('discovery failed; trying again later', { error });
      }
    }
  }

  /** Discovers again now; tells the listeners and answers true when what is served changed. */
  async refresh(signal: AbortSignal): Promise<boolean> {
    const before = this.#key;
    const discovery = this.#store(await this.#discover(signal));
    if (this.#key === before) return false;
    for (const listener of this.#listeners) listener(discovery);
    return true;
  }

  #miss(): void {
    if (this.#missed) return;
    this.#missed = true;
    this.#wake?.();
  }

  #store(discovery: Discovery): Discovery {
    const failedKey = discovery.failedGroups.map((g) => g.groupVersion).join(' ');
    // Said when it changes, not at every refresh.
    if (failedKey !== this.#failedKey) {
      for (const { groupVersion, error } of discovery.failedGroups) {
        this.#log.warn('API group unavailable; kinds it serves are looked for again later', { groupVersion, error });
      }
    }
    this.#failedKey = failedKey;
    // A group that failed is looked for again as long as somebody misses it.
    if (discovery.failedGroups.length > 0) this.#missed = true;
    this.#discovery = discovery;
    this.#key = discovery.resources.map((r) => `${r.group}/${r.version}/${r.resource}:${r.verbs.join(',')}`).sort()
      .join(' ');
    return discovery;
  }
}
