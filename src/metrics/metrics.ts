// Prometheus metrics, named as controller-runtime and client-go name them so existing
// dashboards work, plus labeller's own, and the standard process_* / nodejs_* metrics
// (processmetrics.ts); prometheus.ts keeps them and writes the exposition. (Over 300 lines: every metric is
// declared here, in one place, so its names, help texts and labels read as one list.)
import type { RequestObserver } from '../kube/client.ts';
import { registerProcessMetrics } from './processmetrics.ts';
import { Counter, Gauge, Histogram, Registry } from './prometheus.ts';
import type { ControllerMetrics } from '../runtime/controller.ts';
import type { InformerMetrics } from '../runtime/informer.ts';

/** Buckets of controller-runtime's reconcile and workqueue histograms. */
// deno-fmt-ignore
const RECONCILE_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 1.25, 1.5,
  1.75, 2, 2.5, 3, 3.5, 4, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
];
const QUEUE_BUCKETS = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1, 10, 100, 1000];

/** Every `result` of controller_runtime_reconcile_total: a forgotten controller's series are removed by their labels. */
const RESULTS: Readonly<Record<Parameters<ControllerMetrics['reconciled']>[0], true>> = { success: true, error: true };

/** A metric whose series can be removed by their labels. */
interface Removable {
  remove(labels: Record<string, string>): void;
}

/** The two maps of metadata labeller writes. */
export type Written = 'labels' | 'annotations';
const FIELDS: readonly Written[] = ['labels', 'annotations'];

export interface LabelMetrics {
  applied(field: Written, count: number): void;
  removed(field: Written, count: number): void;
  conflict(): void;
  /** A key another manager took back again and again, now left to it for a while. */
  fight(field: Written): void;
  /** A key a manager labeller does not yield to changed, put back. */
  retake(field: Written, manager: string | undefined): void;
}

/**
 * The most field managers named in labeller_retakes_total; others are counted as `other`. A field
 * manager's name is the client's choice: a tenant could make a series per request.
 */
export const RETAKE_MANAGERS_MAX = 20;

/** What a controller's cache holds, read at each scrape. */
export interface ObjectGauges {
  readonly managed: number;
  readonly pending: number;
  readonly conflicts: number;
  readonly held: number;
  /** Per configured label: objects counted, and those carrying it with its desired value. */
  readonly coverage?: readonly { readonly key: string; readonly objects: number; readonly covered: number }[];
}

/** A source of truth's state, as sources/sourceset.ts reports it. */
export interface SourceGauges {
  readonly name: string;
  readonly up: boolean;
  readonly lastSuccessMs: number | undefined;
  readonly bytes: number;
  readonly keys: number;
}

/** A kind of the every-kind entry skipped, and the verbs labeller may not use on it, as kinds/access.ts reports it. */
export interface SkippedKindGauge {
  /** As RBAC names it: `deployments.apps`. */
  readonly resource: string;
  /** The verbs it lacks somewhere, comma-separated: `patch`, `list,watch,patch`. */
  readonly verbs: string;
}

/** This member's share of a shard group (shard/membership.ts), read at each scrape. */
export interface ShardGauges {
  /** Live members seen, itself included. */
  readonly members: number;
  /** Buckets of the namespace hash space (of shard/ranges.ts's BUCKETS) it caches and writes. */
  readonly keeps: number;
  readonly writes: number;
  readonly buckets: number;
  /** Its ranges as people read them (bucket numbers: `0-63,…`). */
  readonly ranges: string;
  /** Per cache with a partition: filtered by the API server (`server`) or here (`client`). */
  readonly filtering: readonly { readonly controller: string; readonly filtering: string }[];
  /** Members, itself included, on another config than the group's newest for longer than the skew allowed. */
  readonly staleConfigs: number;
}

/** labeller's admission policies (--admission-policies), as policies/applier.ts reports them: applied, or refused by the API server. */
export interface AdmissionPolicyGauges {
  readonly applied: number;
  readonly refused: number;
}

