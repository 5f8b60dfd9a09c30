// --scrape (issue 35, item 4): what a /metrics scrape costs labeller over N ConfigMaps, and
// whether it stalls anything else. The object gauges are kept as objects change
// (src/labelling/counts.ts); a scrape plans only what changed since the last, 5 ms at a time.
// Seen from outside: each scrape timed from request to the end of its body, and /healthz asked
// every 10 ms throughout. Seen from inside (loopdelay.ts): the longest the event loop was held,
// which the probe's answers overstate by the time labeller waits for one of the 2 cores.
// Phases: the first scrape right after the first list (every object to plan), scrapes every
// second while labeller converges, 10 over converged objects, and scrapes every second while a
// namespace label change relabels every object (each queued again, so each planned again).
// Then every-kind mode (`resource: "*"`, `scope: all`) over what the control plane serves: one
// controller per kind, thousands of series, 10 scrapes once it is ready.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePorts } from '../../test/controlplane/process.ts';
import { eventually } from '../../test/process/eventually.ts';
import { sleep } from '../../test/process/sleep.ts';
import type { Bench } from './context.ts';
import { type Launch, startLabeller } from './launch.ts';
import { loopDelayBetween, type LoopHolds, withLoopDelay } from './loopdelay.ts';
import type { Labeller } from '../../test/process/labeller.ts';
import { load1, markdownTable, ms, type Row, verdict } from './report.ts';
import { setUp } from './setup.ts';

const TEAM = 'example.com/team';

export type ScrapePhase = 'first' | 'converging' | 'converged' | 'relabelling' | 'every-kind';

export interface ScrapePhaseResult {
  readonly phase: ScrapePhase;
  /** Each scrape's time, request sent → body read. */
  readonly scrapesMs: readonly number[];
  /** The slowest /healthz answer while the phase's scrapes ran (none before labeller serves). */
  readonly healthzMaxMs: number | undefined;
  /** The slowest /healthz answer over the whole phase, between scrapes too. */
  readonly phaseHealthzMaxMs: number | undefined;
  /** The event loop's longest hold, seen from inside, while the phase's scrapes ran and over the whole phase (Node only). */
  readonly loopMaxMs: number | undefined;
  readonly phaseLoopMaxMs: number | undefined;
  /** The longest garbage collection pause over the whole phase (Node only). */
  readonly phaseGcMaxMs: number | undefined;
}

export interface ScrapeResults {
  readonly n: number;
  readonly phases: ScrapePhaseResult[];
  /** The slowest /healthz answer, and the loop's longest hold, over 5 s of converged objects with no scrape. */
  readonly idleHealthzMaxMs: number | undefined;
  readonly idleLoopMaxMs: number | undefined;
  /** Every-kind mode: the kinds it labels (controllers), and the exposition's size. */
  readonly everyKind?: { readonly kinds: number; readonly bytes: number } | undefined;
  readonly load: number;
}

/** /healthz asked every 10 ms: when each answer came and how long it took. */
class HealthProbe {
  readonly answers: { at: number; ms: number }[] = [];
  readonly #stop = new AbortController();
  readonly #done: Promise<void>;

  constructor(port: number) {
    this.#done = this.#run(port);
  }

