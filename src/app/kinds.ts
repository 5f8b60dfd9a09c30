// The configured kinds against what the API server serves: discovery (retried while the server
// is starting), kubectl-style name resolution, and kinds that are served only later (a CRD
// installed after start), looked for again with growing pauses.
import type { KubeClient } from '../kube/client.ts';
import { discover, type Discovery } from '../kube/discovery.ts';
import { ConnectionError, isUnauthorized, KubeConfigError } from '../kube/errors.ts';
import { ResolveError, resolveResource } from '../kube/resolve.ts';
import type { ApiResource } from '../kube/resource.ts';
import type { KindConfig } from '../labeller/config.ts';
import type { Logger } from '../util/log.ts';
import { Backoff } from '../util/backoff.ts';
import { sleep } from '../util/sleep.ts';
import { UsageError } from '../util/usage.ts';

/** The config cannot work against this cluster (ambiguous kind, missing verb, nothing to watch): exit status 2. */
export class KindError extends UsageError {
  override readonly name: string = 'KindError';
}

export interface Resolved {
  readonly resolved: readonly { kind: KindConfig; resource: ApiResource }[];
  /** Kinds not served (yet): reported, and started once they are. */
  readonly unknown: readonly { kind: KindConfig; error: ResolveError }[];
}

/** The resolved kinds, and every resource discovery found (owner kinds are looked up there). */
export interface Discovered extends Resolved {
  readonly resources: readonly ApiResource[];
}

/**
 * Discovers the API and resolves the configured kinds. Undefined when `signal` aborts first.
 * Throws KindError when no configured kind is served, or one is a mistake in the config.
 */
export async function resolveConfiguredKinds(
  client: KubeClient,
  kinds: readonly KindConfig[],
  log: Logger,
  signal: AbortSignal,
): Promise<Discovered | undefined> {
  const discovery = await discoverWithRetry(client, log, signal).catch((error: unknown) => {
    if (signal.aborted) return undefined;
    // Refused before anything ran: the identity is wrong (expired, revoked), not the cluster.
    if (isUnauthorized(error)) {
      throw new KubeConfigError(
        `the API server at ${client.server} rejected the credentials of context "${client.context}" (401 Unauthorized): they have expired or were revoked. Log in again or refresh the kubeconfig, or pick another --context`,
      );
    }
    throw error;
  });
  if (!discovery) return undefined;
  for (const { groupVersion, error } of discovery.failedGroups) {
    log.warn('API group unavailable; kinds it serves are looked for again later', { groupVersion, error });
  }
  const found = resolveKinds(kinds, discovery.resources);
  const { resolved, unknown } = found;
  // A kind may belong to a group that failed discovery: it is retried with the unknown kinds.
  if (resolved.length === 0 && discovery.failedGroups.length === 0) {
    throw new KindError(
      unknown.length === 1
        ? unknown[0]!.error.message
        : `none of the configured kinds is served by the API server: ${unknown.map((u) => u.kind.resource).join(', ')}`,
    );
  }
  for (const { kind, error } of unknown) log.error(error.message, { kind: kind.resource });
  return { ...found, resources: discovery.resources };
}

/** Discovery, retried for a few seconds while the API server is unreachable (starting or restarting). */
export async function discoverWithRetry(client: KubeClient, log: Logger, signal: AbortSignal): Promise<Discovery> {
  const backoff = new Backoff({ initialMs: 500, maxMs: 4000 });
  for (let attempt = 1;; attempt++) {
    try {
      return await discover(client, signal);
    } catch (error) {
      // An API server that is still starting (or restarting) gets a few seconds, not forever.
      if (!(error instanceof ConnectionError) || attempt === 4 || signal.aborted) throw error;
      const retryInMs = Math.round(backoff.next());
      log.warn('API server unreachable; retrying discovery', { error, retryInMs });
      await sleep(retryInMs, signal);
    }
  }
}

/**
 * Kinds not served at start are looked for again with growing pauses; each is started once
 * discovery serves it. Resolves when `signal` aborts and the controllers it started have stopped.
 */
export async function startWhenServed(
  kinds: readonly KindConfig[],
  client: KubeClient,
  log: Logger,
  signal: AbortSignal,
  start: (kind: KindConfig, resource: ApiResource) => Promise<void>,
): Promise<void> {
  const started: Promise<void>[] = [];
  let pending = kinds;
  for (let pauseMs = 5_000; pending.length > 0 && !signal.aborted; pauseMs = Math.min(pauseMs * 2, 300_000)) {
    await sleep(pauseMs, signal);
    const resources = (await discover(client, signal).catch(() => undefined))?.resources;
    if (!resources) continue;
    const { resolved, unknown } = resolveKinds(pending, resources);
    for (const { kind, resource } of resolved) {
      log.info('kind is served now; watching it', { kind: resource.kind, resource: kind.resource });
      started.push(start(kind, resource));
    }
    pending = unknown.map((u) => u.kind);
  }
  await Promise.all(started);
}

/** Resolves kinds against discovered resources; throws KindError for a kind that is a mistake in the config (ambiguous, a verb missing). */
export function resolveKinds(kinds: readonly KindConfig[], resources: readonly ApiResource[]): Resolved {
  const resolved: { kind: KindConfig; resource: ApiResource }[] = [];
  const unknown: { kind: KindConfig; error: ResolveError }[] = [];
  for (const kind of kinds) {
    try {
      resolved.push({ kind, resource: resolveResource(kind.resource, resources) });
    } catch (error) {
      // A kind that is not served (yet) is reported and the others run; a kind that is
      // ambiguous or lacks a verb is a mistake in the config.
      if (error instanceof ResolveError && error.reason === 'unknown') unknown.push({ kind, error });
      else throw error instanceof ResolveError ? new KindError(error.message) : error;
    }
  }
  return { resolved, unknown };
}
