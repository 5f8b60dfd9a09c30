// `labeller admission` on a full control plane (issue 36): a Deployment's pods, which the
// ReplicaSet controller creates with generated names, carry the policies' labels from their
// create, no labeller running. What reads the name (given after admission) or the root owner
// (which admission does not see) is left to the controller. The keys a policy sets at a create
// belong to no field manager: the API server records only what the request itself carried.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { markerKeys, markerValues } from '../../src/labelling/admitted.ts';
import { fullSkip } from '../cluster/testrun.ts';
import { admission, apply, policiesSkip } from './admission.ts';
import { adminClient, configFile, create, eventually, patchLabels } from './cluster.ts';
import { deployment, list, type Meta, pod, workloadNamespace } from './workloads.ts';

const FIELD_MANAGER = 'labeller-admission-realshapes-e2e';
/** The marker annotations of this field manager's policies. */
const MARKERS = markerKeys(FIELD_MANAGER);
const TEAM = 'example.com/team';

interface Created {
  readonly metadata: Meta & {
    readonly annotations?: Record<string, string>;
    readonly managedFields?: readonly { readonly manager: string; readonly fieldsV1?: object }[];
  };
}

describe('labeller admission on a full control plane', { skip: await policiesSkip(fullSkip) }, () => {
  test("a Deployment's pods, made by the ReplicaSet controller, carry the labels from their create", async () => {
    const ns = await workloadNamespace('admit-pods');
    await patchLabels(`/api/v1/namespaces/${ns}`, { team: 'payments' });
    const { stdout, stderr } = await admission([
      '--field-manager',
      FIELD_MANAGER,
      '--config',
      configFile(`
labels:
  ${TEAM}: "{{namespace.labels.team}}"
annotations:
  example.com/name: "{{name}}"
kinds:
  - resource: deployments
    namespaces: [${ns}]
  - resource: pods
    namespaces: [${ns}]
    labels:
      example.com/workload: "{{root.kind}}.{{root.name}}"
`),
    ]);
    assert.match(stderr, /"msg":"left to the controller".*"key":"example.com\/workload"/);
    await apply(stdout, FIELD_MANAGER);
    // Policies are in force within a few seconds: a Deployment created before would be missed.
    let probes = 0;
    await eventually(async () => {
      const probe = await create<Created>(`/apis/apps/v1/namespaces/${ns}/deployments`, {
        ...deployment(`probe-${probes++}`, 0),
      });
      return probe.metadata.labels?.[TEAM] === 'payments';
    }, 'the policies in force');
    // The pods' policy is another one, which the API server may enforce a moment later: a dry-run pod create says.
    const admin = await adminClient();
    await eventually(async () => {
      const probe = await admin.json<Created>('POST', `/api/v1/namespaces/${ns}/pods`, {
        query: { dryRun: 'All' },
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(pod('probe', { app: 'probe' })),
      });
      return probe.metadata.labels?.[TEAM] === 'payments';
    }, "the pods' policy in force");

    const web = await create<Created>(`/apis/apps/v1/namespaces/${ns}/deployments`, deployment('web', 2));
    assert.equal(web.metadata.labels?.[TEAM], 'payments');
    assert.equal(web.metadata.annotations?.['example.com/name'], 'web');

    const made = await eventually(async () => {
      const found = await list<Created>(`/api/v1/namespaces/${ns}/pods`, 'app=web');
      return found.length === 2 && found;
    }, 'the ReplicaSet controller has made the pods');
    for (const pod of made) {
      const { labels = {}, annotations = {}, managedFields = [] } = pod.metadata;
      // No labeller runs: what the pod carries, the create gave it.
      assert.equal(labels[TEAM], 'payments', pod.metadata.name);
      assert.deepEqual(markerValues('labels', annotations[MARKERS.labels] ?? ''), {
        [TEAM]: 'payments',
      });
      assert.equal(labels['example.com/workload'], undefined, 'the root owner is for the controller');
      assert.equal(annotations['example.com/name'], undefined, 'a generated name is given after admission');
      assert.equal(annotations[MARKERS.annotations], undefined);
      assert.ok(managedFields.some((entry) => entry.manager === 'kube-controller-manager'), 'the creator');
      assert.doesNotMatch(JSON.stringify(managedFields), /example\.com\/team|admitted/, 'set at admission: no owner');
    }
    // Generated names: the controller's `{{name}}` would be theirs, which it sets once they exist.
    for (const pod of made) assert.match(pod.metadata.name, /^web-[a-z0-9]+-[a-z0-9]+$/);
  });
});
