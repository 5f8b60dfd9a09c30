// A watch that goes silent: a TCP proxy between labeller and the API server stops forwarding
// without closing anything (a load balancer that lost its flows). The watcher's idle timeout must
// notice and a new watch must deliver what happened meanwhile, on Node and on Deno: first with
// labeller's own watcher in a small script (test/faults/watchprinter.ts), then with the real CLI.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { Arrivals, lineSplitter } from '../process/lines.ts';
import { assertCleanExit, assertNoCrash } from '../process/crash.ts';
import { Cluster } from '../cluster/cluster.ts';
import { eventually } from '../process/eventually.ts';
import { figure } from '../process/figures.ts';
import { sharedKubeconfig, skip } from '../cluster/testrun.ts';
import { Labeller, watchFailed } from '../process/labeller.ts';
import { type Runtime, tsCommand } from '../process/runtime.ts';
import { FaultProxy } from '../cluster/faultproxy.ts';
import { sleep } from '../process/sleep.ts';

interface Printed {
  readonly t: number;
  readonly type: string;
  readonly name?: string;
  readonly error?: string;
  readonly retryInMs?: number;
}

/** test/faults/watchprinter.ts as a child process, its events collected. */
class WatchPrinter {
  readonly #printed = new Arrivals<Printed>();
  readonly events: readonly Printed[] = this.#printed.items;
  readonly child: ChildProcess;
  stderr = '';

  constructor(runtime: Runtime, args: readonly string[]) {
    const [bin, prefix] = tsCommand(runtime, 'test/faults/watchprinter.ts');
    this.child = spawn(bin, [...prefix, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stdout?.setEncoding('utf8').on(
      'data',
      lineSplitter((line) => {
        if (line.startsWith('{')) this.#printed.push(JSON.parse(line) as Printed);
      }),
    );
    this.child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr += chunk;
    });
    this.child.on('exit', (code) => this.#printed.end(`watch printer exited (${code})`));
  }

  next(predicate: (e: Printed) => boolean, from: number, timeoutMs: number): Promise<Printed> {
    return this.#printed.waitFor(predicate, {
      timeoutMs,
      from,
      context: () => `got ${JSON.stringify(this.events.slice(from))}\n${this.stderr}`,
    });
  }

  async stop(): Promise<number | null> {
    const exited = new Promise<number | null>((resolve) => {
      if (this.child.exitCode !== null) resolve(this.child.exitCode);
      else this.child.once('exit', (code) => resolve(code));
    });
    this.child.stdin?.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5000);
    const code = await exited;
    clearTimeout(timer);
    return code;
  }
}

const TIMEOUT_SECONDS = 2;
const IDLE_MS = 4000;

