import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Finding } from './findings.ts';
import { compareFindings, OMITTED_ANNOTATION, reportName, reportOf, reportSelector } from './report.ts';

const finding = (name: string, rule = 'team', fields: Partial<Finding> = {}): Finding => ({
  result: 'fail',
  state: 'shortfall',
  policy: 'kinds.yaml: kinds[0]',
  rule,
  message: 'its namespace has no label team, so the key is not wanted on this object',
  object: { apiVersion: 'v1', kind: 'Pod', name, namespace: 'shop', uid: `uid-${name}` },
  ...fields,
});

test('a namespace report: one result per object and key, naming the rule, the object and why; fail and warn summed', () => {
  const held = finding('db', 'cost', { result: 'warn', state: 'held', message: 'source catalog has not loaded' });
  const report = reportOf('shop', [finding('web'), held], { fieldManager: 'labeller' });
  assert.deepEqual({ ...report, results: report.results.slice(0, 1) }, {
    apiVersion: 'wgpolicyk8s.io/v1alpha2',
    kind: 'PolicyReport',
    metadata: {
      name: 'labeller-labels',
      namespace: 'shop',
      labels: { 'app.kubernetes.io/managed-by': 'labeller', 'labeller/field-manager': 'labeller' },
    },
    summary: { pass: 0, fail: 1, warn: 1, error: 0, skip: 0 },
    results: [
      {
        source: 'labeller',
        policy: 'kinds.yaml: kinds[0]',
        rule: 'team',
        category: 'labels',
        result: 'fail',
        message: 'its namespace has no label team, so the key is not wanted on this object',
        properties: { state: 'shortfall' },
        resources: [{ apiVersion: 'v1', kind: 'Pod', name: 'web', namespace: 'shop', uid: 'uid-web' }],
      },
    ],
  });
  const [, second] = report.results;
  assert.deepEqual([second?.result, second?.rule, second?.message, second?.properties], [
    'warn',
    'cost',
    'source catalog has not loaded',
    { state: 'held' },
  ]);
});

test("cluster-scoped objects' report is the ClusterPolicyReport; its resources name no namespace", () => {
  const node = finding('node-1', 'zone', {
    object: { apiVersion: 'v1', kind: 'Node', name: 'node-1', namespace: '', uid: 'n' },
  });
  const report = reportOf('', [node], { fieldManager: 'labeller' });
  assert.equal(report.kind, 'ClusterPolicyReport');
  assert.equal(report.metadata.namespace, undefined);
  assert.deepEqual(report.results[0]?.resources, [{ apiVersion: 'v1', kind: 'Node', name: 'node-1', uid: 'n' }]);
});

test('bounded: past maxResults the rest are counted in the summary and said in an annotation; the kept ones are the first in a stable order', () => {
  const findings = Array.from({ length: 10 }, (_, i) => finding(`pod-${i}`));
  const warned = finding('a-first-by-name', 'team', { result: 'warn', state: 'held' });
  const shuffled = [warned, ...findings].reverse();
  const report = reportOf('shop', shuffled, { fieldManager: 'labeller', maxResults: 4 });
  assert.deepEqual(report.summary, { pass: 0, fail: 10, warn: 1, error: 0, skip: 0 });
  assert.deepEqual(report.metadata.annotations, { [OMITTED_ANNOTATION]: '7' });
  // Fail before warn, then by name: the same four whatever order the caches gave them in.
  assert.deepEqual(report.results.map((r) => r.resources[0]?.name), ['pod-0', 'pod-1', 'pod-2', 'pod-3']);
  const again = reportOf('shop', [...findings.slice(5), warned, ...findings.slice(0, 5)], {
    fieldManager: 'labeller',
    maxResults: 4,
  });
  assert.equal(JSON.stringify(again), JSON.stringify(report));
  assert.equal(reportOf('shop', findings, { fieldManager: 'labeller' }).metadata.annotations, undefined);
});

test('the order: fail before warn, then kind, namespace, name, uid, entry and key', () => {
  const sorted = [
    finding('b', 'y'),
    finding('a', 'team', { result: 'warn' }),
    finding('b', 'x'),
    finding('a', 'z', {
      object: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'z', namespace: 'shop', uid: 'd' },
    }),
  ].sort(compareFindings);
  assert.deepEqual(sorted.map((f) => `${f.result} ${f.object.kind} ${f.object.name} ${f.rule}`), [
    'fail Deployment z z',
    'fail Pod b x',
    'fail Pod b y',
    'warn Pod a team',
  ]);
});

test("the report's name and labels follow the field manager: two labellers never write each other's", () => {
  assert.equal(reportName('labeller'), 'labeller-labels');
  assert.match(reportName('Team Labeller'), /^team-labeller-[0-9a-f]{8}-labels$/);
  assert.notEqual(reportName('Team Labeller'), reportName('team labeller'));
  assert.equal(reportSelector('labeller'), 'app.kubernetes.io/managed-by=labeller,labeller/field-manager=labeller');
});
