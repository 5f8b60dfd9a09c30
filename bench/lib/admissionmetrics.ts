// The API server's own account of admission, from its /metrics, read before and after a batch of
// creates (--admission, bench/lib/admission.ts) and differenced:
//   - apiserver_admission_controller_admission_duration_seconds{name="MutatingAdmissionPolicy",
//     operation="CREATE",type="admit"}: the MutatingAdmissionPolicy plugin's time per create, the
//     policies matched and applied (it runs, matching nothing, without them too);
//   - apiserver_admission_step_admission_duration_seconds{operation="CREATE",type="admit"}: the
//     whole mutating step, every plugin;
//   - apiserver_mutating_admission_policy_check_duration_seconds{policy=…}: each evaluation of a
//     policy (kube-apiserver 1.37: staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/
//     mutating/metrics/metrics.go, labelled by policy, binding and error type).
// Their buckets are coarse (the plugin's from 5 ms, the policy's 0.5 µs, 1 ms, 10 ms, 100 ms, 1 s),
// so what they tell is a mean (sum ÷ count) and, for the policy, the share under 1 ms. They count
// every CREATE the server admitted meanwhile (the controllers' Events, leases…): the counts say
// how many that was beside the batch.
import { readBody } from '../../src/kube/body.ts';
import type { KubeClient } from '../../src/kube/client.ts';

export interface AdmissionCounters {
  /** The MutatingAdmissionPolicy plugin on CREATE: admissions and their seconds in all. */
  readonly pluginCount: number;
  readonly pluginSeconds: number;
  /** The mutating admission step on CREATE, every plugin. */
  readonly stepCount: number;
  readonly stepSeconds: number;
  /** Evaluations of the policy named, their seconds, and those under 1 ms. */
  readonly checks: number;
  readonly checkSeconds: number;
  readonly checksUnder1ms: number;
}

const PLUGIN = 'apiserver_admission_controller_admission_duration_seconds';
const STEP = 'apiserver_admission_step_admission_duration_seconds';
const CHECK = 'apiserver_mutating_admission_policy_check_duration_seconds';

/** The sum of the samples of `metric` whose labels include `labels` (a histogram's series are split by labels we do not fix). */
function total(text: string, metric: string, labels: Readonly<Record<string, string>>): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${metric}{`)) continue;
    if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

/** The counters now, for the policy `policy` (it may not exist yet: its counters are then 0). */
export async function admissionCounters(admin: KubeClient, policy: string): Promise<AdmissionCounters> {
  const text = await readBody(await admin.request('GET', '/metrics'));
  const plugin = { name: 'MutatingAdmissionPolicy', operation: 'CREATE', type: 'admit' };
  const step = { operation: 'CREATE', type: 'admit' };
  const check = { policy };
  return {
    pluginCount: total(text, `${PLUGIN}_count`, plugin),
    pluginSeconds: total(text, `${PLUGIN}_sum`, plugin),
    stepCount: total(text, `${STEP}_count`, step),
    stepSeconds: total(text, `${STEP}_sum`, step),
    checks: total(text, `${CHECK}_count`, check),
    checkSeconds: total(text, `${CHECK}_sum`, check),
    checksUnder1ms: total(text, `${CHECK}_bucket`, { ...check, le: '0.001' }),
  };
}

/** What the counters grew by from `before` to `after`. */
export function countersBetween(before: AdmissionCounters, after: AdmissionCounters): AdmissionCounters {
  return {
    pluginCount: after.pluginCount - before.pluginCount,
    pluginSeconds: after.pluginSeconds - before.pluginSeconds,
    stepCount: after.stepCount - before.stepCount,
    stepSeconds: after.stepSeconds - before.stepSeconds,
    checks: after.checks - before.checks,
    checkSeconds: after.checkSeconds - before.checkSeconds,
    checksUnder1ms: after.checksUnder1ms - before.checksUnder1ms,
  };
}
