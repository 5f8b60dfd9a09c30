// labeller's Kubernetes Events: a label left to another manager (LabelConflict) or a value that
// cannot be rendered (InvalidLabelValue) on the object concerned; a kind whose list or watch is
// refused (KindForbidden, KindNotFound) on labeller's own Pod, when it runs in one (outside a pod
// that stays in the log), as is a config change the live reload rejected (ConfigRejected) and an
// admission policy the API server refused (AdmissionPolicyRefused). All go through the
// aggregating, rate-limited recorder.
import { FIGHT_WINDOW_MS } from '../labelling/fights.ts';
import { hostname } from 'node:os';
import type { KubeClient } from '../kube/client.ts';
import { isForbidden, isNotFound } from '../apimachinery/errors.ts';
import { EventsApi } from '../kube/events.ts';
import type { EventContent, ObjectReference } from '../apimachinery/objects.ts';
import type { MetadataField } from '../config/model.ts';
import type { Result } from '../labelling/reconcile.ts';
import type { Logger } from '../util/log.ts';
import { EventRecorder } from '../runtime/recorder.ts';
import { sleep } from '../util/sleep.ts';

/** reportingController of every Event. */
export const REPORTING_CONTROLLER = 'labeller';

/** Event reasons of related kinds that cannot be read, by why. */
const RELATED_REASONS: Readonly<Record<string, string>> = {
  'not-followed': 'OwnerKindNotFollowed',
  'not-served': 'OwnerKindNotServed',
  forbidden: 'RelatedKindForbidden',
};

/** How long pending Events may take to go out at exit (within the rate limit). */
export const EVENTS_DRAIN_MS = 2_000;

export interface EventsIdentity {
  /** reportingInstance: the Pod's name, else the host's. */
  readonly instance: string;
  /** labeller's own Pod, from the downward API (POD_NAME, POD_NAMESPACE, POD_UID); undefined outside a pod. */
  readonly pod: ObjectReference | undefined;
}

/** Who reports, from the environment the chart and the sidecar example set through the downward API. */
export function eventsIdentity(env: Readonly<Record<string, string | undefined>>): EventsIdentity {
  const { POD_NAME: name, POD_NAMESPACE: namespace, POD_UID: uid } = env;
  const pod = name && namespace ? { apiVersion: 'v1', kind: 'Pod', name, namespace, uid } : undefined;
  return { instance: (name || hostname()).slice(0, 128), pod };
}

/** The object's part of a reference; the kind's part is the controller's. */
export type ObjectIdentity = Pick<ObjectReference, 'name' | 'namespace' | 'uid'>;

/** The Events of one controller: its objects' outcomes and its watch's refusals. */
export interface KindEvents {
  reconciled(object: ObjectIdentity, result: Result): void;
  watchFailed(error: Error): void;
}

export class LabellerEvents {
  readonly #recorder: EventRecorder;
  readonly #pod: ObjectReference | undefined;

  constructor(client: KubeClient, identity: EventsIdentity, log: Logger) {
    const sink = new EventsApi(client, { controller: REPORTING_CONTROLLER, instance: identity.instance });
    this.#recorder = new EventRecorder({
      sink,
      clock: { now: Date.now, sleep },
      log: log.child({ component: 'events' }),
    });
    this.#pod = identity.pod;
  }

  run(signal: AbortSignal): Promise<void> {
    return this.#recorder.run(signal);
  }

  drain(): Promise<void> {
    return this.#recorder.drain(EVENTS_DRAIN_MS);
  }

  /** A config file change rejected by the live reload, on labeller's Pod (outside a pod, the log has it). */
  configRejected(note: string): void {
    this.#onPod('ConfigRejected', 'Reloading', note);
  }

  /** An admission policy or binding the API server refused to store (its CEL, or the rights it needs), on labeller's Pod. */
  policyRefused(note: string): void {
    this.#onPod('AdmissionPolicyRefused', 'Applying', note);
  }

  /** Shard members that have run another config than the group's newest for too long, on labeller's Pod. */
  shardConfigSplit(note: string): void {
    this.#onPod('ShardConfigSplit', 'Sharding', note);
  }

  /** A source of truth that cannot be read (its last good content stays), on labeller's Pod. */
  sourceFailed(note: string): void {
    this.#onPod('SourceFailed', 'Loading', note);
  }

  /** Related objects templates read that labeller cannot read (a kind not followed, not served, forbidden), on labeller's Pod. */
  relatedUnreadable(reason: string, note: string): void {
    this.#onPod(RELATED_REASONS[reason] ?? 'RelatedUnreadable', 'Labelling', note);
  }

  /** A Warning on labeller's own Pod, when it runs in one. */
  #onPod(reason: string, action: string, note: string): void {
    if (this.#pod) {
      this.#recorder.record({ regarding: this.#pod, type: 'Warning', reason, action, note: note.slice(0, 1024) });
    }
  }

  forKind(controller: string, kind: Pick<ObjectReference, 'apiVersion' | 'kind'>): KindEvents {
    return {
      reconciled: (object, result) => {
        // Most reconciles call for no Event: then nothing is built, on the path every object takes.
        if (
          !result.contested?.length && !result.fights?.length && !result.retaken?.length && !result.problems?.length
        ) {
          return;
        }
        const { name, namespace, uid } = object;
        const regarding = { apiVersion: kind.apiVersion, kind: kind.kind, name, namespace, uid };
        for (const event of outcomeEvents(regarding, result)) this.#recorder.record(event);
      },
      watchFailed: (error) => {
        const event = this.#pod && refusalEvent(this.#pod, controller, error);
        if (event) this.#recorder.record(event);
      },
    };
  }
}

