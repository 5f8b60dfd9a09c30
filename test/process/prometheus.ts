// A real Prometheus for tests: Debian's `prometheus` binary (2.42; `apt-get install prometheus`,
// which brings `promtool` too) as a child process on a free loopback port, scraping and
// evaluating every second, with its own storage that goes when it stops; its HTTP API read as
// typed answers. Free of node:test hooks: the caller stops it.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { type Child, type Exit, start, stop } from './child.ts';
import { eventually } from './eventually.ts';

/** What to say when the binaries are not there. */
export const PROMETHEUS_MISSING =
  "Debian's prometheus and promtool are not on PATH: apt-get install prometheus (as .ci/run does)";

/** `name`'s path on PATH, or undefined. */
function onPath(name: string): string | undefined {
  return (process.env['PATH'] ?? '').split(delimiter).map((dir) => join(dir, name)).find((path) => existsSync(path));
}

/** Whether `prometheus` and `promtool` can be run. */
export function prometheusInstalled(): boolean {
  return onPath('prometheus') !== undefined && onPath('promtool') !== undefined;
}

/** `promtool check rules` on a rules file: its exit status and output. */
export function checkRules(file: string): { code: number; output: string } {
  try {
    return { code: 0, output: execFileSync('promtool', ['check', 'rules', file], { encoding: 'utf8', stdio: 'pipe' }) };
  } catch (error) {
    const failed = error as { status?: number; stdout?: string; stderr?: string };
    return { code: failed.status ?? 1, output: `${failed.stdout ?? ''}${failed.stderr ?? ''}` };
  }
}

/** A target scraped under a job, with target labels (namespace, as a ServiceMonitor gives them). */
export interface ScrapeTarget {
  readonly job: string;
  readonly address: string;
  readonly labels: Readonly<Record<string, string>>;
}

/** One series of an instant query. */
export interface Sample {
  readonly metric: Record<string, string>;
  readonly value: [number, string];
}

export interface AlertingRule {
  readonly type: 'alerting' | 'recording';
  readonly name: string;
  readonly query: string;
  readonly health: string;
  readonly lastError?: string;
  readonly lastEvaluation: string;
}

export interface RuleGroup {
  readonly name: string;
  readonly rules: readonly AlertingRule[];
}

export interface Alert {
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
  readonly state: 'pending' | 'firing';
  readonly activeAt: string;
  readonly value: string;
}

/** Every Prometheus still running: a crashed script or a failed assertion must not leave one behind. */
const running = new Set<Child>();
process.on('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

export class Prometheus {
  readonly url: string;
  readonly #process: Child;
  readonly #dir: string;

  private constructor(url: string, process: Child, dir: string) {
    this.url = url;
    this.#process = process;
    this.#dir = dir;
  }

  /** Starts Prometheus on `port` with `ruleFiles` and `targets`; resolves once /-/ready answers. */
  static async start(
    port: number,
    ruleFiles: readonly string[],
    targets: readonly ScrapeTarget[],
  ): Promise<Prometheus> {
    const dir = mkdtempSync(join(tmpdir(), 'labeller-prometheus-'));
    const config = join(dir, 'prometheus.yml');
    // JSON is YAML. Every second, so that short `for:` durations fire within seconds.
    writeFileSync(
      config,
      JSON.stringify({
        global: { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
        rule_files: ruleFiles,
        scrape_configs: targets.map(({ job, address, labels }) => ({
          job_name: job,
          static_configs: [{ targets: [address], labels }],
        })),
      }),
    );
    const child = start('prometheus', [
      `--config.file=${config}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
    ]);
    running.add(child);
    void child.exited.then(() => running.delete(child));
    const prometheus = new Prometheus(`http://127.0.0.1:${port}`, child, dir);
    try {
      await eventually(async () => {
        if (child.exit) throw new Error(`prometheus exited: ${child.stderr.slice(-2000)}`);
        return (await fetch(`${prometheus.url}/-/ready`)).ok;
      }, 'prometheus to be ready');
    } catch (error) {
      await prometheus.stop();
      throw error;
    }
    return prometheus;
  }

  async #get<T>(path: string, query: Record<string, string> = {}): Promise<T> {
    const response = await fetch(`${this.url}${path}?${new URLSearchParams(query)}`);
    const body = (await response.json()) as { status: string; data: T; error?: string };
    if (body.status !== 'success') throw new Error(`${path}: ${body.error ?? response.status}`);
    return body.data;
  }

  /** An instant query's series (/api/v1/query). */
  async query(expr: string): Promise<Sample[]> {
    return (await this.#get<{ result: Sample[] }>('/api/v1/query', { query: expr })).result;
  }

  /** The values of `label` on the series `match` selects (/api/v1/label/…/values). */
  labelValues(label: string, match: string): Promise<string[]> {
    return this.#get<string[]>(`/api/v1/label/${label}/values`, { 'match[]': match });
  }

  /** The rule groups loaded, with each rule's health (/api/v1/rules). */
  async rules(): Promise<RuleGroup[]> {
    return (await this.#get<{ groups: RuleGroup[] }>('/api/v1/rules')).groups;
  }

  /** The alerts pending or firing (/api/v1/alerts). */
  async alerts(): Promise<Alert[]> {
    return (await this.#get<{ alerts: Alert[] }>('/api/v1/alerts')).alerts;
  }

  /** Stops Prometheus (SIGKILL after 10 s) and removes its storage. */
  async stop(): Promise<Exit> {
    try {
      return await stop(this.#process, 'SIGTERM', 10_000);
    } finally {
      rmSync(this.#dir, { recursive: true, force: true });
    }
  }
}
