// Keeps the admission policies of the config in force on the API server (--admission-policies):
// rendered as `labeller admission` renders them (render.ts), each policy then its binding
// server-side applied under the field manager, and the field manager's policies and bindings the
// config no longer renders deleted. It runs only while this process may write: as a task of the
// manager while leading, each round after the field-manager guard lets it write, and in a shard
// group only on the member that writes the bucket of cluster-scoped objects (shard/shard.ts), which
// the policies are; a member that takes that bucket over applies them at once. It applies again
// when the config in force changes (changed(), after a live reload the guard let through), when
// discovery changes (a kind served later, a CRD the every-kind policy leaves out), and every
// resync period (a policy deleted or changed by hand comes back). A policy or binding the API
// server refuses (CEL it does not take, a right it lacks on the ConfigMap a policy reads as
// params) is reported once (log, Event on labeller's Pod, /readyz note, the
// labeller_admission_policies gauge) and not retried before the next change or resync; any older
// version of it is deleted, so that no policy sets what the config no longer says, and the others
// apply. A failure that passes (the API server away) is retried with backoff. A server that does
// not serve the policies' v1 is said once: labeller then runs as the controller alone.
//
// Policies must not outlive labeller: they would go on labelling every create with the last
// config's values. With an owner (kube/owner.ts), each policy and binding depends on it and the
// garbage collector removes them with it; without one, a process that nobody takes over from (no
// leader election, no shard group) deletes them when it stops.
import type { ControllerRule } from '../admission/policy.ts';
import { policySelector } from '../admission/names.ts';
import {
  isPolicy,
  isProtecting,
  MUTATING,
  POLICY_RESOURCES,
  policyOf,
  serves,
  servesPolicies,
} from '../admission/resources.ts';
import { type Config, protectsKeys } from '../config/model.ts';
import type { LabellerEvents } from '../events/labellerevents.ts';
import type { DiscoveryCache } from '../kube/discoverycache.ts';
import { ApiError, isConflict, isForbidden, isNotFound } from '../apimachinery/errors.ts';
import { type ClusterOwner, OwnerUnavailable } from '../kube/owner.ts';
import type { OwnerReference } from '../apimachinery/objects.ts';
import { ResolveError } from '../apimachinery/resolve.ts';
import type { Writable } from '../labelling/ports.ts';
import type { AdmissionPolicyGauges } from '../metrics/metrics.ts';
import type { Shard } from '../shard/shard.ts';
import { Backoff } from '../util/backoff.ts';
import type { Logger } from '../util/log.ts';
import { sleep } from '../util/sleep.ts';
import { renderPolicies } from './render.ts';
import { describePolicy, type PolicyKinds, type PolicyObject, type PolicyStore } from './store.ts';

export interface PolicyApplierOptions {
  readonly store: Pick<PolicyStore, 'fieldManager' | 'apply' | 'prune' | 'list'>;
  readonly discovery: DiscoveryCache;
  /** The config in force: the kind set's, which the guard claimed. */
  readonly config: () => Config | undefined;
  /** Have the API server check each object and write nothing; log what would be applied and deleted. */
  readonly dryRun: boolean;
  /** Each write waits for it (the field-manager guard's Lease held). */
  readonly writable?: Writable | undefined;
  /** Why this process may not write now (leadership or the guard's Lease lapsed), asked as each write is sent. */
  readonly claimed?: (() => string | undefined) | undefined;
  /** This member's share in a shard group: it applies while it writes the cluster-scoped objects' bucket. */
  readonly shard?: Shard | undefined;
  readonly events?: Pick<LabellerEvents, 'policyRefused'> | undefined;
  /** How often everything is applied again; 0: only on changes. */
  readonly resyncMs: number;
  /**
   * labeller's own user name, as the API server knows it (SelfSubjectReview): the protecting
   * policies let it change what they protect. Undefined when the API server will not say.
   */
  readonly identity?: ((signal: AbortSignal) => Promise<string | undefined>) | undefined;
  /** What the policies depend on, so that the garbage collector removes them with it. */
  readonly owner?: Pick<ClusterOwner, 'spec' | 'reference'> | undefined;
  /** Delete them when run() ends: nothing else keeps them then, and nothing removes them (no owner, nobody to take over). */
  readonly removeOnStop?: boolean | undefined;
  readonly log: Logger;
}

/** A policy or binding the API server would not store, and why. */
interface Refusal {
  readonly object: string;
  readonly message: string;
}

