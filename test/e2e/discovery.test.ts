// Discovery when an aggregated API is down: an APIService whose Service does not exist, which the
// real kube-apiserver reports unavailable (503 for its group version, "Stale" in aggregated
// discovery). The groups that answered are used, the failed one is reported, and a kind of that
// group is looked for again until it is served. On a control plane of this file's own, since the
// broken APIService would show in every other test's discovery.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ControlPlane } from '../controlplane/controlplane.ts';
import { ApiError } from '../../src/apimachinery/errors.ts';
import { discover, discoverByGroupVersion, type Discovery, StaleGroupError } from '../../src/kube/discovery.ts';
import { Cluster } from '../cluster/cluster.ts';
import { eventually } from '../process/eventually.ts';
import { startControlPlane } from '../controlplane/controlplane.ts';
import { ownSkip } from '../cluster/testrun.ts';
import { Labeller } from '../process/labeller.ts';
import { freePorts } from '../controlplane/process.ts';

const GROUP = 'broken.labeller.test';
const APISERVICE = `/apis/apiregistration.k8s.io/v1/apiservices/v1.${GROUP}`;

/** The HTTP status a GET of `path` answers with. */
async function statusOf(cluster: Cluster, path: string): Promise<number> {
  try {
    const response = await cluster.client.request('GET', path);
    response.resume();
    return response.statusCode ?? 0;
  } catch (error) {
    if (error instanceof ApiError) return error.status;
    throw error;
  }
}

/** The resource names of one group in a discovery result. */
const namesIn = (discovery: Discovery, group: string) =>
  discovery.resources.filter((r) => r.group === group).map((r) => r.resource);

describe('discovery with an aggregated API that is down', { skip: ownSkip }, () => {
  let cp: ControlPlane;
  let cluster: Cluster;
  before(async () => {
    cp = await startControlPlane();
    cluster = await Cluster.connect(cp.kubeconfig);
    await cluster.post('/apis/apiregistration.k8s.io/v1/apiservices', {
      apiVersion: 'apiregistration.k8s.io/v1',
      kind: 'APIService',
      metadata: { name: `v1.${GROUP}` },
      spec: {
        group: GROUP,
        version: 'v1',
        groupPriorityMinimum: 1000,
        versionPriority: 15,
        insecureSkipTLSVerify: true,
        service: { namespace: 'default', name: 'nowhere' },
      },
    });
    // Until the aggregator has judged it, the group version is not reported unavailable yet.
    await eventually(
      async () => (await statusOf(cluster, `/apis/${GROUP}/v1`)) === 503,
      `/apis/${GROUP}/v1 to answer 503`,
    );
  });
  after(async () => {
    await cluster?.close();
    await cp?.stop();
  });

  test('per group version (servers without aggregated discovery): the groups that answered are used, the one that failed is reported with its error', async () => {
    const found = await discoverByGroupVersion(cluster.client);
    assert.ok(namesIn(found, '').includes('configmaps'));
    assert.ok(namesIn(found, 'apps').includes('deployments'));
    assert.deepEqual(namesIn(found, GROUP), []);
    assert.deepEqual(found.failedGroups.map((f) => f.groupVersion), [`${GROUP}/v1`]);
    const [failed] = found.failedGroups;
    assert.ok(failed?.error instanceof ApiError && failed.error.status === 503, String(failed?.error));
  });

  test('aggregated discovery: the group version is reported as stale', async () => {
    const found = await discover(cluster.client);
    assert.ok(namesIn(found, '').includes('configmaps'));
    assert.deepEqual(found.failedGroups.map((f) => f.groupVersion), [`${GROUP}/v1`]);
    assert.ok(found.failedGroups[0]?.error instanceof StaleGroupError);
  });

  test('labeller reports the failed group, waits for a kind of it instead of exiting 2, and labels it once it is served', async () => {
    const ns = await cluster.namespace('discovery');
    const labeller = new Labeller(['--kinds', `widgets.${GROUP}`, '--label', 'team=platform', '--namespace', ns], {
      kubeconfig: cp.kubeconfig,
    });
    try {
      const warning = await labeller.waitForLog((l) => l.msg.startsWith('API group unavailable'), 60_000);
      assert.equal(warning['groupVersion'], `${GROUP}/v1`);
      assert.ok(labeller.running, `labeller exited: ${labeller.stderr.slice(-1000)}`);

      // The group comes back, served by a CRD instead of the missing service.
      await cluster.delete(APISERVICE);
      await eventually(async () => (await statusOf(cluster, APISERVICE)) === 404, 'the APIService to be gone');
      await cluster.createCrd(GROUP, 'widgets', 'Widget');
      await cluster.post(`/apis/${GROUP}/v1/namespaces/${ns}/widgets`, {
        apiVersion: `${GROUP}/v1`,
        kind: 'Widget',
        metadata: { name: 'w1' },
      });
      // startWhenServed looks again after 5 s, then 10 s, ...
      await labeller.waitForLog((l) => l.msg === 'kind is served now; watching it', 90_000);
      await eventually(
        async () => (await cluster.labelsOf(`/apis/${GROUP}/v1/namespaces/${ns}/widgets/w1`))['team'] === 'platform',
        'the widget to be labelled',
        60_000,
      );
    } finally {
      const exit = await labeller.stop();
      assert.equal(exit.code, 0, exit.stderr.slice(-2000));
    }
  });

  test('a CRD removed while every configured kind is served: its list answers 404, discovery is asked again, the kind stops and labeller stays ready', async () => {
    const group = 'gone.labeller.test';
    const ns = await cluster.namespace('discovery-gone');
    await cluster.createCrd(group, 'gadgets', 'Gadget');
    await cluster.post(`/apis/${group}/v1/namespaces/${ns}/gadgets`, {
      apiVersion: `${group}/v1`,
      kind: 'Gadget',
      metadata: { name: 'g1' },
    });
    const [port] = await freePorts(1);
    const labeller = new Labeller(
      [
        '--kinds',
        `configmaps,gadgets.${group}`,
        '--label',
        'team=platform',
        '--namespace',
        ns,
        '--health-probe-bind-address',
        `127.0.0.1:${port}`,
      ],
      { kubeconfig: cp.kubeconfig },
    );
    const ready = async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.ok;
    try {
      await eventually(
        async () => (await cluster.labelsOf(`/apis/${group}/v1/namespaces/${ns}/gadgets/g1`))['team'] === 'platform',
        'the gadget to be labelled',
        60_000,
      );
      await eventually(ready, '/readyz to answer 200');
      // Every kind is served: nothing asks for periodic discovery, only the 404 can.
      await cluster.deleteCrd(group, 'gadgets');
      const stopped = await labeller.waitForLog(
        (l) => l.msg === 'kind no longer served; stopped until it is again',
        60_000,
      );
      assert.match(String(stopped['controller']), /gadgets/);
      await eventually(ready, '/readyz to answer 200 again', 30_000);
    } finally {
      const exit = await labeller.stop();
      assert.equal(exit.code, 0, exit.stderr.slice(-2000));
    }
  });
});
