// A CronJob as a real cluster runs it (issue 22): on its schedule the CronJob controller makes a
// Job, the Job controller its pod, the scheduler binds it to a kwok node, kwok runs it to
// completion. The Job carries its CronJob as owner and root, the pod its Job as owner and the
// CronJob as root, also once the pod has Succeeded and the Job is Complete.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Labeller } from '../process/labeller.ts';
import { fullSkip } from '../cluster/testrun.ts';
import { configFile, create, eventually, labelsOf } from './cluster.ts';
import { controllerOf, cronJob, kubectl, list, type Meta, pods, workloadNamespace } from './workloads.ts';

const FIELD_MANAGER = 'labeller-cronjob-e2e';
const ROOT = 'example.com/root';
const OWNER = 'example.com/owner';
const CONFIG = `
labels:
  ${ROOT}: "{{root.kind}}.{{root.name}}"
  ${OWNER}: "{{owner.kind}}.{{owner.name}}"
kinds:
  - resource: jobs
  - resource: pods
`;

interface Job {
  readonly metadata: Meta;
  readonly status: { readonly conditions?: readonly { type: string; status: string }[] };
}

describe("a CronJob's Job's pods", { skip: fullSkip }, () => {
  test('the Job made on schedule and its pod carry the CronJob as root and their controller as owner, before and after completion', async () => {
    const ns = await workloadNamespace('cronjob');
    const labeller = new Labeller([
      '--config',
      configFile(CONFIG),
      '--namespace',
      ns,
      '--field-manager',
      FIELD_MANAGER,
    ]);
    try {
      await create(`/apis/batch/v1/namespaces/${ns}/cronjobs`, cronJob('nightly', { app: 'nightly' }));
      // The schedule is every minute: the first Job comes at the next minute's start.
      const { job, pod } = await eventually(
        async () => {
          const [job] = await list<Job>(`/apis/batch/v1/namespaces/${ns}/jobs`);
          const [pod] = job ? await pods(ns, `job-name=${job.metadata.name}`) : [];
          return job && pod && { job, pod };
        },
        'the first Job of the CronJob and its pod',
        90_000,
        500,
      );
      assert.equal(controllerOf(job), 'nightly', "the Job's controller is the CronJob");
      assert.equal(controllerOf(pod), job.metadata.name, "the pod's controller is the Job");

      const jobPath = `/apis/batch/v1/namespaces/${ns}/jobs/${job.metadata.name}`;
      const podPath = `/api/v1/namespaces/${ns}/pods/${pod.metadata.name}`;
      const expected = {
        [jobPath]: { [ROOT]: 'CronJob.nightly', [OWNER]: 'CronJob.nightly' },
        [podPath]: { [ROOT]: 'CronJob.nightly', [OWNER]: `Job.${job.metadata.name}` },
      };
      const allLabelled = async (): Promise<boolean> => {
        for (const [path, labels] of Object.entries(expected)) {
          const actual = await labelsOf(path);
          if (!Object.entries(labels).every(([k, v]) => actual[k] === v)) return false;
        }
        return true;
      };
      await eventually(allLabelled, 'the Job and its pod labelled', 30_000, 250);

      await kubectl(['wait', '-n', ns, '--for=condition=Complete', `job/${job.metadata.name}`, '--timeout=90s']);
      const [done] = await pods(ns, `job-name=${job.metadata.name}`);
      assert.equal(done?.status.phase, 'Succeeded', 'kwok ran the pod to completion');
      assert.ok(await allLabelled(), 'the labels stay on the completed Job and pod');
      labeller.assertRunning();
    } finally {
      assert.equal((await labeller.stop()).code, 0);
    }
  });
});