/** A policy or binding changed between the round's read and its apply: another writer; the round is tried again. */
export class PolicyChanged extends Error {
  override readonly name = 'PolicyChanged';

  constructor(described: string, options: ErrorOptions) {
    super(`${described} changed since this round read it (another writer); reading it again`, options);
  }
}

/** What a cluster-scoped object's shard key is: no namespace. */
const CLUSTER_SCOPED = '';

export class PolicyApplier {
  /** A write was under way when this run's signal aborted it. */
  #cutShort = false;
  /** The run's `stop`: a wait for the guard's Lease ends with it, as a round told to stop starts no write. */
  #stop: AbortSignal | undefined;
  readonly #options: PolicyApplierOptions;
  /** Each policy of the last round, by name: applied (undefined), or refused (with its binding's refusal, if that was refused). */
  #policies = new Map<string, Refusal | undefined>();
  /** The refusals reported, by object: said again only when the API server's reason changes. */
  #refusals = new Map<string, string>();
  /** The resourceVersion each object had after it was last applied: only a change is logged. */
  readonly #versions = new Map<string, string | undefined>();
  /** Why labeller's policies that the config no longer renders cannot be removed, while they cannot. */
  #cannotPrune: string | undefined;
  /** Why the policies cannot be given their owner, while they cannot: none is applied. */
  #ownerless: string | undefined;
  /** labeller's user name, once known. */
  #identity: string | undefined;
  /** Why the config's protection is not applied (labeller's identity unknown), while it is not. */
  #unprotected: string | undefined;
  /** Whether the API server served the policies at the last round; undefined before the first. */
  #served: boolean | undefined;
  /** The objects last applied, all of them (JSON): a round that renders the same sends nothing. */
  #applied: string | undefined;
  /** What was said of the rules left to the controller and the exclusions not served, to say it once. */
  #said: string | undefined;
  #dirty = true;
  #wake: (() => void) | undefined;

  constructor(options: PolicyApplierOptions) {
    this.#options = options;
  }

  /** The config in force changed: apply its policies. */
  changed(): void {
    this.#dirty = true;
    this.#wake?.();
  }

  /**
   * Keeps the policies applied until `stop` aborts, finishing the round under way; `writes`
   * aborts the writes on the wire (leadership ends, the guard's Lease lapses, the grace period is
   * over): 'cut short' when a write was under way then (its bytes may still land). Each run is
   * judged alone: one run after another (the guard's Lease taken again) starts clean, else a
   * member's every later round would release its bucket as cut short, and leaving, it would keep
   * its Lease to expire with nothing on the wire.
   */
  async run(stop: AbortSignal, writes: AbortSignal = stop): Promise<void | 'cut short'> {
    const { discovery, shard, log } = this.#options;
    this.#cutShort = false;
    this.#stop = stop;
    const [policies] = MUTATING;
    const unsubscribe = [
      discovery.onChange(() => this.changed()),
      shard?.membership.subscribe(({ taken }) => {
        if (shard.within(policies, CLUSTER_SCOPED, taken)) this.changed();
        else if (!shard.within(policies, CLUSTER_SCOPED, shard.membership.state.writes)) this.#standDown();
      }),
    ];
    const backoff = new Backoff({ initialMs: 1_000, maxMs: 60_000 });
    try {
      while (!stop.aborted) {
        if (this.#dirty) {
          this.#dirty = false;
          try {
            await this.#round(writes);
            backoff.reset();
          } catch (error) {
            // Not done: the next run (leadership or the guard's Lease taken again) does it.
            this.#dirty = true;
            if (stop.aborted) break;
            const retryInMs = Math.round(backoff.next());
            log.warn('admission policies not applied yet; retrying', { error, retryInMs });
            await sleep(retryInMs, stop);
            continue;
          }
        }
        if (await this.#idle(stop)) {
          // Resync: everything again, though the config renders the same.
          this.#applied = undefined;
          this.#dirty = true;
        }
      }
    } finally {
      for (const stopListening of unsubscribe) stopListening?.();
      // Another process applies them now, or nobody: this one reports nothing it no longer does.
      this.#standDown();
      if (this.#options.removeOnStop && !this.#options.dryRun) await this.#removeAll();
    }
    return this.#cutShort ? 'cut short' : undefined;
  }

  /** Deletes every policy of the field manager, as labeller stops with nothing to take over or remove them. */
  async #removeAll(): Promise<void> {
    const { store, discovery, log } = this.#options;
    try {
      await store.prune(new Set(), {
        kinds: { served: (kind) => serves(discovery.resources, kind), optional: isProtecting },
        dryRun: false,
        why: 'labeller stopped: nothing keeps them now, and no owner removes them (--admission-policies-owner)',
        log,
        signal: AbortSignal.timeout(10_000),
      });
    } catch (error) {
      log.warn(
        `admission policies left applied as labeller stops; remove them: kubectl delete ${
          POLICY_RESOURCES.map((r) => r.resource).join(',')
        } -l ${policySelector(store.fieldManager)}`,
        { error },
      );
    }
  }

