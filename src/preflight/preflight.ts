// Asks the API server whether this identity has every right the config needs (needs.ts), one
// SelfSubjectAccessReview per verb, as `kubectl auth can-i` asks: whatever authorizes it (RBAC,
// webhooks, aggregated ClusterRoles), the answer is the authorizer's. What is denied comes back
// with the RBAC that grants it (rbac.ts).
import { deniedAccess, whoAmI } from '../kube/access.ts';
import type { KubeClient } from '../kube/client.ts';
import type { Need } from './needs.ts';
import { rbacFor, subjectOf } from './rbac.ts';

export interface Preflight {
  /** Who was asked about, as the API server names it; undefined when it would not say. */
  readonly user: string | undefined;
  /** Distinct rights asked about (verb, resource, namespace, name). */
  readonly asked: number;
  /** The needs with a verb denied, each with only the verbs denied. */
  readonly missing: readonly Need[];
  /** RBAC granting what is missing (a YAML stream); empty when nothing is. */
  readonly rbac: string;
  /** Why nothing could be asked (reviews refused, API server away): then nothing is known to be missing. */
  readonly error?: string;
}

/** Reviews asked at once. */
const PARALLEL = 4;

/** What of `needs` this identity may not do; `name` names the Roles of the RBAC that grants it. */
export async function preflight(
  client: KubeClient,
  needs: readonly Need[],
  name: string,
  signal?: AbortSignal,
): Promise<Preflight> {
  const distinct = dedupe(needs);
  const user = await whoAmI(client, signal);
  // One review at a time per worker, each verb on its own: few listeners on `signal` at once.
  const asked = distinct.flatMap((need) => need.verbs.map((verb) => ({ need, verb })));
  const denied = new Map<Need, string[]>();
  let next = 0;
  try {
    await Promise.all(Array.from({ length: Math.min(PARALLEL, asked.length) }, async () => {
      while (next < asked.length) {
        const { need, verb } = asked[next++]!;
        if ((await deniedAccess(client, need, [need.namespace], [verb], signal)).length > 0) {
          denied.set(need, [...(denied.get(need) ?? []), verb]);
        }
      }
    }));
  } catch (error) {
    if (signal?.aborted) throw error;
    const problem = error instanceof Error ? error.message : String(error);
    return { user, asked: 0, missing: [], rbac: '', error: `cannot ask what labeller may do: ${problem}` };
  }
  // In the order of `needs` and their verbs, whichever review answered first.
  const missing = distinct.flatMap((need) => {
    const verbs = need.verbs.filter((verb) => denied.get(need)?.includes(verb));
    return verbs.length > 0 ? [{ ...need, verbs }] : [];
  });
  return {
    user,
    asked: asked.length,
    missing,
    rbac: missing.length === 0 ? '' : rbacFor(missing, user === undefined ? undefined : subjectOf(user), name),
  };
}

/** One need per right: a verb asked about once per resource, namespace and name, for the first that needs it. */
function dedupe(needs: readonly Need[]): Need[] {
  const seen = new Set<string>();
  const out: Need[] = [];
  for (const need of needs) {
    const verbs = need.verbs.filter((verb) => {
      const key = JSON.stringify([need.group, need.resource, need.namespace, need.name ?? '', verb]);
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
    if (verbs.length > 0) out.push({ ...need, verbs });
  }
  return out;
}
