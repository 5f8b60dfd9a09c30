// Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it:
// acquire when the lease is free or expired (judged by our own clock since we last saw it
// change, so clock skew between nodes does not matter), renew every retry period, and give up
// leadership when renewals keep failing for the renew deadline. Optimistic concurrency on the
// Lease's resourceVersion makes two candidates never both win one round.
import type { KubeClient } from '../kube/client.ts';
import { ApiError } from '../kube/errors.ts';
import type { Logger } from '../log.ts';
import { sleep } from './sleep.ts';

export interface LeaderElectionOptions {
  readonly namespace: string;
  readonly name: string;
  /** Unique per process: hostname plus a random suffix. */
  readonly identity: string;
  /** controller-runtime's defaults: 15 s, 10 s, 2 s. */
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  readonly log: Logger;
  readonly onLeadingChange?: (leading: boolean) => void;
}

interface Lease {
  readonly metadata: { readonly name: string; readonly namespace?: string; readonly resourceVersion?: string };
  readonly spec: {
    readonly holderIdentity?: string | null;
    readonly leaseDurationSeconds?: number;
    readonly acquireTime?: string | null;
    readonly renewTime?: string | null;
    readonly leaseTransitions?: number;
  };
}

const JSON_CONTENT = { 'content-type': 'application/json' };

/** Requests are bounded by the renew deadline, so a hung connection cannot stall a renewal past it. */
export class LeaderElector {
  readonly #client: KubeClient;
  readonly #options: LeaderElectionOptions;
  readonly #path: string;
  /** The lease as last read or written, and when (our clock) its holder or renew time last changed. */
  #observed: Lease | undefined;
  #observedAt = 0;
  #leading = false;

  constructor(client: KubeClient, options: LeaderElectionOptions) {
    this.#client = client;
    this.#options = options;
    this.#path = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(options.namespace)}/leases`;
  }

  get leading(): boolean {
    return this.#leading;
  }

  /**
   * Resolves when this process becomes the leader; then keeps renewing in the background and
   * calls `onLost` if leadership is lost. Never resolves if `signal` aborts first.
   */
  async acquire(signal: AbortSignal, onLost: () => void): Promise<void> {
    const { retryPeriodMs, log, name, namespace, identity } = this.#options;
    log.info('waiting for leadership', { lease: `${namespace}/${name}`, identity });
    while (!(await this.#tryAcquireOrRenew())) {
      await sleep(jittered(retryPeriodMs), signal);
      if (signal.aborted) return new Promise(() => {});
    }
    this.#setLeading(true);
    log.info('became leader', { lease: `${namespace}/${name}`, identity });
    void this.#renewLoop(signal, onLost);
  }

  /** Gives the lease up at clean shutdown so a standby takes over without waiting for expiry. */
  async release(): Promise<void> {
    if (!this.#leading || !this.#observed) return;
    this.#setLeading(false);
    try {
      await this.#write({
        ...this.#observed,
        spec: { ...this.#observed.spec, holderIdentity: null, acquireTime: null, renewTime: null, leaseDurationSeconds: 1 },
      });
      this.#options.log.info('released leadership', { lease: `${this.#options.namespace}/${this.#options.name}` });
    } catch (error) {
      this.#options.log.warn('could not release the lease; it expires by itself', { error });
    }
  }

  async #renewLoop(signal: AbortSignal, onLost: () => void): Promise<void> {
    const { retryPeriodMs, renewDeadlineMs, log } = this.#options;
    let lastRenew = Date.now();
    while (!signal.aborted && this.#leading) {
      await sleep(retryPeriodMs, signal);
      if (signal.aborted || !this.#leading) return;
      if (await this.#tryAcquireOrRenew()) {
        lastRenew = Date.now();
      } else if (Date.now() - lastRenew > renewDeadlineMs || !this.#holdsLease()) {
        this.#setLeading(false);
        log.error('lost leadership', { lease: `${this.#options.namespace}/${this.#options.name}`, holder: this.#observed?.spec.holderIdentity ?? undefined });
        onLost();
        return;
      }
    }
  }

  /** One round of client-go's tryAcquireOrRenew; false when someone else holds a live lease or the write failed. */
  async #tryAcquireOrRenew(): Promise<boolean> {
    const { identity, leaseDurationMs, name, namespace, log } = this.#options;
    const now = microTime(new Date());
    try {
      const current = await this.#read();
      if (!current) {
        await this.#create({
          metadata: { name, namespace },
          spec: { holderIdentity: identity, leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000), acquireTime: now, renewTime: now, leaseTransitions: 0 },
        });
        return true;
      }
      const holder = current.spec.holderIdentity ?? '';
      const expired = Date.now() > this.#observedAt + (current.spec.leaseDurationSeconds ?? 0) * 1000;
      if (holder !== '' && holder !== identity && !expired) return false;
      const transition = holder !== identity;
      await this.#write({
        metadata: current.metadata,
        spec: {
          holderIdentity: identity,
          leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
          acquireTime: transition ? now : (current.spec.acquireTime ?? now),
          renewTime: now,
          leaseTransitions: (current.spec.leaseTransitions ?? 0) + (transition && holder !== '' ? 1 : 0),
        },
      });
      return true;
    } catch (error) {
      // 409: another candidate wrote first this round. Anything else: the API server is not
      // reachable; either way this round is lost and the next one decides.
      if (!(error instanceof ApiError && error.status === 409)) log.warn('leader election round failed', { error });
      return false;
    }
  }

  #holdsLease(): boolean {
    return this.#observed?.spec.holderIdentity === this.#options.identity;
  }

  async #read(): Promise<Lease | undefined> {
    try {
      this.#observe(await this.#client.json<Lease>('GET', `${this.#path}/${encodeURIComponent(this.#options.name)}`, { timeoutMs: this.#options.renewDeadlineMs }));
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) return undefined;
      throw error;
    }
    return this.#observed;
  }

  async #create(lease: Lease): Promise<void> {
    this.#observe(await this.#client.json<Lease>('POST', this.#path, { headers: JSON_CONTENT, body: JSON.stringify({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', ...lease }), timeoutMs: this.#options.renewDeadlineMs }));
  }

  async #write(lease: Lease): Promise<void> {
    // The resourceVersion in the body makes this a compare-and-swap: a 409 if the lease changed.
    this.#observe(await this.#client.json<Lease>('PUT', `${this.#path}/${encodeURIComponent(this.#options.name)}`, { headers: JSON_CONTENT, body: JSON.stringify({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', ...lease }), timeoutMs: this.#options.renewDeadlineMs }));
  }

  #observe(lease: Lease): void {
    const before = this.#observed?.spec;
    if (!before || before.holderIdentity !== lease.spec.holderIdentity || before.renewTime !== lease.spec.renewTime) this.#observedAt = Date.now();
    this.#observed = lease;
  }

  #setLeading(leading: boolean): void {
    this.#leading = leading;
    this.#options.onLeadingChange?.(leading);
  }
}

/** A Kubernetes MicroTime: RFC 3339 with microseconds. */
function microTime(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

function jittered(ms: number): number {
  // client-go's JitterUntil with factor 1.2.
  return ms * (1 + Math.random() * 1.2);
}
