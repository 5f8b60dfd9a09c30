// The findings of every cached object of the kinds running, kept by namespace and looked at again
// only where something changed: each kind says which of its objects changed, went, or may be due
// other labels (kinds/controller.ts onChange: the same marks the counts take), and those alone are
// planned again. A report is then the findings of its namespace, with no pass over the caches, so
// that a namespace of 10,000 objects where one changed costs one plan. What a namespace's report
// is about: its namespaced objects and its own Namespace object (which a shard member writes with
// the namespace, shard/shard.ts); the cluster-scoped objects of other kinds go under ''.
import { setImmediate } from 'node:timers/promises';
import type { LabelledKind } from '../kinds/controller.ts';
import type { LabelledObject } from '../labelling/object.ts';
import { type Finding, findingsOf, type ReportedKind } from './findings.ts';

/** What the tracker needs of a running kind. */
export type TrackedKind = ReportedKind & Pick<LabelledKind, 'onChange'> & {
  readonly controller: {
    readonly name: string;
    get(key: string): LabelledObject | undefined;
    keys(): Iterable<string>;
  };
};

interface Tracked {
  readonly stop: () => void;
  /** Keys to look at again; 'all': every cached key, and every key with findings. */
  changed: Set<string> | 'all';
  /** Keys whose findings wait on a cache of related objects: looked at again at each settle. */
  readonly waiting: Set<string>;
  /** The report (namespace, '' for cluster-scoped) of each key with findings. */
  readonly found: Map<string, string>;
}

export class FindingTracker {
  readonly #fieldManager: string;
  readonly #wake: () => void;
  readonly #kinds = new Map<TrackedKind, Tracked>();
  /** Findings by report namespace, then by `${controller}\n${key}`; only objects with some. */
  readonly #reports = new Map<string, Map<string, readonly Finding[]>>();
  /** Reports whose findings changed since `takeChanged`. */
  #dirty = new Set<string>();
  /** The findings kept, by result: counted as they are set, not at each read. */
  readonly #results = { fail: 0, warn: 0 };

  /** `wake`: called when something changed that a settle should look at. */
  constructor(fieldManager: string, wake: () => void) {
    this.#fieldManager = fieldManager;
    this.#wake = wake;
  }

  /** Follows `kinds` from now on: those new are looked at whole, those gone leave their findings. */
  track(kinds: Iterable<TrackedKind>): void {
    const running = new Set(kinds);
    for (const [kind, tracked] of this.#kinds) {
      if (running.has(kind)) continue;
      tracked.stop();
      this.#kinds.delete(kind);
      for (const [key, report] of tracked.found) this.#set(report, `${kind.controller.name}\n${key}`, []);
    }
    for (const kind of running) {
      if (this.#kinds.has(kind)) continue;
      const tracked: Tracked = {
        changed: 'all',
        waiting: new Set(),
        found: new Map(),
        stop: kind.onChange((key) => {
          if (key === undefined) tracked.changed = 'all';
          else if (tracked.changed !== 'all') tracked.changed.add(key);
          this.#wake();
        }),
      };
      this.#kinds.set(kind, tracked);
      this.#wake();
    }
  }

  /** Stops following every kind. */
  stop(): void {
    this.track([]);
  }

  /** Whether anything is marked to look at (a settle would plan something). */
  get pending(): boolean {
    return [...this.#kinds.values()].some((t) => t.changed === 'all' || t.changed.size > 0 || t.waiting.size > 0);
  }

  /** Plans every marked object, `sliceMs` at a time, yielding to the event loop in between. */
  async settle(sliceMs: number): Promise<void> {
    let deadline = performance.now() + sliceMs;
    for (const [kind, tracked] of this.#kinds) {
      const keys = tracked.changed === 'all'
        ? new Set([...kind.controller.keys(), ...tracked.found.keys()])
        : tracked.changed;
      tracked.changed = new Set();
      for (const key of tracked.waiting) keys.add(key);
      tracked.waiting.clear();
      let planned = 0;
      for (const key of keys) {
        // Gone from the tracker meanwhile (its kind stopped): what it found has left already.
        if (!this.#kinds.has(kind)) break;
        this.#look(kind, tracked, key);
        if (++planned % 64 === 0 && performance.now() > deadline) {
          await setImmediate();
          deadline = performance.now() + sliceMs;
        }
      }
    }
  }

  /** The reports whose findings changed since the last call. */
  takeChanged(): Set<string> {
    const dirty = this.#dirty;
    this.#dirty = new Set();
    return dirty;
  }

  /** The findings of the report of `namespace` ('' for cluster-scoped objects). */
  findings(namespace: string): Finding[] {
    return [...(this.#reports.get(namespace)?.values() ?? [])].flat();
  }

  /** How many findings are kept, by result. */
  results(): { readonly fail: number; readonly warn: number } {
    return { ...this.#results };
  }

  /** The reports that have findings now. */
  namespaces(): string[] {
    return [...this.#reports.keys()];
  }

  #look(kind: TrackedKind, tracked: Tracked, key: string): void {
    const object = kind.controller.get(key);
    const { findings, waiting } = object
      ? findingsOf(kind, object, this.#fieldManager)
      : { findings: [], waiting: false };
    if (waiting) tracked.waiting.add(key);
    const id = `${kind.controller.name}\n${key}`;
    const before = tracked.found.get(key);
    const report = object ? reportOf(kind, object) : before;
    if (before !== undefined && before !== report) this.#set(before, id, []);
    if (report === undefined) return;
    this.#set(report, id, findings);
    if (findings.length > 0) tracked.found.set(key, report);
    else tracked.found.delete(key);
  }

  /** Sets the findings of object `id` in `report`, marking the report when they changed. */
  #set(report: string, id: string, findings: readonly Finding[]): void {
    const objects = this.#reports.get(report);
    const old = objects?.get(id);
    if (findings.length === 0) {
      if (old === undefined) return;
      objects!.delete(id);
      if (objects!.size === 0) this.#reports.delete(report);
    } else {
      if (old !== undefined && JSON.stringify(old) === JSON.stringify(findings)) return;
      if (objects) objects.set(id, findings);
      else this.#reports.set(report, new Map([[id, findings]]));
    }
    for (const finding of old ?? []) this.#results[finding.result]--;
    for (const finding of findings) this.#results[finding.result]++;
    this.#dirty.add(report);
  }
}

/** The report an object's findings go in: its namespace; a Namespace's own, the namespace it is; '' for other cluster-scoped objects. */
function reportOf(kind: ReportedKind, object: LabelledObject): string {
  const { group, resource } = kind.resolved.resource;
  return group === '' && resource === 'namespaces' ? object.name : object.namespace;
}
