// The chart installed on a full cluster (issue 22), its RBAC used through a token the cluster's
// own token controller minted: a Secret of type kubernetes.io/service-account-token for the
// chart's ServiceAccount, filled in by kube-controller-manager (the audit log says who wrote it,
// the token's claims say what it is). labeller, with the chart's arguments and that token, labels
// the pods of a Deployment from `root.*` and holds its Lease, with no request refused.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import type { AuditEvent } from '../cluster/audit.ts';
import { Labeller } from '../process/labeller.ts';
import { fullSkip } from '../cluster/testrun.ts';
import {
  adminClient,
  auditEvents,
  auditSkip,
  auditTail,
  create,
  createNamespace,
  eventually,
  writeKubeconfig,
} from './cluster.ts';
import { install, localArgs, only, render } from './helm.ts';
import { deployment, isReady, pods, rolledOut, workloadNamespace } from './workloads.ts';

const WORKLOAD = 'example.com/workload';
// The cluster is shared with other test files: this release's labeller selects only its own objects.
const CASE = { 'e2e.labeller/case': `token-${randomBytes(3).toString('hex')}` };

interface Secret {
  readonly data?: { readonly token?: string; readonly 'ca.crt'?: string };
}

/** The claims of a JWT (not verified: the API server does that when labeller uses it). */
function claims(jwt: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt.split('.')[1] ?? '', 'base64url').toString('utf8')) as Record<string, unknown>;
}

describe('the chart with a token from the token controller', { skip: fullSkip || auditSkip }, () => {
  test("kube-controller-manager fills the ServiceAccount token Secret; labeller runs on it with the chart's RBAC and arguments", async () => {
    const namespace = await createNamespace('token-rel');
    const target = await workloadNamespace('token-target');
    const [selector] = Object.entries(CASE).map(([k, v]) => `${k}=${v}`);
    const values = {
      selector,
      kinds: [{ resource: 'pods', labels: { [WORKLOAD]: '{{root.kind}}.{{root.name}}' } }],
    };
    const manifests = await render({ release: namespace, namespace, values });
    await install({ release: namespace, namespace, values });
    const serviceAccount = only(manifests, 'ServiceAccount').metadata.name;

    // The Secret the token controller fills: the way to a long-lived token that needs no kubelet.
    const secret = `${serviceAccount}-token`;
    const filled = auditTail((e) => e.objectRef?.resource === 'secrets' && e.objectRef.name === secret);
    await create(`/api/v1/namespaces/${namespace}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      type: 'kubernetes.io/service-account-token',
      metadata: { name: secret, annotations: { 'kubernetes.io/service-account.name': serviceAccount } },
    });
    const admin = await adminClient();
    const token = await eventually(async () => {
      const { data } = await admin.json<Secret>('GET', `/api/v1/namespaces/${namespace}/secrets/${secret}`);
      return data?.token && data['ca.crt'] && Buffer.from(data.token, 'base64').toString('utf8');
    }, 'the token controller to fill the Secret');
    const writers = filled().filter((e) => e.verb === 'update' || e.verb === 'patch');
    assert.ok(writers.length > 0, 'the Secret was written after its creation');
    for (const w of writers) {
      assert.equal(w.user?.username, 'system:kube-controller-manager', 'written by the controller manager');
      assert.match(w.userAgent ?? '', /tokens-controller/, "by its token controller's client");
    }
    const jwt = claims(token);
    assert.equal(jwt['iss'], 'kubernetes/serviceaccount', 'a token of the token controller, not of TokenRequest');
    assert.equal(jwt['kubernetes.io/serviceaccount/secret.name'], secret);
    assert.equal(jwt['kubernetes.io/serviceaccount/service-account.name'], serviceAccount);

    await create(`/apis/apps/v1/namespaces/${target}/deployments`, deployment('web', 2, CASE));
    await rolledOut(target, 'web');
    const user = `system:serviceaccount:${namespace}:${serviceAccount}`;
    const labeller = new Labeller(localArgs(manifests, { leaderElection: true }), {
      kubeconfig: writeKubeconfig({ token }),
    });
    try {
      await eventually(
        async () => {
          const all = await pods(target, selector);
          return all.length === 2 && all.every(isReady) &&
            all.every((p) => p.metadata.labels?.[WORKLOAD] === 'Deployment.web');
        },
        'the pods of web labelled',
        60_000,
        250,
      );
      const mine = auditEvents((e) => e.user?.username === user && e.stage === 'ResponseComplete');
      assert.ok(mine.some((e) => e.verb === 'patch' && e.objectRef?.resource === 'pods'), 'labelled as that identity');
      // The field-manager guard first tries to list its Leases cluster-wide and, refused, looks in
      // its own namespace, which the chart grants (src/guard/guard.ts): that one 403 is by design.
      const guardProbe = (e: AuditEvent) =>
        e.verb === 'list' && e.objectRef?.resource === 'leases' && !e.objectRef.namespace;
      assert.deepEqual(
        mine.filter((e) => e.responseStatus?.code === 403 && !guardProbe(e)).map((e) => `${e.verb} ${e.requestURI}`),
        [],
        "nothing else refused: the chart's RBAC is enough",
      );
      labeller.assertRunning();
      assert.equal(labeller.counts.error, 0, `no error logged:\n${labeller.stderr.slice(-3000)}`);
    } finally {
      const exit = await labeller.stop();
      assert.equal(exit.code, 0, exit.stderr);
    }
  });
});