  /** The policies applied and refused at the last round, for the labeller_admission_policies gauge. */
  counts(): AdmissionPolicyGauges {
    const states = [...this.#policies.values()];
    const refused = states.filter((state) => state !== undefined).length;
    return { applied: states.length - refused, refused };
  }

  /** Why labels are set only after the create: reported by /readyz, not keeping it from being ready. */
  notes(): string[] {
    if (this.#served === false) {
      return [
        'admission policies: the API server does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicies (Kubernetes 1.36 and later do); the controller labels objects after their create',
      ];
    }
    const refused = [...this.#policies.values()].flatMap((refusal) =>
      refusal
        ? [
          `admission ${refusal.object}: refused by the API server: ${refusal.message}; the controller labels those objects after their create`,
        ]
        : []
    );
    return [
      ...(this.#ownerless ? [`admission policies: not applied: ${this.#ownerless}`] : []),
      ...(this.#unprotected ? [`protection: not applied: ${this.#unprotected}`] : []),
      ...refused,
      ...(this.#cannotPrune ? [`admission policies: ${this.#cannotPrune}`] : []),
    ];
  }

  /** One round: render the config in force, apply what it renders, delete what it no longer does. */
  async #round(signal: AbortSignal): Promise<void> {
    const { discovery, config: current, shard, store } = this.#options;
    const config = current();
    if (!config) return;
    this.#servedNow();
    // A config that protects nothing has no rights on the protecting policies (the chart's): none to find then.
    const kinds: PolicyKinds = {
      served: (kind) => serves(discovery.resources, kind),
      optional: (kind) => isProtecting(kind) && !protectsKeys(config),
    };
    const release = shard ? shard.hold(MUTATING[0], CLUSTER_SCOPED) : () => {};
    if (!release) {
      // Another member writes the cluster-scoped objects; this one is told when it takes them over.
      this.#standDown();
      return;
    }
    try {
      const identity = await this.#whoAmI(config, signal);
      const { admission, unmatched } = renderPolicies(config, discovery, store.fieldManager, identity);
      this.#sayOnce(admission.controllerRules, unmatched);
      const owner = await this.#owner(signal);
      if (owner === null) return;
      const objects = admission.objects.filter((object) => kinds.served(object.kind)).map((object) =>
        owner === undefined ? object : { ...object, metadata: { ...object.metadata, ownerReferences: [owner] } }
      );
      const key = JSON.stringify(objects);
      if (key === this.#applied) return;
      if (await this.#apply(objects, kinds, signal)) this.#applied = key;
    } finally {
      release(this.#cutShort);
      // Handed over while this round held it (members are told before the bucket's writes drain): the next holder reports them.
      if (shard && !shard.within(MUTATING[0], CLUSTER_SCOPED, shard.membership.state.writes)) {
        this.#standDown();
      }
    }
  }

  /**
   * The reference to the policies' owner, undefined when they have none; null when it cannot be
   * had (said once, noted in /readyz): no policy is applied, as one would be collected at once.
   */
  async #owner(signal: AbortSignal): Promise<OwnerReference | undefined | null> {
    const { owner, log } = this.#options;
    if (!owner) return undefined;
    try {
      const reference = await owner.reference(signal);
      if (this.#ownerless !== undefined) {
        log.info('admission policies owner found; applying them', { owner: owner.spec });
      }
      this.#ownerless = undefined;
      return reference;
    } catch (error) {
      if (!(error instanceof OwnerUnavailable) && !(error instanceof ResolveError) && !isForbidden(error)) throw error;
      const why = error instanceof Error ? error.message : String(error);
      if (this.#ownerless !== why) {
        log.error('admission policies not applied: their owner cannot be read', { owner: owner.spec, error });
      }
      this.#ownerless = why;
      this.#standDown();
      return null;
    }
  }

  /**
   * labeller's user name when the config protects keys (the protecting policies must let it
   * write them); asked once. Unknown, the protection is not rendered: said once, noted in /readyz.
   */
  async #whoAmI(config: Config, signal: AbortSignal): Promise<string | undefined> {
    const { identity, log } = this.#options;
    if (this.#identity !== undefined || !identity) return this.#identity;
    if (!protectsKeys(config)) return undefined;
    this.#identity = await identity(signal);
    if (this.#identity === undefined) {
      const why =
        'labeller cannot tell its own identity (the API server answers no SelfSubjectReview), and a policy that does not know it would refuse labeller its own writes';
      if (this.#unprotected !== why) log.error('keys not protected', { why });
      this.#unprotected = why;
    } else this.#unprotected = undefined;
    return this.#identity;
  }

  /** Another member applies the policies (or nobody may now): this one reports none, and applies all once it may again. */
  #standDown(): void {
    this.#policies = new Map();
    this.#applied = undefined;
  }

  /**
   * Notes whether the API server serves the mutating policies, said when that changes (the first
   * time: when it does not). The protecting ones are served from 1.30, which the chart requires.
   */
  #servedNow(): void {
    const { discovery, log } = this.#options;
    const served = servesPolicies(discovery.resources);
    if (!served && this.#served !== false) {
      log.info(
        'the API server does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicies (Kubernetes 1.36 and later do): no labels at create; the controller labels objects after their create (the protecting policies, served from 1.30, apply all the same)',
        { apiVersion: 'admissionregistration.k8s.io/v1' },
      );
      this.#standDown();
    }
    if (served && this.#served === false) log.info('the API server serves admission policies now; applying them');
    this.#served = served;
  }

  /**
   * Applies `objects` in order, each binding after its policy, then deletes the field manager's
   * others; false when a claim lapsed before it was all sent. Each apply is fenced by the version
   * read at the round's start: a write held in the network past this process's claim (its
   * successor's written meanwhile) fails with a 409 instead of putting an older config back, however
   * long it was held; a 409 here is another writer, and the round is tried again.
   */
  async #apply(objects: readonly PolicyObject[], kinds: PolicyKinds, signal: AbortSignal): Promise<boolean> {
    const { store, dryRun, discovery } = this.#options;
    const policies = new Map<string, Refusal | undefined>();
    const refusals = new Map<string, string>();
    const kept = new Set<string>();
    const versions = new Map((await store.list(kinds, signal)).map((o) => [describePolicy(o), o.resourceVersion]));
    for (const object of objects) {
      const described = describePolicy({ kind: object.kind, name: object.metadata.name });
      const policy = policyOf(object);
      // A binding of a policy refused would bind nothing (and its paramRef cannot be authorized without it).
      if (!isPolicy(object) && policies.get(policy) !== undefined) continue;
      if (!(await this.#mayWrite(signal))) return false;
      try {
        const resourceVersion = versions.get(described);
        const applied = await this.#writing(signal, () => store.apply(object, { dryRun, signal, resourceVersion }));
        kept.add(described);
        if (isPolicy(object)) policies.set(policy, undefined);
        this.#appliedOne(object, described, applied.metadata.resourceVersion);
      } catch (error) {
        if (isConflict(error)) throw new PolicyChanged(described, { cause: error });
        const message = refusalMessage(error);
        if (message === undefined) {
          // Not served any more (a downgrade): discovery looks again, and the round is retried.
          if (isNotFound(error)) discovery.notServed();
          throw error;
        }
        refusals.set(described, message);
        policies.set(policy, { object: described, message });
        this.#refusedOne(object, described, message);
      }
    }
    this.#refusals = refusals;
    this.#policies = policies;
    if (!(await this.#mayWrite(signal))) return false;
    await this.#deleteOthers(kept, kinds, signal);
    return true;
  }

  /** `write`, noting when `signal` aborts it under way: its bytes may have left, and may land after this process stopped. */
  async #writing<T>(signal: AbortSignal, write: () => Promise<T>): Promise<T> {
    try {
      return await write();
    } catch (error) {
      if (signal.aborted) this.#cutShort = true;
      throw error;
    }
  }

  /**
   * Whether the next write may be sent, checked as it is: the guard's Lease held (waited for),
   * leadership, and in a shard group the cluster-scoped objects' bucket still this member's. A
   * round that may not write ends; the next one (or the member taking the bucket) applies them.
   */
  async #mayWrite(signal: AbortSignal): Promise<boolean> {
    const { writable, claimed, shard, dryRun, log } = this.#options;
    if (dryRun) return true;
    const waiting = writable?.(this.#stop ?? signal);
    if (waiting) await waiting;
    const lapsed = claimed?.() ??
      (shard && !shard.writing(MUTATING[0], CLUSTER_SCOPED)
        ? "the cluster-scoped objects' shard bucket is no longer this member's"
        : undefined);
    if (lapsed) log.debug('admission policies not written: a claim lapsed', { reason: lapsed });
    return lapsed === undefined;
  }

  #appliedOne(object: PolicyObject, described: string, version: string | undefined): void {
    const { dryRun, log } = this.#options;
    const fields = { kind: object.kind, name: object.metadata.name };
    if (dryRun) log.info('admission policy would be applied (dry run)', { ...fields, object });
    // A no-op apply leaves the version as it was: only creates and changes are said.
    else if (this.#versions.get(described) !== version) log.info('admission policy applied', fields);
    this.#versions.set(described, version);
  }

  #refusedOne(object: PolicyObject, described: string, message: string): void {
    const { events, log } = this.#options;
    if (this.#refusals.get(described) === message) return;
    log.error('admission policy refused by the API server; the controller labels those objects after their create', {
      apiVersion: object.apiVersion,
      kind: object.kind,
      name: object.metadata.name,
      error: message,
    });
    events?.policyRefused(
      `${described} refused by the API server: ${message}; the controller labels those objects after their create`,
    );
  }

  /** Deletes the field manager's policies and bindings but `kept`. */
  async #deleteOthers(kept: ReadonlySet<string>, kinds: PolicyKinds, signal: AbortSignal): Promise<void> {
    const { store, dryRun, log } = this.#options;
    try {
      const deleted = await this.#writing(signal, () =>
        store.prune(kept, {
          kinds,
          dryRun,
          why: 'the config in force does not render it',
          log,
          signal,
        }));
      for (const object of deleted) this.#versions.delete(describePolicy(object));
      this.#cannotPrune = undefined;
    } catch (error) {
      if (!isForbidden(error)) throw error;
      if (this.#cannotPrune === undefined) {
        log.warn(
          'admission policies the config no longer renders cannot be removed; grant list and delete on mutatingadmissionpolicies and mutatingadmissionpolicybindings',
          { error },
        );
      }
      this.#cannotPrune = `those the config no longer renders cannot be removed: ${error.message}`;
    }
  }

  /** Waits for a change, or the resync period (jittered ±10 %); true when the period passed. */
  async #idle(signal: AbortSignal): Promise<boolean> {
    if (this.#dirty || signal.aborted) return false;
    const { resyncMs } = this.#options;
    const { promise, resolve } = Promise.withResolvers<boolean>();
    const wake = () => resolve(false);
    this.#wake = wake;
    signal.addEventListener('abort', wake, { once: true });
    const timer = resyncMs > 0 ? setTimeout(() => resolve(true), resyncMs * (0.9 + Math.random() * 0.2)) : undefined;
    try {
      return await promise;
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', wake);
      this.#wake = undefined;
    }
  }

  /** Says the rules left to the controller and the exclusions not served, each time they change. */
  #sayOnce(rules: readonly ControllerRule[], unmatched: readonly string[]): void {
    const said = JSON.stringify([rules, unmatched]);
    if (said === this.#said) return;
    this.#said = said;
    const { log } = this.#options;
    for (const rule of rules) log.info('left to the controller', { ...rule });
    for (const kind of unmatched) {
      log.warn('excluded kind not served by the API server (yet): the every-kind policy does not leave it out', {
        kind,
      });
    }
  }
}

/**
 * Why the API server refused to store a policy or binding, when it did: 422 (CEL it does not
 * take, a right it lacks on what the policy reads as params), 403 (no right on the policies),
 * 400. Each field's cause, without the value it echoes (a whole CEL expression) and the caret
 * drawing under it. Undefined for other failures, which pass.
 */
export function refusalMessage(error: unknown): string | undefined {
  if (!(error instanceof ApiError) || ![400, 403, 422].includes(error.status)) return undefined;
  const causes = error.causes.map(({ field, message = '' }) => {
    const first = message.replace(/^Invalid value: "(?:[^"\\]|\\.)*": /, '').split('\n')[0]!;
    return field ? `${field}: ${first}` : first;
  });
  return causes.length > 0 ? causes.join('; ') : error.message;
}