/** The Events a reconcile's result calls for. */
export function outcomeEvents(regarding: ObjectReference, result: Result): EventContent[] {
  const events: EventContent[] = [];
  // One Event per map, so a conflict over annotations has a reason of its own.
  for (const field of ['labels', 'annotations'] as const) {
    const contested = result.contested?.filter((c) => c.field === field) ?? [];
    if (contested.length === 0) continue;
    const keys = contested.map((c) =>
      `${field === 'labels' ? 'label' : 'annotation'} ${c.key}${c.value === undefined ? '' : ` is "${c.value}"`}${
        c.manager ? `, owned by field manager "${c.manager}"` : ''
      }; labeller wants "${c.wanted}"`
    );
    events.push({
      regarding,
      type: 'Warning',
      reason: field === 'labels' ? 'LabelConflict' : 'AnnotationConflict',
      action: 'Labelling',
      note: `left to another field manager (conflicts: skip): ${keys.join('; ')}`.slice(0, 1024),
    });
  }
  for (const fight of result.fights ?? []) {
    const what = fight.field === 'labels' ? 'label' : 'annotation';
    events.push({
      regarding,
      type: 'Warning',
      reason: 'LabelFight',
      action: 'Labelling',
      note: `${what} ${fight.key} was taken back by ${
        fight.manager ? `field manager "${fight.manager}"` : 'another field manager'
      } each time labeller set it (${fight.retakes} times in ${FIGHT_WINDOW_MS / 60_000} min); left to it for ${
        Math.round(fight.backoffMs / 1000)
      } s, then retaken once. Make the other tool leave this ${what} to labeller (docs/operations.md, Fights)`
        .slice(0, 1024),
    });
  }
  for (const { field, key, manager } of result.retaken ?? []) {
    const what = field === 'labels' ? 'label' : 'annotation';
    events.push({
      regarding,
      type: 'Warning',
      reason: 'LabelRetaken',
      action: 'Labelling',
      note: `${what} ${key} was changed by ${
        manager ? `field manager "${manager}"` : 'another field manager'
      }; labeller put its value back, as it does each time (it backs off only from fights.yieldTo). Change it in labeller's config, not on the object (docs/operations.md, Fights)`
        .slice(0, 1024),
    });
  }
  for (const problem of result.problems ?? []) {
    events.push({
      regarding,
      type: 'Warning',
      reason: problem.field === 'annotations' ? 'InvalidAnnotations' : 'InvalidLabelValue',
      action: 'Labelling',
      note: `${problem.problem}; ${
        problem.key === undefined ? 'the object is not labelled' : 'that key is held, the rest applied'
      }`.slice(0, 1024),
    });
  }
  return events;
}

/** A LabelFight Event's note read back (`labeller explain`): the key, the manager and the backoff it names. */
export function readFightNote(
  note: string,
):
  | { readonly field: MetadataField; readonly key: string; readonly manager?: string; readonly backoffMs: number }
  | undefined {
  const match =
    /^(label|annotation) (\S+) was taken back by (?:field manager "([^"]*)"|another field manager) .*left to it for (\d+) s/
      .exec(note);
  if (!match) return undefined;
  const [, what, key = '', manager, seconds] = match;
  return {
    field: what === 'label' ? 'labels' : 'annotations',
    key,
    ...(manager === undefined ? {} : { manager }),
    backoffMs: Number(seconds) * 1000,
  };
}

/** A list or watch refused for good (403, 404) as an Event on labeller's Pod; one series per kind. */
export function refusalEvent(pod: ObjectReference, controller: string, error: Error): EventContent | undefined {
  if (!isForbidden(error) && !isNotFound(error)) return undefined;
  return {
    regarding: pod,
    type: 'Warning',
    reason: isForbidden(error) ? 'KindForbidden' : 'KindNotFound',
    action: `Watching ${controller}`.slice(0, 128),
    note: `${controller}: ${error.message}`,
  };
}