/** labeller's PolicyReports (--policy-reports), as reports/writer.ts keeps them. */
export interface PolicyReportGauges {
  /** PolicyReports (one a namespace) on the API server this process keeps. */
  readonly reports: number;
  /** The ClusterPolicyReport, when this process keeps one: 0 or 1. */
  readonly clusterReports: number;
  /** Findings of the objects this process caches, listed in a report or only counted. */
  readonly fail: number;
  readonly warn: number;
}

/** A related kind that cannot be read, and why, as related/unreadable.ts reports it. */
export interface UnreadableKindGauge {
  readonly kind: string;
  readonly reason: string;
}

export class Metrics {
  readonly registry = new Registry();
  readonly #reconcileTotal;
  readonly #reconcileErrors;
  readonly #reconcileTime;
  readonly #activeWorkers;
  readonly #maxConcurrent;
  readonly #depth;
  readonly #adds;
  readonly #queueDuration;
  readonly #workDuration;
  readonly #retries;
  readonly #requests;
  readonly #leader;
  readonly #cached;
  readonly #applied: Record<Written, Counter>;
  readonly #removed: Record<Written, Counter>;
  readonly #conflicts;
  readonly #fights;
  readonly #retakes;
  /** The field managers named in labeller_retakes_total so far. */
  readonly #retakers = new Set<string>();
  readonly #watchRestarts;
  readonly #relists;
  readonly #objectSources = new Map<string, () => Promise<ObjectGauges>>();
  readonly #reloads;
  readonly #reloadSuccessful;
  #unreadable: () => readonly UnreadableKindGauge[] = () => [];
  #skipped: () => readonly SkippedKindGauge[] = () => [];
  #sources: () => readonly SourceGauges[] = () => [];
  #ready: () => boolean = () => false;
  #shard: (() => ShardGauges) | undefined;
  #admissionPolicies: (() => AdmissionPolicyGauges) | undefined;
  #policyReports: (() => PolicyReportGauges) | undefined;

