// What this identity may do, asked of the API server itself (SelfSubjectAccessReview, as
// `kubectl auth can-i` asks): whatever authorizes it (RBAC, webhooks, aggregated ClusterRoles),
// the answer is the authorizer's own, before a single list or patch is tried.
import type { KubeClient } from './client.ts';
import type { ApiResource } from '../apimachinery/resource.ts';

const PATH = '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews';

/** A verb this identity may not use on a resource in a namespace. */
export interface Denial {
  readonly verb: string;
  /** '' for cluster-wide (every namespace, or a cluster-scoped resource). */
  readonly namespace: string;
}

interface AccessReview {
  readonly status?: { readonly allowed?: boolean };
}

/**
 * The verbs of `verbs` × `namespaces` ('' for cluster-wide) this identity may not use on
 * `resource` (one object of it when `name` is set), in that order; empty when every one is
 * allowed. Rejects when a review cannot be made (the API server unreachable, reviews forbidden).
 */
export async function deniedAccess(
  client: KubeClient,
  resource: Pick<ApiResource, 'group' | 'resource'> & { readonly name?: string | undefined },
  namespaces: readonly string[],
  verbs: readonly string[],
  signal?: AbortSignal,
): Promise<Denial[]> {
  const asked = namespaces.flatMap((namespace) => verbs.map((verb) => ({ verb, namespace })));
  const answers = await Promise.all(asked.map(({ verb, namespace }) =>
    client.json<AccessReview>('POST', PATH, {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SelfSubjectAccessReview',
        spec: {
          resourceAttributes: {
            group: resource.group,
            resource: resource.resource,
            verb,
            ...(namespace ? { namespace } : {}),
            ...(resource.name ? { name: resource.name } : {}),
          },
        },
      }),
      signal,
    })
  ));
  return asked.filter((_, i) => answers[i]?.status?.allowed !== true);
}

interface SelfSubjectReview {
  readonly status?: { readonly userInfo?: { readonly username?: string } };
}

/** The user name the API server knows this identity by (SelfSubjectReview, as `kubectl auth whoami`); undefined when it will not say. */
export async function whoAmI(client: KubeClient, signal?: AbortSignal): Promise<string | undefined> {
  try {
    const review = await client.json<SelfSubjectReview>('POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }),
      signal,
    });
    return review.status?.userInfo?.username;
  } catch (error) {
    if (signal?.aborted) throw error;
    return undefined;
  }
}
