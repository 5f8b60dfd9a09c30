// The test command: starts the control planes for the whole run, runs the unit and e2e tests
// with node:test against them, and always tears them down (on failure and on Ctrl-C too).
//
// Two control planes, each started only if a test needs it: the bare API server (seconds to
// start; nothing acts on the objects a test makes) for most files, and a full one (controllers,
// scheduler, simulated nodes: test/controlplane/controllers.ts) for the *-realshapes.test.ts
// files, which test objects the cluster's own controllers make. The full one would disturb the
// others (its garbage collector removes objects whose owners a test made up, its controllers add
// ReplicaSets and Pods to every Deployment), so its files run after the others, on their own.
//
//   E2E_KUBECONFIG=path  run the e2e tests against an existing cluster instead
//   USE_EXISTING_CLUSTER=true      the same, with $KUBECONFIG or ~/.kube/config (envtest's convention)
//   KUBEBUILDER_ASSETS=dir         use ready binaries instead of building them (build.sh --full lists them)
//   LABELLER_K8S_VERSION=v1.X.Y    build and test another Kubernetes version (test/controlplane/build.sh)
//   CI=true                        a control plane that cannot start fails the run
import { execFileSync, spawn } from 'node:child_process';
import { globSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { type ControlPlane, ControlPlaneUnavailable, startControlPlane } from './controlplane/controlplane.ts';
import { ensureTools } from './cluster/tools.ts';

// `node --import tsx test/run.ts [--unit-only | --e2e-only] [test files…]`
const args = new Set(process.argv.slice(2));
const only = [...args].filter((a) => a.endsWith('.ts'));
const pick = (files: string[]): string[] => (only.length ? files.filter((f) => only.includes(f)) : files);
// Unit tests need no cluster: those beside the sources, the repository's checks (test/repo/), and
// in-process tests elsewhere (*.unit.test.ts, e.g. the bad-input fuzzing of test/faults/).
const inProcess = (file: string): boolean => file.endsWith('.unit.test.ts');
const unit = args.has('--e2e-only') ? [] : pick([
  ...globSync('src/**/*.test.ts'),
  ...globSync('test/repo/**/*.test.ts'),
  ...globSync('test/**/*.unit.test.ts'),
]);
const e2e = args.has('--unit-only')
  ? []
  : pick([...globSync('test/e2e/**/*.test.ts'), ...globSync('test/faults/**/*.test.ts')].filter((f) => !inProcess(f)));
const realShapes = (file: string): boolean => file.endsWith('-realshapes.test.ts');
const e2eBare = e2e.filter((f) => !realShapes(f));
const e2eFull = e2e.filter(realShapes);
const ci = process.env['CI'] === 'true';

const abort = new AbortController();
const controlPlanes: Promise<ControlPlane>[] = [];
let finishing: Promise<never> | undefined;
/** Tears the control planes down, then exits; the first caller's status wins. */
const finish = (status: number): Promise<never> => {
  finishing ??= (async () => {
    await Promise.all(controlPlanes.map((p) => p.then((c) => c.stop(), () => {})));
    process.exit(status);
  })();
  return finishing;
};

let child: ReturnType<typeof spawn> | undefined;
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    if (abort.signal.aborted) return;
    abort.abort(signal);
    console.error(`\n${signal}: stopping the tests and the control plane`);
    child?.kill(signal);
    void finish(130);
  });
}

type Env = Record<string, string | undefined>;
const env: Env = { ...process.env };
// The *-realshapes.test.ts files' environment: the full control plane's, once started.
const fullEnv: Env = { ...env, E2E_FULL_CLUSTER: 'true' };
let notRun: string | undefined;
if (e2e.length > 0) {
  const existing = process.env['E2E_KUBECONFIG'] ??
    (process.env['USE_EXISTING_CLUSTER'] === 'true'
      ? (process.env['KUBECONFIG'] ?? join(homedir(), '.kube', 'config'))
      : undefined);
  try {
    const tools = ensureTools();
    env['PATH'] = fullEnv['PATH'] = `${tools}${delimiter}${process.env['PATH'] ?? ''}`;
    console.log(`helm and kubectl from ${tools}`);
    if (existing) {
      // An existing cluster is a real one: the realshapes files run against it too.
      env['E2E_KUBECONFIG'] = fullEnv['E2E_KUBECONFIG'] = existing;
      console.log(`e2e tests run against the existing cluster in ${existing}`);
    } else {
      /** Starts a control plane and points `into` at it. */
      const start = async (into: Env, full: boolean): Promise<void> => {
        const started = performance.now();
        const controlPlane = startControlPlane(abort.signal, { full });
        controlPlanes.push(controlPlane);
        const cp = await controlPlane;
        into['E2E_KUBECONFIG'] = cp.kubeconfig;
        into['E2E_ETCD'] = cp.etcd;
        into['E2E_AUDIT_LOG'] = cp.auditLog;
        const version = execFileSync(join(tools, 'kubectl'), ['--kubeconfig', cp.kubeconfig, 'version', '-o', 'json'], {
          encoding: 'utf8',
        });
        const server = (JSON.parse(version) as { serverVersion?: { gitVersion?: string } }).serverVersion?.gitVersion;
        console.log(
          `${
            full ? 'full control plane (controllers, scheduler, kwok nodes)' : 'control plane'
          }: kube-apiserver ${server} at ${cp.server}, ready in ${((performance.now() - started) / 1000).toFixed(1)} s`,
        );
      };
      await Promise.all([
        ...(e2eBare.length ? [start(env, false)] : []),
        ...(e2eFull.length ? [start(fullEnv, true)] : []),
      ]);
    }
  } catch (error) {
    if (abort.signal.aborted) await finish(130);
    if (error instanceof ControlPlaneUnavailable && !ci) {
      notRun = error.message;
      env['E2E_NOT_RUN'] = fullEnv['E2E_NOT_RUN'] = notRun;
    } else {
      console.error(error);
      await finish(1);
    }
  }
}

/** Runs test files with node:test in `env`; resolves with its exit status. */
const runTests = (files: readonly string[], env: Env): Promise<number> =>
  new Promise<number>((resolve) => {
    child = spawn(
      process.execPath,
      ['--import', 'tsx', '--test', '--test-concurrency=4', '--test-timeout=600000', ...files],
      { stdio: 'inherit', env },
    );
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });

let status = 0;
for (const [files, phaseEnv] of [[[...unit, ...e2eBare], env], [e2eFull, fullEnv]] as const) {
  if (abort.signal.aborted) break;
  if (files.length === 0) continue;
  // Both phases run whatever the first's outcome, so one run reports every failure.
  const code = await runTests(files, phaseEnv);
  status ||= code;
}
if (abort.signal.aborted) status = 130;
if (notRun) {
  console.error(`\n*** The e2e tests did NOT run: ${notRun}\n*** Only the unit tests ran; this is not a full pass.`);
}
await finish(abort.signal.aborted ? 130 : status);
