// Keeping one object's labels right. The desired labels are rendered from the config; if the
// object already carries them and labeller owns no label it no longer wants, nothing is sent.
// Otherwise one server-side apply sends the whole desired set: keys labeller owned and left out
// are removed by the API server where no other manager also owns them. A label whose template
// reads a related object that cannot be read now is held: kept as it is when labeller owns it,
// not added otherwise.
import type { Logger } from '../util/log.ts';
import type { ConflictPolicy } from './config.ts';
import { type LabelOperation, labelPatch } from './labelpatch.ts';
import { validateLabelValue } from './labels.ts';
import type { LabelledObject } from './object.ts';
import type { RelatedView } from './related.ts';
import type { Template, TemplateContext } from './template.ts';

/** The kind being reconciled, for apply bodies and templates. */
export interface KindInfo {
  readonly apiVersion: string;
  readonly kind: string;
  readonly resource: string;
  readonly group: string;
}

export interface ApplyTarget {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly namespace: string;
  /** Guards the apply: it fails instead of recreating an object deleted meanwhile. */
  readonly uid: string;
}

/** What an apply answers: the object's labels after it, and the resourceVersion it has now. */
export interface Applied {
  readonly labels: Readonly<Record<string, string>>;
  readonly resourceVersion: string;
}

/** The only access the reconciler needs: apply a label set, answer the object after it. */
export interface LabelClient {
  applyLabels(
    target: ApplyTarget,
    labels: Readonly<Record<string, string>>,
    options: { readonly force: boolean; readonly dryRun: boolean; readonly signal?: AbortSignal | undefined },
  ): Promise<Applied>;
}

/** Another field manager owns a label with a different value (a 409 from server-side apply). */
export class LabelConflict extends Error {
  override readonly name = 'LabelConflict';
  /** The contested label keys and their owners, as far as the API server named them. */
  readonly owners: readonly { readonly key: string; readonly manager: string }[];

  constructor(message: string, owners: LabelConflict['owners'] = [], options?: ErrorOptions) {
    super(message, options);
    this.owners = owners;
  }
}

/** The object no longer exists (or was replaced by one with another uid). */
export class ObjectGone extends Error {
  override readonly name = 'ObjectGone';
}

/** `waiting`: a related object its labels read is not in its cache yet; the cache's change brings the object back. */
export type Outcome = 'unchanged' | 'patched' | 'conflict' | 'invalid' | 'gone' | 'waiting';

export interface ReconcilerOptions {
  readonly kind: KindInfo;
  readonly labels: ReadonlyMap<string, Template>;
  readonly conflicts: ConflictPolicy;
  readonly dryRun: boolean;
  readonly client: LabelClient;
  readonly log: Logger;
  /** The related objects templates read, from their caches (see related.ts). */
  readonly related?: ((object: LabelledObject) => RelatedView) | undefined;
}

/** A label left to another field manager (conflicts: skip). */
export interface ContestedLabel {
  readonly key: string;
  readonly wanted: string;
  /** Its value on the object, when the cache knows it. */
  readonly value?: string;
  /** The field manager that owns it, when the API server said. */
  readonly manager?: string;
}

export interface Result {
  readonly outcome: Outcome;
  /** The label change as JSON Patch operations on the object (empty when unchanged). */
  readonly patch: readonly LabelOperation[];
  /** Labels left alone under `skip` (also when others were patched); absent when none. */
  readonly contested?: readonly ContestedLabel[];
  /** Why a label value cannot be rendered (outcome `invalid`). */
  readonly problem?: string;
  /** The object's resourceVersion after labeller's own write (outcome `patched`, not in a dry run). */
  readonly written?: string;
}

/** See Reconciler.plan; `problem` when a label value cannot be rendered for this object. */
export type Plan =
  | { readonly problem: string }
  | {
    /** Every configured label, rendered for this object. */
    readonly rendered: ReadonlyMap<string, string>;
    /** What an apply would send: `rendered` less the contested labels under `skip`. */
    readonly desired: ReadonlyMap<string, string>;
    readonly contested: readonly string[];
    readonly stale: readonly string[];
    readonly missing: readonly string[];
    /** Labels held because a related object they read cannot be read now. */
    readonly held: readonly string[];
    /** Some of them only until a cache has listed (not for good: a kind not followed or refused). */
    readonly waiting: boolean;
  };

export class Reconciler {
  readonly #options: ReconcilerOptions;

  constructor(options: ReconcilerOptions) {
    this.#options = options;
  }

