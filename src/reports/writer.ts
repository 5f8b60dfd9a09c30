// Keeps labeller's PolicyReports equal to its findings (--policy-reports): one report per
// namespace with findings, and a ClusterPolicyReport for the cluster-scoped objects, each
// server-side applied under the field manager, and deleted once it has nothing to say (an empty
// report in each of thousands of namespaces would say nothing Policy Reporter does not say by its
// absence, and cost an object each in etcd). Writes are batched: a change marks what the tracker
// looks at again, and a round runs at most every `intervalMs` (5 s), recomputing only the
// reports whose findings changed and writing only those whose body did, so that a namespace of
// 10,000 objects converging costs a write every few seconds at most, and none once converged.
//
// It runs only while this process may write, as the admission policies do (policies/applier.ts):
// a task of the manager while leading; each write after the field-manager guard lets it through,
// and not once leadership or the guard's Lease has lapsed; in a shard group, a namespace's report
// only by the member that writes that namespace's bucket (the cluster report: the bucket of
// cluster-scoped objects), which is the member whose cache holds its objects. A member that takes
// buckets over looks at every report again, and lists those already there anew. A round waits for
// the caches of a kind newly running to have listed (once, a minute at most), so that no result
// leaves a report for an object not listed yet. The first lists the reports already there,
// so that those of namespaces with nothing to say any more (fixed while labeller was away) go too.
import { createHash } from 'node:crypto';
import { isForbidden, isNotFound } from '../apimachinery/errors.ts';
import type { OwnerReference } from '../apimachinery/objects.ts';
import { ResolveError } from '../apimachinery/resolve.ts';
import { type ClusterOwner, OwnerUnavailable } from '../kube/owner.ts';
import type { Writable } from '../labelling/ports.ts';
import type { PolicyReportGauges } from '../metrics/metrics.ts';
import type { Shard } from '../shard/shard.ts';
import { Backoff } from '../util/backoff.ts';
import type { Logger } from '../util/log.ts';
import { sleep as realSleep } from '../util/sleep.ts';
import { type Report, reportName, reportOf } from './report.ts';
import { POLICY_REPORTS, type ReportApi, type ReportOnServer } from './store.ts';
import { FindingTracker, type TrackedKind } from './tracker.ts';

/** The least time between two rounds: each report is written at most once in it. */
export const REPORT_INTERVAL_MS = 5_000;
/** How often a round runs when nothing else wakes the writer: a kind started later, an owner made again. */
const RETRACK_MS = 30_000;

/** How long a round waits for a kind's caches to list before it goes on without that kind's objects. */
const SYNC_WAIT_MS = 60_000;

/** A running kind, and when its caches have listed. */
export type ListingKind = TrackedKind & { readonly controller: { readonly synced: Promise<void> } };

export interface ReportWriterOptions {
  readonly store: ReportApi;
  /** The kinds running now (the kind set's), asked at each round. */
  readonly kinds: () => Iterable<ListingKind>;
  readonly fieldManager: string;
  /** Have the API server check each report and store nothing; delete none. */
  readonly dryRun: boolean;
  /** Each write waits for it (the field-manager guard's Lease held). */
  readonly writable?: Writable | undefined;
  /** Why this process may not write now (leadership or the guard's Lease lapsed), asked as each write is sent. */
  readonly claimed?: (() => string | undefined) | undefined;
  /**
   * What the reports depend on (--policy-reports-owner), read at each round: the garbage collector
   * deletes them once it is gone (helm uninstall). Missing, nothing is written: it would be
   * collected at once.
   */
  readonly owner?: Pick<ClusterOwner, 'reference'> | undefined;
  /** This member's share in a shard group: it writes the reports of the namespaces whose buckets it writes. */
  readonly shard?: Shard | undefined;
  readonly intervalMs?: number | undefined;
  readonly maxResults?: number | undefined;
  /** Waits `ms` or until `signal` aborts, never rejecting: a fake clock's in tests. */
  readonly sleep?: ((ms: number, signal: AbortSignal) => Promise<void>) | undefined;
  readonly log: Logger;
}

