// What test/run.ts hands the e2e tests through the environment: the shared cluster (E2E_KUBECONFIG),
// its etcd and audit log, or why e2e cannot run here. Free of node:test hooks.
/** Why the e2e tests cannot run, or false when a cluster is there. Pass it as `{ skip }` to describe(). */
export const skip: string | false = process.env['E2E_NOT_RUN']
  ? `e2e not run: ${process.env['E2E_NOT_RUN'].split('\n')[0]}`
  : process.env['E2E_KUBECONFIG']
  ? false
  : 'e2e not run: no cluster (run the tests with `npm test`, which starts one)';

/**
 * Why a test file that needs a control plane of its own (to kill its API server or compact its
 * etcd) cannot run, or false. It can whenever test/run.ts could start the shared one.
 */
export const ownSkip: string | false = skip ||
  (process.env['E2E_ETCD'] || process.env['KUBEBUILDER_ASSETS']
    ? false
    : "needs the project's own control plane binaries (the run uses an existing cluster)");

/**
 * Why a test of objects the cluster's own controllers make (Deployments' ReplicaSets and Pods,
 * garbage collection, namespace finalization, tokens) cannot run, or false. test/run.ts gives
 * the *-realshapes.test.ts files a full control plane, or the existing cluster.
 */
export const fullSkip: string | false = skip ||
  (process.env['E2E_FULL_CLUSTER'] === 'true'
    ? false
    : 'needs a cluster whose controllers run: test/run.ts gives *-realshapes.test.ts files one');

/** The shared cluster's kubeconfig (from test/run.ts). */
export function sharedKubeconfig(): string {
  const path = process.env['E2E_KUBECONFIG'];
  if (!path) throw new Error('E2E_KUBECONFIG is not set: run the tests with `npm test`');
  return path;
}

/** Why request counting is impossible here (an existing cluster has no audit log we can read), or false. */
export const auditSkip: string | false = skip ||
  (process.env['E2E_AUDIT_LOG'] ? false : "needs the audit log of the project's own control plane");

/** The shared cluster's audit log (from test/run.ts). */
export function sharedAuditLog(): string {
  const path = process.env['E2E_AUDIT_LOG'];
  if (!path) throw new Error('E2E_AUDIT_LOG is not set');
  return path;
}