  /**
   * What converging `object` takes, from the cache alone: the labels to apply, the keys another
   * manager set to another value, labeller's keys to drop and the labels to add or change. The
   * object needs an apply exactly when `stale` or `missing` is not empty.
   */
  plan(object: LabelledObject): Plan {
    const render = this.#render(object);
    if (typeof render === 'string') return { problem: render };
    const { rendered, held, waiting } = render;
    // A label set to another value by someone else: under `force` it is taken over (and stays
    // in `missing`), under `skip` it stays theirs.
    const contested = [...rendered.keys()].filter((key) =>
      Object.hasOwn(object.labels, key) && object.labels[key] !== rendered.get(key) && !object.owned.includes(key)
    );
    const desired = new Map(rendered);
    if (this.#options.conflicts === 'skip') { for (const key of contested) desired.delete(key); }
    const stale = object.owned.filter((key) => !desired.has(key));
    const missing = [...desired.keys()].filter((key) => object.labels[key] !== desired.get(key));
    return { rendered, desired, contested, stale, missing, held, waiting };
  }

  /**
   * Converges one object; throws only for failures worth retrying (API errors, outages).
   * `signal` aborts the write (this process may no longer write).
   */
  async reconcile(object: LabelledObject, signal?: AbortSignal): Promise<Result> {
    const { kind, client, conflicts, dryRun } = this.#options;
    const { log } = this.#options;
    // The object's fields on each line, rather than a child logger per reconcile: most reconciles log nothing.
    const at = { namespace: object.namespace || undefined, name: object.name };

    // Being deleted: a label written now would be pointless, and may race the deletion.
    if (object.deleting) return { outcome: 'gone', patch: [] };
    const plan = this.plan(object);
    if ('problem' in plan) {
      log.error('label value invalid for this object; not labelling it', { ...at, problem: plan.problem });
      return { outcome: 'invalid', patch: [], problem: plan.problem };
    }
    // A label would be held only until a cache lists, or an owner shows up in its cache (created a
    // moment ago, or deleted with its dependents): applying the rest now would take a second apply
    // then, or write to an object the garbage collector is about to delete.
    if (plan.waiting) {
      log.debug('waiting for a related object before labelling', at);
      return { outcome: 'waiting', patch: [] };
    }
    const { rendered, desired, stale, missing } = plan;
    // Under `skip`, a label another manager set to another value stays theirs.
    const contested = conflicts === 'skip' ? plan.contested : [];
    const left = contested.map((key): ContestedLabel => ({
      key,
      wanted: rendered.get(key) ?? '',
      value: object.labels[key] ?? '',
    }));
    const reported = left.length > 0 ? { contested: left } : {};
    if (contested.length > 0) {
      log.warn('label set by another manager; left alone (conflicts: skip)', {
        ...at,
        labels: contested.map((key) => `${key}=${object.labels[key]}`),
      });
    }
    if (stale.length === 0 && missing.length === 0) {
      return { outcome: contested.length > 0 ? 'conflict' : 'unchanged', patch: [], ...reported };
    }

    const target = {
      apiVersion: kind.apiVersion,
      kind: kind.kind,
      name: object.name,
      namespace: object.namespace,
      uid: object.uid,
    };
    let after: Applied;
    try {
      after = await client.applyLabels(target, Object.fromEntries(desired), {
        force: conflicts === 'force',
        dryRun,
        signal,
      });
    } catch (error) {
      if (error instanceof ObjectGone) {
        log.debug('object gone before its labels were applied', at);
        return { outcome: 'gone', patch: [] };
      }
      if (error instanceof LabelConflict) {
        log.warn('label conflict with another field manager; left alone (conflicts: skip)', { ...at, error });
        const owned = error.owners.map(({ key, manager }): ContestedLabel => ({
          key,
          wanted: desired.get(key) ?? '',
          manager,
        }));
        return { outcome: 'conflict', patch: [], contested: [...left, ...owned] };
      }
      throw error;
    }
    const patch = labelPatch(object.labels, after.labels);
    // A dry run's plan is its output; writes are logged per object at debug (the controller sums them up).
    if (dryRun) log.info('would apply labels (dry run)', { ...at, patch });
    else log.debug('labels applied', { ...at, patch });
    return { outcome: 'patched', patch, ...reported, ...(dryRun ? {} : { written: after.resourceVersion }) };
  }

  /**
   * The desired labels for this object, with the held ones at their current value where labeller
   * owns them; or the reason one of them cannot be rendered.
   */
  #render(object: LabelledObject): { rendered: Map<string, string>; held: string[]; waiting: boolean } | string {
    const { kind, labels } = this.#options;
    const view = this.#options.related?.(object);
    const context: TemplateContext = {
      name: object.name,
      namespace: object.namespace,
      kind: kind.kind,
      resource: kind.resource,
      group: kind.group,
      apiVersion: kind.apiVersion,
      uid: object.uid,
      labels: object.labels,
      annotations: object.annotations,
      related: view?.objects,
    };
    const desired = new Map<string, string>();
    const held: string[] = [];
    let waiting = false;
    for (const [key, template] of labels) {
      if (view && view.held.size > 0) {
        const why = template.related.map((read) => view.held.get(read.relation)).find((reason) => reason);
        if (why) {
          held.push(key);
          waiting ||= why === 'pending';
          const current = object.labels[key];
          if (current !== undefined && object.owned.includes(key)) desired.set(key, current);
          continue;
        }
      }
      const value = template.constantValue ?? template.render(context);
      // A variable without a value (a missing label, no owner): the label is not wanted, and
      // removed if labeller owned it.
      if (value === undefined) continue;
      const problem = template.constantValue === undefined ? validateLabelValue(value) : undefined;
      if (problem) return `label ${key}: "${template.source}" rendered "${value}": ${problem}`;
      desired.set(key, value);
    }
    return { rendered: desired, held, waiting };
  }
}