describe('a watch that goes silent', { skip }, () => {
  let cluster: Cluster;
  before(async () => {
    cluster = await Cluster.connect(sharedKubeconfig());
  });
  after(() => cluster?.close());

  for (const runtime of ['node', 'deno'] as Runtime[]) {
    for (const mode of ['frozen until resumed', 'open connections frozen for good, new ones work'] as const) {
      test(`labeller's watcher, ${mode}: the idle timeout fires and a new watch delivers the missed change (${runtime})`, async (t) => {
        const ns = await cluster.namespace(`silent-${runtime}`);
        const cms = `/api/v1/namespaces/${ns}/configmaps`;
        const proxy = await FaultProxy.start(cluster.server);
        const printer = new WatchPrinter(runtime, [
          cluster.writeKubeconfig({ server: proxy.url }),
          ns,
          String(TIMEOUT_SECONDS),
          String(IDLE_MS),
        ]);
        try {
          await printer.next((e) => e.type === 'initDone', 0, 30_000);
          await cluster.post(cms, { metadata: { name: 'before' } });
          await printer.next((e) => e.type === 'apply' && e.name === 'before', 0, 10_000);
          // Healthy watches end every TIMEOUT_SECONDS and resume: no idle error while traffic flows.
          await sleep(IDLE_MS + 1000);
          assert.deepEqual(printer.events.filter((e) => e.type === 'error'), [], 'no error while the connection works');

          const mark = printer.events.length;
          const silentAt = Date.now();
          if (mode === 'frozen until resumed') proxy.pause();
          else proxy.freezeExisting();
          await cluster.post(cms, { metadata: { name: 'during' } });
          const idle = await printer.next((e) => e.type === 'error', mark, IDLE_MS + 10_000);
          assert.match(idle.error ?? '', /WatchIdleError: watch .* was silent for \d+ s/);
          const detected = idle.t - silentAt;
          // The frozen connection never ends by itself: only the idle timeout can end it (the slack
          // is for a loaded machine).
          assert.ok(detected <= IDLE_MS + 5000, `silence detected after ${detected} ms (idle timeout ${IDLE_MS} ms)`);
          const resumedAt = Date.now();
          if (mode === 'frozen until resumed') proxy.resume();
          const connectionsBefore = proxy.connections;
          const missed = await printer.next((e) => e.type === 'apply' && e.name === 'during', mark, 15_000).catch(
            (error: unknown) => {
              throw new Error(
                `${String(error)}\n(new connections opened after the silence began: ${
                  proxy.connections - connectionsBefore
                })`,
              );
            },
          );
          await cluster.post(cms, { metadata: { name: 'after' } });
          await printer.next((e) => e.type === 'apply' && e.name === 'after', mark, 10_000);
          figure(
            t,
            `silent watch (${runtime}, ${mode}): detected after ${(detected / 1000).toFixed(1)} s (idle timeout ${
              IDLE_MS / 1000
            } s), ` +
              `missed change delivered ${
                ((missed.t - resumedAt) / 1000).toFixed(1)
              } s after the connection came back; ` +
              `${proxy.connections - connectionsBefore} new connections, ${
                printer.events.slice(mark).filter((e) => e.type === 'error').length
              } errors: ${
                printer.events.slice(mark).filter((e) => e.type === 'error').map((e) =>
                  `${e.error?.split(':')[0]} (retry in ${e.retryInMs} ms)`
                ).join(', ')
              }`,
          );
        } finally {
          const code = await printer.stop();
          await proxy.close();
          assert.equal(code, 0, printer.stderr);
          assertNoCrash(printer.stderr);
        }
      });
    }

    // (The connection frozen for good is the same bug on both runtimes: checked on Node only.)
    for (
      const mode of runtime === 'node'
        ? ['frozen until resumed', 'open connections frozen for good, new ones work'] as const
        : ['frozen until resumed'] as const
    ) {
      test(`the labeller CLI with --watch-timeout 2s, ${mode}: reported, re-established, the missed object labelled (${runtime})`, async (t) => {
        const ns = await cluster.namespace(`silent-cli-${runtime}`);
        const cms = `/api/v1/namespaces/${ns}/configmaps`;
        await cluster.post(cms, { metadata: { name: 'before' } });
        const proxy = await FaultProxy.start(cluster.server);
        const labeller = new Labeller([
          '--kinds',
          'configmaps',
          '--label',
          'team=platform',
          '--namespace',
          ns,
          '--watch-timeout',
          '2s',
        ], { kubeconfig: cluster.writeKubeconfig({ server: proxy.url }), runtime });
        try {
          await eventually(
            async () => (await cluster.labelsOf(`${cms}/before`))['team'] === 'platform',
            'the first label',
            30_000,
          );
          const mark = labeller.logs.length;
          const silentAt = Date.now();
          if (mode === 'frozen until resumed') proxy.pause();
          else proxy.freezeExisting();
          await cluster.post(cms, { metadata: { name: 'during' } });
          const failure = await labeller.waitForLog(
            (l) => watchFailed(l) && /silent/.test(String(l['error'])),
            15_000,
            mark,
          );
          const reportedAt = labeller.arrivals[labeller.logs.indexOf(failure)]!;
          if (mode === 'frozen until resumed') proxy.resume();
          await eventually(
            async () => (await cluster.labelsOf(`${cms}/during`))['team'] === 'platform',
            'the object created during the silence to be labelled',
            15_000,
          );
          figure(
            t,
            `silent watch (labeller CLI, ${runtime}, ${mode}): reported after ${
              ((reportedAt - silentAt) / 1000).toFixed(1)
            } s, missed object labelled ${((Date.now() - reportedAt) / 1000).toFixed(1)} s after that`,
          );
        } finally {
          const exit = await labeller.stop();
          labeller.kill();
          await proxy.close();
          assertCleanExit(exit);
        }
      });
    }
  }
});
