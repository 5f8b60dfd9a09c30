// Counters, gauges and histograms, and their text exposition (Prometheus' format 0.0.4): the
// little of prom-client labeller used, written for its two costs. An update is on the path of
// every reconcile and request (~13 per object): those paths bind their series once (`bind`), and
// other updates find a series by its label values joined, with nothing checked once it exists. A scrape in every-kind mode writes thousands of series
// (a 40-bucket histogram per controller): each series keeps its labels already written, and the
// registry yields to the event loop between metrics.
import { setImmediate } from 'node:timers/promises';

export type LabelValues = Readonly<Record<string, string | number>>;

export interface MetricOptions<M> {
  readonly name: string;
  readonly help: string;
  readonly labelNames?: readonly string[];
  readonly registers?: readonly Registry[];
  /** Called before each exposition, with the metric as `this`: sets what is read at scrape time. */
  readonly collect?: (this: M) => void | Promise<void>;
}

/** One series: its labels as the exposition writes them (`{a="b"}`), and its state. */
interface Series<S> {
  readonly labels: string;
  readonly state: S;
}

/** A metric with series of state `S`; `M` is the concrete metric, what `collect` sees as `this`. */
abstract class Metric<S, M> {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly string[];
  abstract readonly type: 'counter' | 'gauge' | 'histogram';
  readonly #series = new Map<string, Series<S>>();
  readonly #collect: ((this: M) => void | Promise<void>) | undefined;

  constructor(options: MetricOptions<M>) {
    this.name = options.name;
    this.help = options.help;
    this.labelNames = options.labelNames ?? [];
    this.#collect = options.collect;
    for (const registry of options.registers ?? []) registry.register(this);
  }

  protected abstract fresh(): S;

  /** Writes the series' sample lines for `name`, whose labels are `labels`. */
  protected abstract lines(name: string, labels: string, state: S, out: string[]): void;

  /**
   * The series of `labels`, made on first use (a label it does not have is an error then, as a
   * typo would be; one left out is empty); a metric without labels has one.
   */
  protected series(labels: LabelValues | undefined): S {
    const key = this.#key(labels);
    let series = this.#series.get(key);
    if (series === undefined) {
      const unknown = Object.keys(labels ?? {}).find((name) => !this.labelNames.includes(name));
      if (unknown !== undefined) {
        throw new Error(`${this.name} has no label ${unknown}: it has ${this.labelNames.join(', ')}`);
      }
      series = {
        labels: labelText(this.labelNames.map((name) => [name, String(labels?.[name] ?? '')])),
        state: this.fresh(),
      };
      this.#series.set(key, series);
    }
    return series.state;
  }

  #key(labels: LabelValues | undefined): string {
    if (labels === undefined) return '';
    // Most of labeller's metrics have one label: its value is the key, with no array made per update.
    const names = this.labelNames;
    if (names.length === 1) return String(labels[names[0]!] ?? '');
    return names.map((name) => labels[name] ?? '').join('\u0000');
  }

  /** Drops the series of `labels`. */
  remove(labels: LabelValues): void {
    this.#series.delete(this.#key(labels));
  }

  /** Drops every series (a metric without labels starts again from its zero series). */
  reset(): void {
    this.#series.clear();
    if (this.labelNames.length === 0) this.series(undefined);
  }

  /** HELP, TYPE and every series, after `collect`. */
  async exposition(): Promise<string> {
    await this.#collect?.call(this as unknown as M);
    const out = [`# HELP ${this.name} ${this.help.replaceAll('\\', '\\\\').replaceAll('\n', '\\n')}`];
    out.push(`# TYPE ${this.name} ${this.type}`);
    for (const { labels, state } of this.#series.values()) this.lines(this.name, labels, state, out);
    return out.join('\n');
  }
}

/** A metric whose series each hold one number: counters and gauges. */
abstract class Scalar<M> extends Metric<{ value: number }, M> {
  constructor(options: MetricOptions<M>) {
    super(options);
    if (this.labelNames.length === 0) this.series(undefined);
  }

  protected fresh(): { value: number } {
    return { value: 0 };
  }

  protected lines(name: string, labels: string, state: { value: number }, out: string[]): void {
    out.push(`${name}${labels} ${number(state.value)}`);
  }
}

export class Counter extends Scalar<Counter> {
  readonly type = 'counter';

  /** Adds `value` (1 by default; 0 makes the series appear). */
  inc(labels?: LabelValues, value = 1): void {
    this.#add(this.series(labels), value);
  }

