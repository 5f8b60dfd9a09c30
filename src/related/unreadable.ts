// Related kinds that templates read and labeller cannot read: an owner kind not followed or not
// served, a related resource it may not list. Each is said once, where people look (a log line
// with the grant or config to add, a Warning Event on labeller's Pod), and stays listed
// (labeller_related_unreadable, a line in /readyz) until it can be read; labels that read it are
// held meanwhile.
import type { UnreadableKindGauge } from '../metrics/metrics.ts';
import type { Logger } from '../util/log.ts';
import type { LabellerEvents } from '../events/labellerevents.ts';

/** Why related objects cannot be read: a label of the metric. */
export type UnreadableReason = 'not-followed' | 'not-served' | 'forbidden';

export class UnreadableKinds {
  readonly #log: Logger;
  readonly #events: LabellerEvents | undefined;
  /** By kind (`Node.v1`, `replicasets.apps/shop`, an ownerKinds entry): why, and the line for /readyz. */
  readonly #kinds = new Map<string, { readonly reason: UnreadableReason; readonly note: string }>();

  constructor(log: Logger, events: LabellerEvents | undefined) {
    this.#log = log;
    this.#events = events;
  }

  /** Says once that `kind` cannot be read, and why; `fields` go on the log line and the notes. */
  report(
    kind: string,
    reason: UnreadableReason,
    message: string,
    fields: Readonly<Record<string, unknown>>,
    error?: unknown,
  ): void {
    if (this.#kinds.has(kind)) return;
    const detail = Object.entries(fields).map(([name, value]) => `${name} ${String(value)}`).join(', ');
    const note = `${message} (${detail}); labels that read it are held`;
    this.#kinds.set(kind, { reason, note });
    this.#log.warn(`${message}; labels that read it are held`, { ...fields, ...(error ? { error } : {}) });
    this.#events?.relatedUnreadable(reason, note);
  }

  /** `kind` can be read now; answers why it could not, if it was reported. */
  readable(kind: string): UnreadableReason | undefined {
    const reported = this.#kinds.get(kind);
    this.#kinds.delete(kind);
    return reported?.reason;
  }

  /** The /readyz lines. */
  notes(): string[] {
    return [...this.#kinds.values()].map((kind) => kind.note);
  }

  /** The labeller_related_unreadable samples. */
  list(): UnreadableKindGauge[] {
    return [...this.#kinds].map(([kind, { reason }]) => ({ kind, reason }));
  }
}