export class ReportWriter {
  readonly #options: ReportWriterOptions;
  /** The reports on the API server, by namespace ('' for the cluster report). */
  readonly #onServer = new Map<string, ReportOnServer>();
  /** A digest of the body last applied, by namespace: the same body is not sent again. */
  readonly #written = new Map<string, string>();
  /** Reports to look at in the next round besides those whose findings changed: failed, or not this member's then. */
  #again = new Set<string>();
  #woken = false;
  /** Whether the reports already there have been listed. */
  #listed = false;
  #wake: (() => void) | undefined;
  /** A write was under way when this run's signal aborted it. */
  #cutShort = false;
  /** The run's `stop`: a wait for the guard's Lease ends with it, as a round told to stop starts no write. */
  #stop: AbortSignal | undefined;
  /** Why no report can be written (their CRDs not served, no right to, no owner): said once, noted in /readyz. */
  #blocked: string | undefined;
  /** The running kinds whose caches have listed, and those a round has waited for. */
  readonly #synced = new Set<ListingKind>();
  readonly #waitedFor = new Set<ListingKind>();
  /** The findings, while run() runs. */
  #tracker: FindingTracker | undefined;
  /** The reference to the reports' owner at the last round. */
  #owner: OwnerReference | undefined;

  constructor(options: ReportWriterOptions) {
    this.#options = options;
  }

  /** The config in force changed (kinds added or removed): look at them at once. */
  changed(): void {
    this.#woken = true;
    this.#wake?.();
  }