  async #run(port: number): Promise<void> {
    while (!this.#stop.signal.aborted) {
      const sent = performance.now();
      try {
        await (await fetch(`http://127.0.0.1:${port}/healthz`, { signal: this.#stop.signal })).arrayBuffer();
        this.answers.push({ at: performance.now(), ms: performance.now() - sent });
      } catch {
        // Not serving yet, or stopped.
      }
      await sleep(10).catch(() => {});
    }
  }

  /** The slowest answer that overlapped [from, to], if one did. */
  maxBetween(from: number, to: number): number | undefined {
    return slowest(this.answers.filter((a) => a.at >= from && a.at - a.ms <= to).map((a) => a.ms));
  }

  async stop(): Promise<void> {
    this.#stop.abort();
    await this.#done;
  }
}

/** One scrape: its time, the gauges it read, and the exposition's size. */
interface Scrape {
  readonly ms: number;
  readonly from: number;
  readonly to: number;
  readonly pending: number;
  readonly managed: number;
  readonly bytes: number;
  readonly kinds: number;
}

/** A labeller serving /metrics on `port`, with /healthz probed throughout. */
class Scraped {
  readonly phases: ScrapePhaseResult[] = [];
  readonly probe: HealthProbe;
  readonly #port: number;
  readonly #bench: Bench;
  readonly #labeller: Labeller;

  constructor(bench: Bench, labeller: Labeller, port: number) {
    this.#bench = bench;
    this.#labeller = labeller;
    this.#port = port;
    this.probe = new HealthProbe(port);
  }

  /** The loop's longest hold and GC pause over [from, to] (performance.now() times). */
  holdsBetween(from: number, to: number): LoopHolds | undefined {
    return loopDelayBetween(this.#labeller, performance.timeOrigin + from, performance.timeOrigin + to);
  }

  async scrape(): Promise<Scrape> {
    const from = performance.now();
    const text = await (await fetch(`http://127.0.0.1:${this.#port}/metrics`)).text();
    const to = performance.now();
    const sum = (name: string) =>
      text.split('\n').filter((line) => line.startsWith(`${name}{`)).reduce(
        (total, line) => total + Number(line.slice(line.lastIndexOf(' ') + 1)),
        0,
      );
    return {
      ms: to - from,
      from,
      to,
      pending: sum('labeller_objects_pending'),
      managed: sum('labeller_objects_managed'),
      bytes: text.length,
      kinds: text.split('\n').filter((line) => line.startsWith('labeller_objects_managed{')).length,
    };
  }

  /** Scrapes every second until `done` says so (at most `limit`), as one phase; its last scrape. */
  async phase(name: ScrapePhase, done: (s: Scrape, i: number) => boolean, limit = 600): Promise<Scrape> {
    const started = performance.now();
    const scrapes: Scrape[] = [];
    for (let i = 0; i < limit; i++) {
      const s = await this.scrape();
      scrapes.push(s);
      if (done(s, i)) break;
      await sleep(1000, this.#bench.signal);
    }
    const last = scrapes.at(-1)!;
    if (!done(last, scrapes.length - 1)) throw new Error(`--scrape ${name}: not done after ${limit} scrapes`);
    const phase = this.holdsBetween(started, performance.now());
    const result: ScrapePhaseResult = {
      phase: name,
      scrapesMs: scrapes.map((s) => s.ms),
      healthzMaxMs: slowest(scrapes.map((s) => this.probe.maxBetween(s.from, s.to))),
      phaseHealthzMaxMs: this.probe.maxBetween(started, performance.now()),
      loopMaxMs: slowest(scrapes.map((s) => this.holdsBetween(s.from, s.to)?.maxMs)),
      phaseLoopMaxMs: phase?.maxMs,
      phaseGcMaxMs: phase?.gcMaxMs,
    };
    this.#bench.log(
      `scrape: ${name}: ${scrapes.length} scrapes, ${scrapes.map((s) => ms(s.ms)).join(', ')}; /healthz at most ${
        ms(result.healthzMaxMs)
      } during them, ${ms(result.phaseHealthzMaxMs)} in the phase; the loop held at most ${
        ms(result.loopMaxMs)
      } during them, ${ms(result.phaseLoopMaxMs)} in the phase (GC pauses at most ${ms(result.phaseGcMaxMs)})`,
    );
    this.phases.push(result);
    return last;
  }
}

export async function benchScrape(bench: Bench, launch: Launch, n: number): Promise<ScrapeResults> {
  const { admin, controlPlane, signal } = bench;
  const setup = await setUp(bench, n, 50, 'labeller-scrape');
  const namespace = setup.namespace;
  const team = (value: string) =>
    admin.json('PATCH', `/api/v1/namespaces/${namespace}`, {
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ metadata: { labels: { team: value } } }),
    });
  await team('a');
  const [port, everyPort] = await freePorts(2);
  const labeller = startLabeller(withLoopDelay(launch), [
    '--kubeconfig',
    controlPlane.kubeconfig,
    '--kinds',
    'configmaps',
    '--label',
    `${TEAM}={{namespace.labels.team}}`,
    '--namespace',
    namespace,
    '--http-port',
    String(port),
  ]);
  const one = new Scraped(bench, labeller, port!);
  let idleHealthzMaxMs: number | undefined;
  let idleLoopMaxMs: number | undefined;
  try {
    await labeller.waitForLog((line) => line.msg === 'initial list complete' && line['kind'] === 'ConfigMap', 600_000);
    await one.phase('first', () => true);
    await one.phase('converging', (s) => s.pending === 0 && s.managed === n);
    await one.phase('converged', (_, i) => i === 9);
    const quiet = performance.now();
    await sleep(5000, signal);
    idleHealthzMaxMs = one.probe.maxBetween(quiet, performance.now());
    idleLoopMaxMs = one.holdsBetween(quiet, performance.now())?.maxMs;
    await team('b');
    // Until the change is seen (pending) and then done.
    let seen = false;
    await one.phase('relabelling', (s, i) => {
      seen ||= s.pending > 0;
      // A small N may be relabelled between two scrapes.
      return (seen || i >= 5) && s.pending === 0;
    });
  } finally {
    await one.probe.stop();
    await labeller.stop('SIGTERM', 10_000);
  }

  // Every-kind mode over what the control plane serves; the bench's objects are left out by their
  // label (all N would make this a convergence run).
  const dir = mkdtempSync(join(tmpdir(), 'labeller-scrape-'));
  const config = join(dir, 'kinds.yaml');
  writeFileSync(
    config,
    `labels:\n  ${TEAM}: platform\n  example.com/kind: "{{kind}}"\nkinds:\n  - resource: "*"\n    scope: all\n    selector: app.kubernetes.io/component!=config\n`,
  );
  const every = startLabeller(withLoopDelay(launch), [
    '--kubeconfig',
    controlPlane.kubeconfig,
    '--config',
    config,
    '--http-port',
    String(everyPort),
  ]);
  const all = new Scraped(bench, every, everyPort!);
  try {
    await eventually(
      async () => (await fetch(`http://127.0.0.1:${everyPort}/readyz`).catch(() => undefined))?.ok === true,
      'every-kind labeller to be ready',
      300_000,
    );
    await all.phase('every-kind', (s) => s.pending === 0, 120);
    all.phases.pop();
    const last = await all.phase('every-kind', (_, i) => i === 9);
    return {
      n,
      phases: [...one.phases, ...all.phases],
      idleHealthzMaxMs,
      idleLoopMaxMs,
      everyKind: { kinds: last.kinds, bytes: last.bytes },
      load: load1(),
    };
  } finally {
    await all.probe.stop();
    await every.stop('SIGTERM', 10_000);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The largest of the defined `values`, if any. */
function slowest(values: readonly (number | undefined)[]): number | undefined {
  const defined = values.filter((v) => v !== undefined);
  return defined.length === 0 ? undefined : Math.max(...defined);
}

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)] ?? NaN;
};

