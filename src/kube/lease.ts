// coordination.k8s.io/v1 Leases over REST. A missing lease (404) and a lost write race (409:
// the name is taken, or the lease changed since it was read) are answers, not failures: they
// come back as `undefined` so the caller decides what they mean.
import type { KubeClient } from './client.ts';
import { isConflict, isNotFound } from '../apimachinery/errors.ts';

/** A Lease's spec; times are Kubernetes MicroTimes (RFC 3339 with microseconds). */
export interface LeaseSpec {
  readonly holderIdentity?: string | null | undefined;
  readonly leaseDurationSeconds?: number | undefined;
  readonly acquireTime?: string | null | undefined;
  readonly renewTime?: string | null | undefined;
  readonly leaseTransitions?: number | undefined;
}

export interface Lease {
  readonly metadata: {
    readonly name: string;
    readonly namespace?: string | undefined;
    readonly resourceVersion?: string | undefined;
    readonly creationTimestamp?: string | undefined;
    readonly labels?: Readonly<Record<string, string>> | undefined;
    readonly annotations?: Readonly<Record<string, string>> | undefined;
  };
  readonly spec: LeaseSpec;
}

interface LeaseList {
  readonly items: readonly Lease[] | null;
}

const JSON_CONTENT = { 'content-type': 'application/json' };
const TYPE = { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease' };

export class LeaseApi {
  readonly #client: KubeClient;

  constructor(client: KubeClient) {
    this.#client = client;
  }

  /** The lease, or undefined when there is none. */
  async get(namespace: string, name: string, signal?: AbortSignal): Promise<Lease | undefined> {
    try {
      return await this.#client.json<Lease>('GET', path(namespace, name), { signal });
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  /** Creates the lease; undefined when one of that name exists already. */
  create(lease: Lease, signal?: AbortSignal): Promise<Lease | undefined> {
    const namespace = lease.metadata.namespace ?? '';
    return conflictAsUndefined(
      this.#client.json<Lease>('POST', path(namespace), {
        headers: JSON_CONTENT,
        body: JSON.stringify({ ...TYPE, ...lease }),
        signal,
      }),
    );
  }

  /**
   * Replaces the lease. The resourceVersion in `lease.metadata` makes this a compare-and-swap:
   * undefined when the lease changed since it was read.
   */
  update(lease: Lease, signal?: AbortSignal): Promise<Lease | undefined> {
    const namespace = lease.metadata.namespace ?? '';
    return conflictAsUndefined(
      this.#client.json<Lease>('PUT', path(namespace, lease.metadata.name), {
        headers: JSON_CONTENT,
        body: JSON.stringify({ ...TYPE, ...lease }),
        signal,
      }),
    );
  }

  /**
   * Deletes the lease if it still has `resourceVersion` (so a lease someone else wrote meanwhile
   * stays): true when it is gone, false when it was written since (a 409).
   */
  async delete(lease: Lease, signal?: AbortSignal): Promise<boolean> {
    const precondition = lease.metadata.resourceVersion
      ? { preconditions: { resourceVersion: lease.metadata.resourceVersion } }
      : {};
    try {
      await this.#client.json('DELETE', path(lease.metadata.namespace ?? '', lease.metadata.name), {
        headers: JSON_CONTENT,
        body: JSON.stringify(precondition),
        signal,
      });
      return true;
    } catch (error) {
      if (isNotFound(error)) return true;
      if (isConflict(error)) return false;
      throw error;
    }
  }

  /** The leases matching `labelSelector` in `namespace`, or in every namespace when it is ''. */
  async list(namespace: string, labelSelector: string, signal?: AbortSignal): Promise<readonly Lease[]> {
    const list = await this.#client.json<LeaseList>('GET', path(namespace), { query: { labelSelector }, signal });
    return list.items ?? [];
  }
}

function path(namespace: string, name?: string): string {
  const ns = namespace ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  return `/apis/coordination.k8s.io/v1${ns}/leases${name === undefined ? '' : `/${encodeURIComponent(name)}`}`;
}

async function conflictAsUndefined(request: Promise<Lease>): Promise<Lease | undefined> {
  try {
    return await request;
  } catch (error) {
    if (isConflict(error)) return undefined;
    throw error;
  }
}