  constructor() {
    const registers = [this.registry];
    registerProcessMetrics(this.registry);
    const counter = (name: string, help: string, labelNames: string[]) =>
      new Counter({ name, help, labelNames, registers });
    const gauge = (name: string, help: string, labelNames: string[]) =>
      new Gauge({ name, help, labelNames, registers });
    const histogram = (name: string, help: string, labelNames: string[], buckets: number[]) =>
      new Histogram({ name, help, labelNames, buckets, registers });

    this.#reconcileTotal = counter(
      'controller_runtime_reconcile_total',
      'Total number of reconciliations per controller',
      ['controller', 'result'],
    );
    this.#reconcileErrors = counter(
      'controller_runtime_reconcile_errors_total',
      'Total number of reconciliation errors per controller',
      ['controller'],
    );
    this.#reconcileTime = histogram(
      'controller_runtime_reconcile_time_seconds',
      'Length of time per reconciliation per controller',
      ['controller'],
      RECONCILE_BUCKETS,
    );
    this.#activeWorkers = gauge(
      'controller_runtime_active_workers',
      'Number of currently used workers per controller',
      ['controller'],
    );
    this.#maxConcurrent = gauge(
      'controller_runtime_max_concurrent_reconciles',
      'Maximum number of concurrent reconciles per controller',
      ['controller'],
    );
    this.#depth = gauge('workqueue_depth', 'Current depth of workqueue', ['controller', 'name']);
    this.#adds = counter('workqueue_adds_total', 'Total number of adds handled by workqueue', ['controller', 'name']);
    this.#queueDuration = histogram(
      'workqueue_queue_duration_seconds',
      'How long in seconds an item stays in workqueue before being requested',
      ['controller', 'name'],
      QUEUE_BUCKETS,
    );
    this.#workDuration = histogram(
      'workqueue_work_duration_seconds',
      'How long in seconds processing an item from workqueue takes',
      ['controller', 'name'],
      QUEUE_BUCKETS,
    );
    this.#retries = counter('workqueue_retries_total', 'Total number of retries handled by workqueue', [
      'controller',
      'name',
    ]);
    this.#requests = counter(
      'rest_client_requests_total',
      'Number of HTTP requests, partitioned by status code, method, and host',
      ['code', 'method', 'host'],
    );
    this.#leader = gauge(
      'leader_election_master_status',
      'Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master',
      ['name'],
    );
    this.#cached = gauge('labeller_objects_cached', 'Objects in the cache per controller', ['controller']);
    this.#applied = {
      labels: counter('labeller_labels_applied_total', 'Labels added or changed on objects', ['controller']),
      annotations: counter('labeller_annotations_applied_total', 'Annotations added or changed on objects', [
        'controller',
      ]),
    };
    this.#removed = {
      labels: counter('labeller_labels_removed_total', 'Labels removed from objects because they left the config', [
        'controller',
      ]),
      annotations: counter(
        'labeller_annotations_removed_total',
        'Annotations removed from objects because they left the config',
        ['controller'],
      ),
    };
    this.#conflicts = counter(
      'labeller_conflicts_total',
      'Labels or annotations left alone because another field manager owns them (conflicts: skip)',
      ['controller'],
    );
    this.#fights = counter(
      'labeller_fights_total',
      'Keys another field manager took back again and again, each then left to it for a backoff (conflicts: force)',
      ['controller', 'field'],
    );
    this.#retakes = counter(
      'labeller_retakes_total',
      `Keys put back after a field manager labeller does not yield to changed them (fights.yieldTo), by manager (the first ${RETAKE_MANAGERS_MAX} named, then "other")`,
      ['controller', 'field', 'manager'],
    );
    this.#watchRestarts = counter('labeller_watch_restarts_total', 'Watches that failed and were restarted', [
      'controller',
    ]);
    this.#relists = counter('labeller_relists_total', 'Full lists after the initial one (expired resource versions)', [
      'controller',
    ]);
    this.#reloads = counter(
      'labeller_config_reloads_total',
      'Config file changes seen, by result: success (applied) or failure (rejected; the last good config stays)',
      ['result'],
    );
    for (const result of ['success', 'failure']) this.#reloads.inc({ result }, 0);
    this.#reloadSuccessful = gauge(
      'labeller_config_last_reload_successful',
      'Whether the last config file change was applied (1) or rejected (0)',
      [],
    );
    this.#reloadSuccessful.set(1);
    // Read from the controllers' counts when scraped (each kept up to date with what changed since
    // the last scrape: labelling/counts.ts), so they are never stale.
    const objectSources = this.#objectSources;
    /** Every controller's gauges, read before any sample is set, so that concurrent scrapes never interleave. */
    const readAll = () =>
      Promise.all([...objectSources].map(async ([controller, read]) => [controller, await read()] as const));
    const objects = (name: string, help: string, field: 'managed' | 'pending' | 'conflicts' | 'held') =>
      new Gauge({
        name,
        help,
        labelNames: ['controller'],
        registers,
        async collect() {
          const read = await readAll();
          // Controllers stopped by a config reload leave no stale sample.
          this.reset();
          for (const [controller, gauges] of read) this.set({ controller }, gauges[field]);
        },
      });
    objects(
      'labeller_objects_managed',
      "Cached objects carrying a label that labeller's field manager owns",
      'managed',
    );
    objects(
      'labeller_objects_pending',
      'Cached objects whose labels an apply would change (not converged yet, or writes failing)',
      'pending',
    );
    objects(
      'labeller_objects_conflicting',
      'Cached objects with a label another field manager set to another value (force takes it over, skip leaves it)',
      'conflicts',
    );
    objects(
      'labeller_objects_held',
      'Cached objects with labels held (neither applied nor removed) because a related object they read cannot be read',
      'held',
    );
    new Gauge({
      name: 'labeller_coverage_ratio',
      help:
        "Share of a kind's cached objects (not being deleted) that carry a configured label with its desired value; 1 when there are none",
      labelNames: ['kind', 'key'],
      registers,
      async collect() {
        const read = await readAll();
        this.reset();
        for (const [kind, gauges] of read) {
          for (const { key, objects, covered } of gauges.coverage ?? []) {
            this.set({ kind, key }, objects === 0 ? 1 : covered / objects);
          }
        }
      },
    });
    const ready = (): boolean => this.#ready();
    new Gauge({
      name: 'labeller_ready',
      help:
        'Whether /readyz answers ok (1) or not (0): every controller has listed and watches, and no source keeps it back',
      registers,
      collect() {
        this.set(ready() ? 1 : 0);
      },
    });
    const shard = (): ShardGauges | undefined => this.#shard?.();
    const shardGauge = (
      name: string,
      help: string,
      labelNames: string[],
      set: (gauge: Gauge, s: ShardGauges) => void,
    ) =>
      new Gauge({
        name,
        help,
        labelNames,
        registers,
        collect() {
          this.reset();
          const state = shard();
          if (state) set(this, state);
        },
      });
    shardGauge(
      'labeller_shard_members',
      'Live members of the shard group this member sees, itself included',
      [],
      (g, s) => g.set(s.members),
    );
    shardGauge(
      'labeller_shard_owned_ratio',
      'Share of the namespace hash space this member caches (state=keeps) and writes (state=writes)',
      ['state'],
      (g, s) => {
        g.set({ state: 'keeps' }, s.keeps / s.buckets);
        g.set({ state: 'writes' }, s.writes / s.buckets);
      },
    );
    shardGauge(
      'labeller_shard_stale_config_members',
      "Members of the shard group, this one included, that have run another config than the group's newest for longer than a change takes to reach every pod: they write nothing until they load it",
      [],
      (g, s) => g.set(s.staleConfigs),
    );
    shardGauge('labeller_shard_ranges_info', "This member's ranges of the namespace hash space (bucket numbers)", [
      'ranges',
    ], (g, s) => g.set({ ranges: s.ranges }, 1));
    shardGauge(
      'labeller_shard_filtering',
      "Per cache: 1 under the filtering that keeps it to this member's share: by the API server (shardSelector) or here, from the whole stream",
      ['controller', 'filtering'],
      (g, s) => {
        for (const { controller, filtering } of s.filtering) g.set({ controller, filtering }, 1);
      },
    );
    const admissionPolicies = (): AdmissionPolicyGauges | undefined => this.#admissionPolicies?.();
    new Gauge({
      name: 'labeller_admission_policies',
      help:
        'MutatingAdmissionPolicies of the config (--admission-policies) this process keeps applied, by state: applied, or refused by the API server (the controller labels those objects after their create)',
      labelNames: ['state'],
      registers,
      collect() {
        this.reset();
        const state = admissionPolicies();
        if (!state) return;
        this.set({ state: 'applied' }, state.applied);
        this.set({ state: 'refused' }, state.refused);
      },
    });
    const policyReports = (): PolicyReportGauges | undefined => this.#policyReports?.();
    new Gauge({
      name: 'labeller_policy_reports',
      help:
        'PolicyReports (one a namespace) and the ClusterPolicyReport on the API server this process keeps, by kind (--policy-reports; on the leader, or each shard member for its namespaces)',
      labelNames: ['kind'],
      registers,
      collect() {
        this.reset();
        const state = policyReports();
        if (!state) return;
        this.set({ kind: 'PolicyReport' }, state.reports);
        this.set({ kind: 'ClusterPolicyReport' }, state.clusterReports);
      },
    });
    new Gauge({
      name: 'labeller_policy_report_results',
      help:
        'Objects and keys not as the config wants, by the result a PolicyReport gives them: fail (a conflict, a fight, an invalid value, a key with no value) or warn (held), counted whether or not a report lists them',
      labelNames: ['result'],
      registers,
      collect() {
        this.reset();
        const state = policyReports();
        if (!state) return;
        this.set({ result: 'fail' }, state.fail);
        this.set({ result: 'warn' }, state.warn);
      },
    });
    const sources = (): readonly SourceGauges[] => this.#sources();
    const source = (name: string, help: string, value: (state: SourceGauges) => number | undefined) =>
      new Gauge({
        name,
        help,
        labelNames: ['source'],
        registers,
        collect() {
          this.reset();
          for (const state of sources()) {
            const v = value(state);
            if (v !== undefined) this.set({ source: state.name }, v);
          }
        },
      });
    source(
      'labeller_source_up',
      'Whether the last read of a source of truth worked (1) or failed (0)',
      (s) => (s.up ? 1 : 0),
    );
    source(
      'labeller_source_last_success_timestamp_seconds',
      'When a source of truth was last read successfully',
      (s) => s.lastSuccessMs === undefined ? undefined : s.lastSuccessMs / 1000,
    );
    source('labeller_source_bytes', 'Size of the last good content of a source of truth', (s) => s.bytes);
    source('labeller_source_keys', 'Keys in the last good content of a source of truth', (s) => s.keys);
    /** A gauge of 1 for each label set `read` answers at a scrape, and no other sample. */
    const present = <L extends string>(
      name: string,
      help: string,
      labelNames: readonly L[],
      read: () => readonly Readonly<Record<L, string>>[],
    ) =>
      new Gauge({
        name,
        help,
        labelNames: [...labelNames],
        registers,
        collect() {
          this.reset();
          for (const labels of read()) {
            // Only the label names: what `read` answers may carry more.
            this.set(Object.fromEntries(labelNames.map((l) => [l, labels[l]])) as Record<L, string>, 1);
          }
        },
      });
    present(
      'labeller_related_unreadable',
      'Related kinds templates read that labeller cannot read (not followed, not served, forbidden): 1 while labels that read them are held',
      ['kind', 'reason'],
      () => this.#unreadable(),
    );
    present(
      'labeller_kinds_skipped',
      'Kinds of the every-kind entry labeller skips because it may not use them: 1 per resource, with the verbs it lacks',
      ['resource', 'verbs'],
      () => this.#skipped(),
    );
  }

  /** Where labeller_ready is read from at each scrape. */
  readiness(ready: () => boolean): void {
    this.#ready = ready;
  }

  /** Where the labeller_shard_* gauges are read from at each scrape (sharded replicas only). */
  shard(read: () => ShardGauges): void {
    this.#shard = read;
  }

  /** Where labeller_admission_policies is read from at each scrape (with --admission-policies only). */
  admissionPolicies(read: () => AdmissionPolicyGauges): void {
    this.#admissionPolicies = read;
  }

  /** Where labeller_policy_reports and labeller_policy_report_results are read from at each scrape (with --policy-reports only). */
  policyReports(read: () => PolicyReportGauges): void {
    this.#policyReports = read;
  }

  /** Where labeller_kinds_skipped is read from at each scrape. */
  kindsSkipped(read: () => readonly SkippedKindGauge[]): void {
    this.#skipped = read;
  }

  /** Where the labeller_source_* gauges are read from at each scrape. */
  sources(read: () => readonly SourceGauges[]): void {
    this.#sources = read;
  }

  /** Where labeller_related_unreadable is read from at each scrape. */
  relatedUnreadable(read: () => readonly UnreadableKindGauge[]): void {
    this.#unreadable = read;
  }

  /** The runtime's metrics for one informer (a cache), labelled `controller` as its controller is for one namespace. */
  informer(controller: string): InformerMetrics {
    // Zero from the start, so rate() and alerts work before the first event.
    for (const counter of [this.#watchRestarts, this.#relists]) counter.inc({ controller }, 0);
    return {
      cached: (size) => this.#cached.set({ controller }, size),
      watchRestarted: () => this.#watchRestarts.inc({ controller }),
      relisted: () => this.#relists.inc({ controller }),
      // A cache let go (its kind left the config, no template reads it): no stale sample stays.
      stopped: () => {
        for (const metric of [this.#cached, this.#watchRestarts, this.#relists]) metric.remove({ controller });
      },
    };
  }

  /** The runtime's metrics for one controller. */
  controller(controller: string, concurrency: number): ControllerMetrics {
    const q = { controller, name: controller };
    this.#maxConcurrent.set({ controller }, concurrency);
    // Bound once: each is updated for every object (see prometheus.ts).
    const results = Object.fromEntries(
      Object.keys(RESULTS).map((result) => [result, this.#reconcileTotal.bind({ controller, result })]),
    ) as Record<keyof typeof RESULTS, () => void>;
    const errors = this.#reconcileErrors.bind({ controller });
    const reconcileTime = this.#reconcileTime.bind({ controller });
    const workers = this.#activeWorkers.bind({ controller });
    const adds = this.#adds.bind(q);
    const depth = this.#depth.bind(q);
    const retries = this.#retries.bind(q);
    const queueLatency = this.#queueDuration.bind(q);
    const workDuration = this.#workDuration.bind(q);
    workers.set(0);
    errors(0);
    retries(0);
    return {
      reconciled: (result, seconds) => {
        results[result]();
        if (result === 'error') errors();
        reconcileTime(seconds);
      },
      activeWorkers: (delta) => workers.inc(delta),
      queue: {
        adds: () => adds(),
        depth: (n) => depth.set(n),
        retries: () => retries(),
        queueLatency,
        workDuration,
      },
    };
  }

  labels(controller: string): LabelMetrics {
    // Bound once, and zero from the start (see controller()).
    const applied = {
      labels: this.#applied.labels.bind({ controller }),
      annotations: this.#applied.annotations.bind({ controller }),
    };
    const removed = {
      labels: this.#removed.labels.bind({ controller }),
      annotations: this.#removed.annotations.bind({ controller }),
    };
    const conflicts = this.#conflicts.bind({ controller });
    for (const inc of [...Object.values(applied), ...Object.values(removed), conflicts]) inc(0);
    // Zero from the start too: increase() in the fights alert then counts the first fight.
    for (const field of FIELDS) this.#fights.inc({ controller, field }, 0);
    return {
      applied: (field, count) => applied[field](count),
      removed: (field, count) => removed[field](count),
      conflict: () => conflicts(),
      fight: (field) => this.#fights.inc({ controller, field }),
      retake: (field, manager = 'unknown') => {
        if (!this.#retakers.has(manager) && this.#retakers.size < RETAKE_MANAGERS_MAX) this.#retakers.add(manager);
        this.#retakes.inc({ controller, field, manager: this.#retakers.has(manager) ? manager : 'other' });
      },
    };
  }

  /** Registers the source of labeller_objects_managed and labeller_objects_pending for one controller. */
  objects(controller: string, read: () => Promise<ObjectGauges>): void {
    // The gauges come from one read of the counts per scrape.
    let last: { at: number; gauges: Promise<ObjectGauges> } | undefined;
    this.#objectSources.set(controller, () => {
      if (!last || performance.now() - last.at > 1000) last = { at: performance.now(), gauges: read() };
      return last.gauges;
    });
  }

  /**
   * A controller stopped (its kind left the config): every series it reported goes, so dashboards
   * show no frozen values. (Its informers' series go when they stop: InformerMetrics.stopped.)
   */
  forget(controller: string): void {
    this.#objectSources.delete(controller);
    for (const result of Object.keys(RESULTS)) this.#reconcileTotal.remove({ controller, result });
    const perController: Removable[] = [
      this.#reconcileErrors,
      this.#reconcileTime,
      this.#activeWorkers,
      this.#maxConcurrent,
      ...Object.values(this.#applied),
      ...Object.values(this.#removed),
      this.#conflicts,
    ];
    for (const metric of perController) metric.remove({ controller });
    for (const field of FIELDS) this.#fights.remove({ controller, field });
    for (const field of FIELDS) {
      for (const manager of [...this.#retakers, 'other']) this.#retakes.remove({ controller, field, manager });
    }
    const perQueue: Removable[] = [this.#depth, this.#adds, this.#queueDuration, this.#workDuration, this.#retries];
    for (const metric of perQueue) metric.remove({ controller, name: controller });
  }

  /** OutcomeCounts config reloads by result and keeps whether the last one was applied. */
  configReloaded(applied: boolean): void {
    this.#reloads.inc({ result: applied ? 'success' : 'failure' });
    this.#reloadSuccessful.set(applied ? 1 : 0);
  }

  restClient(host: string): RequestObserver {
    // A series bound per method and code, as they come: one update per request, no string made.
    const bound = new Map<string, Map<number | 'error', () => void>>();
    return (method, status) => {
      let byStatus = bound.get(method);
      if (byStatus === undefined) bound.set(method, byStatus = new Map());
      let inc = byStatus.get(status);
      if (inc === undefined) {
        const code = status === 'error' ? '<error>' : String(status);
        byStatus.set(status, inc = this.#requests.bind({ code, method, host }));
      }
      inc();
    };
  }

  leader(name: string): (leading: boolean) => void {
    return (leading) => this.#leader.set({ name }, leading ? 1 : 0);
  }
}