  /**
   * Keeps the reports until `stop` aborts, finishing the round under way; `writes` aborts the
   * writes on the wire: 'cut short' when a write was under way then. Each run is judged alone (one
   * after another when leadership or the guard's Lease is taken again).
   */
  async run(stop: AbortSignal, writes: AbortSignal = stop): Promise<void | 'cut short'> {
    const { shard, log } = this.#options;
    this.#cutShort = false;
    this.#stop = stop;
    const sleep = this.#options.sleep ?? realSleep;
    const intervalMs = this.#options.intervalMs ?? REPORT_INTERVAL_MS;
    const tracker = new FindingTracker(this.#options.fieldManager, () => this.changed());
    this.#tracker = tracker;
    const unsubscribe = shard?.membership.subscribe(({ taken }) => {
      if (taken.size === 0) return;
      // Another member wrote those namespaces meanwhile: what is there is listed again, and every
      // report looked at again, whatever this one last sent.
      for (const namespace of tracker.namespaces()) this.#again.add(namespace);
      this.#listed = false;
      this.#onServer.clear();
      this.#written.clear();
      this.changed();
    });
    const backoff = new Backoff({ initialMs: 1_000, maxMs: 60_000 });
    try {
      while (!stop.aborted) {
        let failure: unknown;
        try {
          const listed = await this.#listedKinds(stop, sleep);
          if (stop.aborted) break;
          await this.#listOnce(writes);
          tracker.track(listed);
          await tracker.settle(5);
          const owner = await this.#options.owner?.reference(writes);
          if (owner?.uid !== this.#owner?.uid) {
            // Another owner (made again): every report is applied again, to depend on it.
            this.#written.clear();
            for (const namespace of [...this.#onServer.keys(), ...tracker.namespaces()]) this.#again.add(namespace);
          }
          this.#owner = owner;
          const due = new Set([...tracker.takeChanged(), ...this.#again]);
          this.#again = new Set();
          failure = await this.#writeAll(due, tracker, writes);
        } catch (error) {
          failure = error;
        }
        if (stop.aborted) break;
        if (failure !== undefined) {
          const retryInMs = Math.round(backoff.next());
          this.#failed(failure, retryInMs);
          await sleep(retryInMs, stop);
          continue;
        }
        if (this.#blocked !== undefined) log.info('policy reports written again');
        this.#blocked = undefined;
        backoff.reset();
        // The batching: whatever changes from now on waits for the next round.
        await sleep(intervalMs, stop);
        if (!tracker.pending && this.#again.size === 0) await this.#idle(stop, sleep);
      }
    } finally {
      unsubscribe?.();
      tracker.stop();
      this.#tracker = undefined;
    }
    return this.#cutShort ? 'cut short' : undefined;
  }

  /**
   * The running kinds whose caches have listed. A kind that has not would take its objects'
   * findings out of their reports until it has (at start, after a reload that restarted it), so
   * the round waits for it, but once only and for SYNC_WAIT_MS at most: a kind whose list keeps
   * failing must not keep every report from being written.
   */
  async #listedKinds(signal: AbortSignal, sleep: (ms: number, signal: AbortSignal) => Promise<void>) {
    const running = [...this.#options.kinds()];
    for (const kind of [...this.#synced, ...this.#waitedFor]) {
      if (!running.includes(kind)) {
        this.#synced.delete(kind);
        this.#waitedFor.delete(kind);
      }
    }
    const waiting = running.filter((kind) => !this.#synced.has(kind) && !this.#waitedFor.has(kind));
    for (const kind of waiting) {
      this.#waitedFor.add(kind);
      kind.controller.synced.then(() => {
        this.#synced.add(kind);
        this.changed();
      }, () => {});
    }
    if (waiting.length > 0) {
      const done = new AbortController();
      await Promise.race([
        Promise.all(waiting.map((kind) => kind.controller.synced)),
        sleep(SYNC_WAIT_MS, AbortSignal.any([signal, done.signal])),
      ]).catch(() => {});
      done.abort();
    }
    return running.filter((kind) => this.#synced.has(kind));
  }

  /** The reports kept and the findings by result, for the labeller_policy_report* gauges; none before run(). */
  counts(): PolicyReportGauges {
    const cluster = this.#onServer.has('') ? 1 : 0;
    return {
      reports: this.#onServer.size - cluster,
      clusterReports: cluster,
      ...(this.#tracker?.results() ?? { fail: 0, warn: 0 }),
    };
  }

  /** Why no report is written now, for /readyz (not keeping it from being ready: labelling goes on). */
  notes(): string[] {
    return this.#blocked === undefined ? [] : [`policy reports: not written: ${this.#blocked}`];
  }

  /**
   * A round failed: a reason that lasts (the CRDs not served, a right missing) is said once and
   * noted in /readyz until a round succeeds; any other failure is said at each retry.
   */
  #failed(error: unknown, retryInMs: number): void {
    const { log } = this.#options;
    const blocked = error instanceof OwnerUnavailable || error instanceof ResolveError
      ? error.message
      : isNotFound(error)
      ? 'the API server does not serve wgpolicyk8s.io/v1alpha2 PolicyReports: install their CRDs (the chart ships them in crds/)'
      : isForbidden(error)
      ? 'this identity may not list, create, patch or delete policyreports and clusterpolicyreports (wgpolicyk8s.io): grant them (the chart does with policyReports.enabled)'
      : undefined;
    if (blocked === undefined) log.warn('policy reports not written yet; retrying', { error, retryInMs });
    else if (blocked !== this.#blocked) log.error(`policy reports not written: ${blocked}`, { error });
    this.#blocked = blocked;
  }

  /** Lists the reports already there, once: those with nothing to say any more are deleted by the first round. */
  async #listOnce(signal: AbortSignal): Promise<void> {
    if (this.#listed) return;
    for (const report of await this.#options.store.list(signal)) {
      // A report of another field manager's name under these labels is not this one's to delete.
      if (report.name !== reportName(this.#options.fieldManager)) continue;
      this.#onServer.set(report.namespace, report);
      this.#again.add(report.namespace);
    }
    this.#listed = true;
  }

  /** Writes the reports of `namespaces` that changed; the first failure that passes, if any (the rest are tried again). */
  async #writeAll(namespaces: ReadonlySet<string>, tracker: FindingTracker, signal: AbortSignal): Promise<unknown> {
    let failure: unknown;
    for (const namespace of namespaces) {
      if (signal.aborted) {
        this.#again.add(namespace);
        continue;
      }
      try {
        await this.#write(namespace, tracker, signal);
      } catch (error) {
        this.#again.add(namespace);
        if (signal.aborted) this.#cutShort = true;
        failure ??= error;
      }
    }
    return failure;
  }

  /** Applies the report of `namespace`, or deletes it when it has nothing to say. */
  async #write(namespace: string, tracker: FindingTracker, signal: AbortSignal): Promise<void> {
    const { store, shard, dryRun, fieldManager, maxResults, log } = this.#options;
    const key = this.#shardKey(namespace);
    const release = shard ? shard.hold(POLICY_REPORTS, key) : () => {};
    if (!release) {
      // Another member's namespace: written by it; this one looks again if it takes the bucket over.
      this.#written.delete(namespace);
      return;
    }
    let cutShort = false;
    try {
      const findings = tracker.findings(namespace);
      if (findings.length === 0) {
        this.#written.delete(namespace);
        const there = this.#onServer.get(namespace);
        if (!there) return;
        if (!(await this.#mayWrite(namespace, signal))) {
          this.#again.add(namespace);
          return;
        }
        await store.delete(there, { dryRun, signal });
        this.#onServer.delete(namespace);
        log.info(dryRun ? 'policy report would be deleted (dry run)' : 'policy report deleted: nothing to report', {
          namespace: namespace || undefined,
        });
        return;
      }
      const report: Report = reportOf(namespace, findings, { fieldManager, maxResults, owner: this.#owner });
      const body = createHash('sha256').update(JSON.stringify(report)).digest('base64');
      if (this.#written.get(namespace) === body) return;
      if (!(await this.#mayWrite(namespace, signal))) {
        this.#again.add(namespace);
        return;
      }
      try {
        await store.apply(report, { dryRun, signal });
      } catch (error) {
        // The namespace is going (its objects leave the caches next): nothing to report there.
        if (isNotFound(error) && namespace && error instanceof Error && error.message.includes('namespaces "')) {
          log.debug('policy report not written: its namespace is gone', { namespace });
          return;
        }
        cutShort = signal.aborted;
        throw error;
      }
      if (!this.#onServer.has(namespace)) {
        log.info(dryRun ? 'policy report would be created (dry run)' : 'policy report created', {
          namespace: namespace || undefined,
          results: report.results.length,
        });
      }
      this.#written.set(namespace, body);
      this.#onServer.set(namespace, { namespace, name: report.metadata.name, uid: undefined });
    } finally {
      release(cutShort);
    }
  }

  /** How a shard bucket names the report of `namespace`: as a cache key, namespace/name (name alone: cluster-scoped). */
  #shardKey(namespace: string): string {
    const name = reportName(this.#options.fieldManager);
    return namespace ? `${namespace}/${name}` : name;
  }

  /**
   * Whether the write may be sent, checked as it is: the guard's Lease held (waited for),
   * leadership, and in a shard group the namespace's bucket still this member's.
   */
  async #mayWrite(namespace: string, signal: AbortSignal): Promise<boolean> {
    const { writable, claimed, shard, dryRun, log } = this.#options;
    if (dryRun) return true;
    const waiting = writable?.(this.#stop ?? signal);
    if (waiting) await waiting;
    const lapsed = claimed?.() ??
      (shard && !shard.writing(POLICY_REPORTS, this.#shardKey(namespace))
        ? "the namespace's shard bucket is no longer this member's"
        : undefined);
    if (lapsed) log.debug('policy report not written: a claim lapsed', { namespace, reason: lapsed });
    return lapsed === undefined;
  }

  /** Waits for a change, or RETRACK_MS (a kind started since is looked at then). */
  async #idle(signal: AbortSignal, sleep: (ms: number, signal: AbortSignal) => Promise<void>): Promise<void> {
    if (this.#woken || signal.aborted) {
      this.#woken = false;
      return;
    }
    const done = new AbortController();
    this.#wake = () => done.abort();
    try {
      await sleep(RETRACK_MS, AbortSignal.any([signal, done.signal]));
    } finally {
      this.#wake = undefined;
      this.#woken = false;
    }
  }
}
