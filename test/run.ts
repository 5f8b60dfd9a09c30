// The test command: starts one control plane for the whole run, runs the unit and e2e tests
// with node:test against it, and always tears it down (on failure and on Ctrl-C too).
//
//   E2E_KUBECONFIG=path  run the e2e tests against an existing cluster instead
//   USE_EXISTING_CLUSTER=true      the same, with $KUBECONFIG or ~/.kube/config (envtest's convention)
//   KUBEBUILDER_ASSETS=dir         use ready kube-apiserver and etcd binaries instead of building them
//   CI=true                        a control plane that cannot start fails the run
import { execFileSync, spawn } from 'node:child_process';
import { globSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { type ControlPlane, ControlPlaneUnavailable, startControlPlane } from './controlplane/controlplane.ts';
import { ensureTools } from './harness/tools.ts';

// `node --import tsx test/run.ts [--unit-only | --e2e-only] [test files…]`
const args = new Set(process.argv.slice(2));
const only = [...args].filter((a) => a.endsWith('.ts'));
const pick = (files: string[]): string[] => (only.length ? files.filter((f) => only.includes(f)) : files);
// Unit tests need no cluster: those beside the sources, and test/unit/ (in-process property tests).
const unit = args.has('--e2e-only')
  ? []
  : pick([...globSync('src/**/*.test.ts'), ...globSync('test/unit/**/*.test.ts')]);
const e2e = args.has('--unit-only') ? [] : pick(globSync('test/e2e/**/*.test.ts'));
const ci = process.env['CI'] === 'true';

const abort = new AbortController();
let controlPlane: Promise<ControlPlane> | undefined;
let finishing: Promise<never> | undefined;
/** Tears the control plane down, then exits; the first caller's status wins. */
const finish = (status: number): Promise<never> => {
  finishing ??= (async () => {
    await controlPlane?.then((c) => c.stop(), () => {});
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

const env: Record<string, string | undefined> = { ...process.env };
let notRun: string | undefined;
if (e2e.length > 0) {
  const existing = process.env['E2E_KUBECONFIG'] ??
    (process.env['USE_EXISTING_CLUSTER'] === 'true'
      ? (process.env['KUBECONFIG'] ?? join(homedir(), '.kube', 'config'))
      : undefined);
  try {
    const tools = ensureTools();
    env['PATH'] = `${tools}${delimiter}${process.env['PATH'] ?? ''}`;
    console.log(`helm and kubectl from ${tools}`);
    if (existing) {
      env['E2E_KUBECONFIG'] = existing;
      console.log(`e2e tests run against the existing cluster in ${existing}`);
    } else {
      const started = performance.now();
      controlPlane = startControlPlane(abort.signal);
      const cp = await controlPlane;
      env['E2E_KUBECONFIG'] = cp.kubeconfig;
      env['E2E_ETCD'] = cp.etcd;
      env['E2E_AUDIT_LOG'] = cp.auditLog;
      const version = execFileSync(join(tools, 'kubectl'), ['--kubeconfig', cp.kubeconfig, 'version', '-o', 'json'], {
        encoding: 'utf8',
      });
      const server = (JSON.parse(version) as { serverVersion?: { gitVersion?: string } }).serverVersion?.gitVersion;
      console.log(
        `control plane: kube-apiserver ${server} at ${cp.server}, ready in ${
          ((performance.now() - started) / 1000).toFixed(1)
        } s`,
      );
    }
  } catch (error) {
    if (abort.signal.aborted) await finish(130);
    if (error instanceof ControlPlaneUnavailable && !ci) {
      notRun = error.message;
      env['E2E_NOT_RUN'] = notRun;
    } else {
      console.error(error);
      await finish(1);
    }
  }
}

const status = abort.signal.aborted ? 130 : await new Promise<number>((resolve) => {
  child = spawn(
    process.execPath,
    ['--import', 'tsx', '--test', '--test-concurrency=4', '--test-timeout=600000', ...unit, ...e2e],
    { stdio: 'inherit', env },
  );
  child.on('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
});
if (notRun) {
  console.error(`\n*** The e2e tests did NOT run: ${notRun}\n*** Only the unit tests ran; this is not a full pass.`);
}
await finish(abort.signal.aborted ? 130 : status);
