import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Metrics } from './metrics.ts';

/** Every series a controller and its informer report, each sample taken once. */
function exercise(metrics: Metrics, controller: string, informer: string) {
  const reported = metrics.controller(controller, 2);
  reported.reconciled('success', 0.01);
  reported.reconciled('error', 0.02);
  reported.activeWorkers(1);
  reported.queue.adds();
  reported.queue.depth(3);
  reported.queue.retries();
  reported.queue.queueLatency(0.001);
  reported.queue.workDuration(0.002);
  const labels = metrics.labels(controller);
  labels.applied('labels', 2);
  labels.removed('annotations', 1);
  labels.conflict();
  labels.fight('labels');
  metrics.objects(controller, async () => ({ managed: 1, pending: 1, conflicts: 1, held: 1 }));
  const cache = metrics.informer(informer);
  cache.cached(5);
  cache.watchRestarted();
  cache.relisted();
  return cache;
}

/** The exposition's series lines that name `name` as a label value. */
async function seriesOf(metrics: Metrics, name: string): Promise<string[]> {
  const text = await metrics.registry.metrics();
  return text.split('\n').filter((line) => !line.startsWith('#') && line.includes(`"${name}"`));
}

test('a controller removed by a reload leaves no series: its informer stopped, then forget()', async () => {
  const metrics = new Metrics();
  const removed = exercise(metrics, 'configmaps/shop', 'configmaps/shop');
  exercise(metrics, 'deployments.apps', 'deployments.apps');
  assert.ok((await seriesOf(metrics, 'configmaps/shop')).length > 20, 'every kind of series was reported');
  const kept = await seriesOf(metrics, 'deployments.apps');

  // What the kind set does: the kind's caches are let go (the informer stops), then its metrics.
  removed.stopped();
  metrics.forget('configmaps/shop');

  assert.deepEqual(await seriesOf(metrics, 'configmaps/shop'), []);
  assert.deepEqual(await seriesOf(metrics, 'deployments.apps'), kept, 'the other controller keeps its series');
});

test('labeller_fights_total starts at 0 for both fields, so increase() counts the first fight', async () => {
  const metrics = new Metrics();
  metrics.labels('configmaps').fight('annotations');
  const text = await metrics.registry.metrics();
  assert.match(text, /^labeller_fights_total\{controller="configmaps",field="labels"\} 0$/m);
  assert.match(text, /^labeller_fights_total\{controller="configmaps",field="annotations"\} 1$/m);
});

test('labeller_coverage_ratio: per kind and configured label, the share carrying its desired value; 1 with no objects', async () => {
  const metrics = new Metrics();
  metrics.objects('pods', async () => ({
    managed: 1,
    pending: 1,
    conflicts: 0,
    held: 0,
    coverage: [{ key: 'example.com/cost-center', objects: 4, covered: 3 }, { key: 'team', objects: 0, covered: 0 }],
  }));
  const text = await metrics.registry.metrics();
  assert.match(text, /^labeller_coverage_ratio\{kind="pods",key="example.com\/cost-center"\} 0\.75$/m);
  assert.match(text, /^labeller_coverage_ratio\{kind="pods",key="team"\} 1$/m);
  metrics.forget('pods');
  assert.doesNotMatch(await metrics.registry.metrics(), /^labeller_coverage_ratio\{/m);
});

test('labeller_ready follows /readyz at each scrape; labeller_objects_conflicting counts objects in conflict', async () => {
  const metrics = new Metrics();
  assert.match(await metrics.registry.metrics(), /^labeller_ready 0$/m, 'not ready until a readiness is given');
  let problems = ['configmaps: waiting for the first list'];
  metrics.readiness(() => problems.length === 0);
  assert.match(await metrics.registry.metrics(), /^labeller_ready 0$/m);
  problems = [];
  assert.match(await metrics.registry.metrics(), /^labeller_ready 1$/m);
  metrics.objects('pods', async () => ({ managed: 3, pending: 1, conflicts: 2, held: 0 }));
  assert.match(await metrics.registry.metrics(), /^labeller_objects_conflicting\{controller="pods"\} 2$/m);
});

test('labeller_policy_reports and labeller_policy_report_results: only with --policy-reports, read at each scrape', async () => {
  const metrics = new Metrics();
  assert.doesNotMatch(await metrics.registry.metrics(), /^labeller_policy_report/m);
  metrics.policyReports(() => ({ reports: 3, clusterReports: 1, fail: 1200, warn: 4 }));
  const text = await metrics.registry.metrics();
  assert.match(text, /^labeller_policy_reports\{kind="PolicyReport"\} 3$/m);
  assert.match(text, /^labeller_policy_reports\{kind="ClusterPolicyReport"\} 1$/m);
  assert.match(text, /^labeller_policy_report_results\{result="fail"\} 1200$/m);
  assert.match(text, /^labeller_policy_report_results\{result="warn"\} 4$/m);
});