/**
 * The targets: a scrape over converged objects ≤ 20 ms, and no stall of the event loop over 50 ms
 * while scrapes run, in any phase: the first (every object to count), while converging and
 * relabelling (their writes and watch events busy the loop too), and converged. The stall is the
 * loop's longest hold seen from inside where there is that figure (Node), else /healthz's slowest
 * answer; the latter is always reported beside it.
 */
export function scrapeRows(r: ScrapeResults): Row[] {
  const of = (name: ScrapePhase) => r.phases.find((p) => p.phase === name);
  const converged = of('converged');
  const every = of('every-kind');
  const one = r.phases.filter((p) => p.phase !== 'every-kind');
  const inside = one.every((p) => p.loopMaxMs !== undefined);
  const stallOf = (p: ScrapePhaseResult): number | undefined => inside ? p.loopMaxMs : p.healthzMaxMs;
  const stall = slowest(one.map(stallOf));
  const everyStall = every && (every.loopMaxMs ?? every.healthzMaxMs);
  return [
    {
      id: 'M1',
      measurement: `a scrape of /metrics over ${r.n} converged objects (median of ${
        converged?.scrapesMs.length ?? 0
      }, max)`,
      result: converged ? `${ms(median(converged.scrapesMs))}, ${ms(Math.max(...converged.scrapesMs))}` : 'n/a',
      target: '≤ 20 ms',
      verdict: converged ? verdict(Math.max(...converged.scrapesMs) <= 20) : 'incomplete',
      load: r.load,
    },
    {
      id: 'M2',
      measurement: `the longest stall of the event loop while scrapes ran, ${
        inside ? "seen from inside (libuv's loop delay)" : "as /healthz's slowest answer (asked every 10 ms)"
      }, in each phase; /healthz's slowest answer from outside beside it`,
      result: `${ms(stall)} (${one.map((p) => `${p.phase} ${ms(stallOf(p))}`).join(', ')}; idle ${
        ms(inside ? r.idleLoopMaxMs : r.idleHealthzMaxMs)
      }); /healthz ${one.map((p) => `${p.phase} ${ms(p.healthzMaxMs)}`).join(', ')}${
        inside ? `; garbage collection paused it ${ms(slowest(one.map((p) => p.phaseGcMaxMs)))} at most` : ''
      }`,
      target: '≤ 50 ms',
      verdict: stall === undefined ? 'incomplete' : verdict(stall <= 50),
      load: r.load,
    },
    ...(every && r.everyKind
      ? [
        {
          id: 'M3',
          measurement: `every-kind mode over the control plane's ${r.everyKind.kinds} kinds (${
            (r.everyKind.bytes / 1024).toFixed(0)
          } KiB of exposition): a scrape, median of ${every.scrapesMs.length} and max; the longest stall meanwhile`,
          result: `${ms(median(every.scrapesMs))}, ${ms(Math.max(...every.scrapesMs))}; stall ${
            ms(everyStall)
          } (/healthz ${ms(every.healthzMaxMs)})`,
          target: '≤ 20 ms; ≤ 50 ms',
          verdict: verdict(Math.max(...every.scrapesMs) <= 20 && (everyStall ?? 0) <= 50),
          load: r.load,
        } satisfies Row,
      ]
      : []),
  ];
}

/** Every phase's scrapes: how many, median, slowest, first; /healthz's slowest in and around them. */
export function scrapeTable(r: ScrapeResults): string {
  return markdownTable(
    [
      'phase',
      'scrapes',
      'median',
      'slowest',
      'first',
      '/healthz slowest during scrapes',
      '/healthz slowest in the phase',
      'loop held at most during scrapes',
      'loop held at most in the phase',
      'GC pauses at most in the phase',
    ],
    r.phases.map((p) => [
      p.phase,
      String(p.scrapesMs.length),
      ms(median(p.scrapesMs)),
      ms(Math.max(...p.scrapesMs)),
      ms(p.scrapesMs[0]),
      ms(p.healthzMaxMs),
      ms(p.phaseHealthzMaxMs),
      ms(p.loopMaxMs),
      ms(p.phaseLoopMaxMs),
      ms(p.phaseGcMaxMs),
    ]),
  );
}