  /**
   * The series of `labels`, made now, as a function that adds to it: for a hot path, which then
   * neither builds labels nor finds the series on each update. Bind again after remove() or reset().
   */
  bind(labels?: LabelValues): (value?: number) => void {
    const series = this.series(labels);
    return (value = 1) => this.#add(series, value);
  }

  #add(series: { value: number }, value: number): void {
    if (value < 0 || !Number.isFinite(value)) throw new Error(`${this.name}: a counter cannot add ${value}`);
    series.value += value;
  }
}

export class Gauge extends Scalar<Gauge> {
  readonly type = 'gauge';

  /** Sets the series of `labels` (`set(value)` for a gauge without labels). */
  set(labels: LabelValues | number, value?: number): void {
    if (typeof labels === 'number') this.series(undefined).value = labels;
    else this.series(labels).value = value ?? 0;
  }

  inc(labels: LabelValues, delta = 1): void {
    this.series(labels).value += delta;
  }

  /** The series of `labels`, made now, for a hot path (see Counter.bind). */
  bind(labels: LabelValues): { set(value: number): void; inc(delta?: number): void } {
    const series = this.series(labels);
    return {
      set: (value) => void (series.value = value),
      inc: (delta = 1) => void (series.value += delta),
    };
  }
}

interface Observed {
  /** Observations per bucket, not cumulated (the exposition cumulates). */
  readonly counts: number[];
  sum: number;
  count: number;
}

export class Histogram extends Metric<Observed, Histogram> {
  readonly type = 'histogram';
  readonly #buckets: readonly number[];
  /** Each bucket's `le` label, written once. */
  readonly #le: readonly string[];

  constructor(options: MetricOptions<Histogram> & { readonly buckets: readonly number[] }) {
    super(options);
    this.#buckets = [...options.buckets].sort((a, b) => a - b);
    this.#le = [...this.#buckets.map(number), '+Inf'].map((le) => `le="${le}"`);
    if (this.labelNames.length === 0) this.series(undefined);
  }

  protected fresh(): Observed {
    return { counts: new Array<number>(this.#buckets.length + 1).fill(0), sum: 0, count: 0 };
  }

  observe(labels: LabelValues, value: number): void {
    this.#record(this.series(labels), value);
  }

  /** The series of `labels`, made now, as a function that observes into it (see Counter.bind). */
  bind(labels: LabelValues): (value: number) => void {
    const observed = this.series(labels);
    return (value) => this.#record(observed, value);
  }

  #record(observed: Observed, value: number): void {
    const buckets = this.#buckets;
    let i = 0;
    while (i < buckets.length && value > buckets[i]!) i++;
    observed.counts[i]!++;
    observed.sum += value;
    observed.count++;
  }

  protected lines(name: string, labels: string, state: Observed, out: string[]): void {
    // The bucket's label follows the series' own: `{controller="x",le="0.5"}`.
    const open = labels === '' ? '{' : `${labels.slice(0, -1)},`;
    let cumulative = 0;
    state.counts.forEach((count, i) => {
      cumulative += count;
      out.push(`${name}_bucket${open}${this.#le[i]}} ${cumulative}`);
    });
    out.push(`${name}_sum${labels} ${number(state.sum)}`, `${name}_count${labels} ${state.count}`);
  }
}

/** What a registry needs of a metric. */
interface Exposed {
  readonly name: string;
  exposition(): Promise<string>;
}

export class Registry {
  readonly contentType = 'text/plain; version=0.0.4; charset=utf-8';
  readonly #metrics = new Map<string, Exposed>();

  register(metric: Exposed): void {
    if (this.#metrics.has(metric.name)) throw new Error(`a metric named ${metric.name} is registered already`);
    this.#metrics.set(metric.name, metric);
  }

  /**
   * The text exposition, one metric at a time with the event loop let in between: in every-kind
   * mode it runs to thousands of series, which would otherwise hold up the probes and the
   * controllers all at once.
   */
  async metrics(): Promise<string> {
    const parts: string[] = [];
    for (const metric of this.#metrics.values()) {
      parts.push(await metric.exposition());
      await setImmediate();
    }
    return `${parts.join('\n\n')}\n`;
  }
}

/** `{a="b",c="d"}`, values escaped as the format says; empty without labels. */
function labelText(pairs: readonly (readonly [string, string])[]): string {
  if (pairs.length === 0) return '';
  const escape = (value: string) => value.replaceAll('\\', '\\\\').replaceAll('"', '\\"').replaceAll('\n', '\\n');
  return `{${pairs.map(([name, value]) => `${name}="${escape(value)}"`).join(',')}}`;
}

/** A sample value as the format writes it. */
function number(value: number): string {
  if (value === Infinity) return '+Inf';
  if (value === -Infinity) return '-Inf';
  return String(value);
}
