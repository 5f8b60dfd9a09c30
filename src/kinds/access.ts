// Every-kind mode's kinds are asked about before they start (kube/access.ts): a kind labeller
// may not use is skipped and said once (a warning naming the verbs missing and the rule to grant,
// a /readyz note, labeller_kinds_skipped), so that narrow RBAC narrows what every-kind mode
// covers instead of leaving controllers that fail and retry for ever. Kinds running already are
// not asked again unless their list or watch is refused (forget()); skipped ones are asked again
// at the next application (a discovery change, a reload, and the kind set's periodic re-check
// while some are skipped). A review that cannot be made (reviews forbidden, the API server away)
// skips nothing: the kind starts, and its list reports a refusal as any kind's does.
import type { Denial } from '../kube/access.ts';
import type { ApiResource } from '../apimachinery/resource.ts';
import { groupResource, parseGroupResource } from '../apimachinery/resource.ts';
import type { SkippedKindGauge } from '../metrics/metrics.ts';
import type { Logger } from '../util/log.ts';
import { controllerName, type ResolvedKind, watchedNamespaces } from './resolve.ts';

/** The verbs among those labeller needs that it may not use on `resource` in `namespaces` ('' for cluster-wide). */
export type AccessCheck = (
  resource: ApiResource,
  namespaces: readonly string[],
  signal?: AbortSignal,
) => Promise<readonly Denial[]>;

/** A kind skipped for want of rights. */
export interface SkippedKind extends SkippedKindGauge {
  readonly denials: readonly Denial[];
}

/** Kinds asked about at once; each asks about its verbs in each of its namespaces together. */
const PARALLEL = 4;

export class KindAccess {
  readonly #check: AccessCheck;
  readonly #log: Logger;
  /** By controller name. */
  #skipped = new Map<string, SkippedKind>();
  /** The controller names admitted last time: while they run, they are not asked about again. */
  #admitted = new Set<string>();
  #failing = false;

  constructor(check: AccessCheck, log: Logger) {
    this.#check = check;
    this.#log = log;
  }

  /**
   * The kinds of `kinds` that may run: those admitted before and `running` still, and those the
   * API server allows. The others are skipped, and said once when they become so.
   */
  async admit(
    kinds: readonly ResolvedKind[],
    running: (name: string) => boolean,
    signal?: AbortSignal,
  ): Promise<ResolvedKind[]> {
    const asked = kinds.filter((kind) => {
      const name = controllerName(kind);
      return !(this.#admitted.has(name) && running(name));
    });
    const denials = new Map<ResolvedKind, readonly Denial[]>();
    let next = 0;
    await Promise.all(Array.from({ length: Math.min(PARALLEL, asked.length) }, async () => {
      while (next < asked.length) {
        const kind = asked[next++]!;
        denials.set(kind, await this.#ask(kind, signal));
      }
    }));
    const skipped = new Map<string, SkippedKind>();
    for (const [kind, denied] of denials) {
      if (denied.length === 0) continue;
      const name = controllerName(kind);
      const entry = skippedKind(kind.resource, denied);
      skipped.set(name, entry);
      if (this.#skipped.get(name)?.verbs !== entry.verbs) {
        this.#log.warn('kind skipped: labeller may not use it', {
          kind: entry.resource,
          missing: entry.verbs,
          grant: grant(entry),
        });
      }
    }
    for (const [name, entry] of this.#skipped) {
      if (!skipped.has(name) && kinds.some((kind) => controllerName(kind) === name)) {
        this.#log.info('kind allowed now; watching it', { kind: entry.resource });
      }
    }
    this.#skipped = skipped;
    const admitted = kinds.filter((kind) => !skipped.has(controllerName(kind)));
    this.#admitted = new Set(admitted.map(controllerName));
    return admitted;
  }

  /** Asks about `name` again at the next application (its list or watch was refused); whether it was admitted here. */
  forget(name: string): boolean {
    return this.#admitted.delete(name);
  }

  get skipped(): SkippedKind[] {
    return [...this.#skipped.values()];
  }

  /** For /readyz: each kind skipped, and what to grant. */
  notes(): string[] {
    return this.skipped.map((entry) => `${entry.resource}: skipped, labeller may not ${entry.verbs}; ${grant(entry)}`);
  }

  async #ask(kind: ResolvedKind, signal?: AbortSignal): Promise<readonly Denial[]> {
    try {
      const denied = await this.#check(kind.resource, watchedNamespaces(kind.kind, kind.resource), signal);
      this.#failing = false;
      return denied;
    } catch (error) {
      if (signal?.aborted) throw error;
      if (!this.#failing) {
        this.#log.warn('cannot ask the API server what labeller may do; starting kinds unchecked', { error });
      }
      this.#failing = true;
      return [];
    }
  }
}

function skippedKind(resource: ApiResource, denials: readonly Denial[]): SkippedKind {
  return {
    resource: groupResource(resource),
    verbs: [...new Set(denials.map((d) => d.verb))].join(','),
    denials,
  };
}

/** The RBAC rule that would let labeller use the kind, and where it goes, in words. */
function grant({ resource, verbs, denials }: SkippedKind): string {
  const { resource: plural, group } = parseGroupResource(resource);
  const rule = `{apiGroups: ["${group}"], resources: [${plural}], verbs: [${verbs.split(',').join(', ')}]}`;
  const namespaces = [...new Set(denials.map((d) => d.namespace))];
  const where = namespaces.includes('')
    ? 'a ClusterRole bound to labeller'
    : `a Role in namespace${namespaces.length === 1 ? '' : 's'} ${namespaces.join(', ')} bound to labeller`;
  return `grant ${rule} in ${where}, or exclude ${resource}`;
}
