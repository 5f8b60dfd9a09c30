// --scrape (issue 35, item 4): what a /metrics scrape costs labeller over N ConfigMaps, and
// whether it stalls anything else. The object gauges are kept as objects change
// (src/labelling/counts.ts); a scrape plans only what changed since the last, 5 ms at a time.
// Seen from outside: each scrape timed from request to the end of its body, and /healthz asked
// every 10 ms throughout, its slowest answer the longest the event loop was busy, scrape or not.
// Phases: the first scrape right after the first list (every object to plan), scrapes every
// second while labeller converges, 10 over converged objects, and scrapes every second while a
// namespace label change relabels every object (each queued again, so each planned again).
import { freePorts } from '../../test/controlplane/process.ts';
import { sample } from '../../test/process/metrics.ts';
import { sleep } from '../../test/process/sleep.ts';
import type { Bench } from './context.ts';
import { type Launch, startLabeller } from './launch.ts';
import { load1, markdownTable, ms, type Row, verdict } from './report.ts';
import { setUp } from './setup.ts';

const TEAM = 'example.com/team';

export type ScrapePhase = 'first' | 'converging' | 'converged' | 'relabelling';

export interface ScrapePhaseResult {
  readonly phase: ScrapePhase;
  /** Each scrape's time, request sent → body read. */
  readonly scrapesMs: readonly number[];
  /** The slowest /healthz answer while the phase's scrapes ran (none before labeller serves). */
  readonly healthzMaxMs: number | undefined;
  /** The slowest /healthz answer over the whole phase, between scrapes too. */
  readonly phaseHealthzMaxMs: number | undefined;
}

export interface ScrapeResults {
  readonly n: number;
  readonly phases: ScrapePhaseResult[];
  /** The slowest /healthz answer over 5 s of converged objects with no scrape. */
  readonly idleHealthzMaxMs: number | undefined;
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

export async function benchScrape(bench: Bench, launch: Launch, n: number): Promise<ScrapeResults> {
  const { admin, controlPlane, signal, log } = bench;
  const setup = await setUp(bench, n, 50, 'labeller-scrape');
  const namespace = setup.namespace;
  const team = (value: string) =>
    admin.json('PATCH', `/api/v1/namespaces/${namespace}`, {
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ metadata: { labels: { team: value } } }),
    });
  await team('a');
  const [port] = await freePorts(1);
  const labeller = startLabeller(launch, [
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
  const probe = new HealthProbe(port!);
  const phases: ScrapePhaseResult[] = [];
  /** One scrape: its time, and the gauges it read. */
  const scrape = async (): Promise<{ ms: number; from: number; to: number; pending: number; managed: number }> => {
    const from = performance.now();
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const to = performance.now();
    const gauge = (name: string) => sample(text, name) ?? NaN;
    return {
      ms: to - from,
      from,
      to,
      pending: gauge('labeller_objects_pending'),
      managed: gauge('labeller_objects_managed'),
    };
  };
  /** Scrapes every second until `done` says so (at most `limit`), as one phase. */
  const phase = async (
    name: ScrapePhase,
    done: (s: Awaited<ReturnType<typeof scrape>>, i: number) => boolean,
    limit = 600,
  ): Promise<void> => {
    const started = performance.now();
    const scrapes: Awaited<ReturnType<typeof scrape>>[] = [];
    for (let i = 0; i < limit; i++) {
      const s = await scrape();
      scrapes.push(s);
      if (done(s, i)) break;
      await sleep(1000, signal);
    }
    const last = scrapes.at(-1)!;
    if (!done(last, scrapes.length - 1)) throw new Error(`--scrape ${name}: not done after ${limit} scrapes`);
    const result: ScrapePhaseResult = {
      phase: name,
      scrapesMs: scrapes.map((s) => s.ms),
      healthzMaxMs: slowest(scrapes.map((s) => probe.maxBetween(s.from, s.to))),
      phaseHealthzMaxMs: probe.maxBetween(started, performance.now()),
    };
    log(
      `scrape: ${name}: ${scrapes.length} scrapes, ${scrapes.map((s) => ms(s.ms)).join(', ')}; /healthz at most ${
        ms(result.healthzMaxMs)
      } during them, ${ms(result.phaseHealthzMaxMs)} in the phase`,
    );
    phases.push(result);
  };
  try {
    await labeller.waitForLog((line) => line.msg === 'initial list complete' && line['kind'] === 'ConfigMap', 600_000);
    await phase('first', () => true);
    await phase('converging', (s) => s.pending === 0 && s.managed === n);
    await phase('converged', (_, i) => i === 9);
    const quiet = performance.now();
    await sleep(5000, signal);
    const idleHealthzMaxMs = probe.maxBetween(quiet, performance.now());
    await team('b');
    // Until the change is seen (pending) and then done.
    let seen = false;
    await phase('relabelling', (s, i) => {
      seen ||= s.pending > 0;
      // A small N may be relabelled between two scrapes.
      return (seen || i >= 5) && s.pending === 0;
    });
    return { n, phases, idleHealthzMaxMs, load: load1() };
  } finally {
    await probe.stop();
    await labeller.stop('SIGTERM', 10_000);
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
 * The targets: a scrape over converged objects ≤ 20 ms, and no /healthz answer slower than 50 ms
 * during the first scrape (every object to count) and the converged ones. While labeller
 * converges or relabels, its writes and their watch events busy the event loop too: those phases
 * are in the table beside what /healthz saw between their scrapes.
 */
export function scrapeRows(r: ScrapeResults): Row[] {
  const of = (name: ScrapePhase) => r.phases.find((p) => p.phase === name);
  const converged = of('converged');
  const alone = r.phases.filter((p) => p.phase === 'first' || p.phase === 'converged');
  const stall = slowest(alone.map((p) => p.healthzMaxMs));
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
      measurement:
        'the slowest /healthz answer (asked every 10 ms) during the first scrape (every object counted, as the first writes begin) and the converged ones',
      result: `${ms(stall)} (${alone.map((p) => `${p.phase} ${ms(p.healthzMaxMs)}`).join(', ')}); idle ${
        ms(r.idleHealthzMaxMs)
      }`,
      target: '≤ 50 ms',
      verdict: stall === undefined ? 'incomplete' : verdict(stall <= 50),
      load: r.load,
    },
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
    ],
    r.phases.map((p) => [
      p.phase,
      String(p.scrapesMs.length),
      ms(median(p.scrapesMs)),
      ms(Math.max(...p.scrapesMs)),
      ms(p.scrapesMs[0]),
      ms(p.healthzMaxMs),
      ms(p.phaseHealthzMaxMs),
    ]),
  );
}
