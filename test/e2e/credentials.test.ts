// Credentials that change under a running labeller, against the real API server: a rotated
// token file, swapped client certificates, an exec plugin whose tokens expire, and in-cluster
// config (token, CA and namespace at the kubelet's mount point) with a rotated token.
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, test, type TestContext } from 'node:test';
import { assertCleanExit } from '../process/crash.ts';
import { type AuditEvent, auditEvents, byLabeller, receivedAt } from '../cluster/audit.ts';
import { Cluster, type PolicyRule } from '../cluster/cluster.ts';
import { sleep } from '../process/sleep.ts';
import { eventually } from '../process/eventually.ts';
import { figure } from '../process/figures.ts';
import { inClusterWrapper } from '../cluster/incluster.ts';
import { sharedKubeconfig, skip } from '../cluster/testrun.ts';
import { clientCAFiles, signClientCertificate } from '../controlplane/controlplane.ts';
import { Labeller } from '../process/labeller.ts';
import type { Runtime } from '../process/runtime.ts';

const RULES: PolicyRule[] = [
  { apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch', 'patch'] },
  { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'create', 'update'] },
];
/** The API server caches successful token authentication for about 10 s; wait a little longer. */
const AUTH_CACHE_MS = 12_000;
/** Short server-side watch timeouts, so lists and watches are made again with the new credentials too. */
const ARGS = ['--kinds', 'configmaps', '--label', 'team=platform', '--watch-timeout', '5s'];

const auditLog = process.env['E2E_AUDIT_LOG'];
const noAudit = auditLog ? false : "needs the project's own control plane (its audit log)";

/** Replaces a file the way rotation does (kubelet, cert-manager): a new file renamed over the old. */
function replaceFile(path: string, text: string): void {
  writeFileSync(`${path}.new`, text);
  renameSync(`${path}.new`, path);
}

/** Audit events of labeller's requests since `since` (epoch ms). */
function labellerRequests(since: number, filter: (event: AuditEvent) => boolean = () => true): AuditEvent[] {
  return auditLog ? auditEvents(auditLog, (e) => byLabeller(e) && receivedAt(e) >= since && filter(e)) : [];
}
const unauthorized = (e: AuditEvent): boolean => e.responseStatus?.code === 401;

describe('credentials that rotate', { skip }, () => {
  let cluster: Cluster;
  before(async () => {
    cluster = await Cluster.connect(sharedKubeconfig());
  });
  after(() => cluster?.close());

  const labelled = (path: string, timeoutMs = 30_000): Promise<unknown> =>
    eventually(
      async () => (await cluster.labelsOf(path))['team'] === 'platform',
      `${path} to be labelled`,
      timeoutMs,
      200,
    );

  /**
   * Writes a token bound to Secret token-2 over `tokenPath`, deletes Secret token-1 (revoking the
   * old token), waits past the authentication cache, then creates config map `after` and waits
   * for its label. Reports how long that took and labeller's 200s and 401s since.
   */
  async function rotateToken(t: TestContext, what: string, ns: string, tokenPath: string): Promise<void> {
    const cms = `/api/v1/namespaces/${ns}/configmaps`;
    replaceFile(tokenPath, await cluster.boundToken(ns, 'labeller', 'token-2'));
    await cluster.delete(`/api/v1/namespaces/${ns}/secrets/token-1`);
    const revokedAt = Date.now();
    await sleep(AUTH_CACHE_MS);
    const createdAt = Date.now();
    await cluster.post(cms, { metadata: { name: 'after' } });
    await labelled(`${cms}/after`);
    const seconds = (Date.now() - createdAt) / 1000;
    // The audit line of a request comes once its answer is sent: after the label can be read.
    const ok = await eventually(
      async () => {
        const answered = labellerRequests(createdAt, (e) => e.responseStatus?.code === 200).length;
        return answered > 0 && answered;
      },
      'an audit line of a request answered 200 since the object was created',
      10_000,
    ).catch(() => 0);
    const refused = labellerRequests(revokedAt, unauthorized).length;
    figure(
      t,
      `${what} rotated and the old token's Secret deleted: an object created ${
        AUTH_CACHE_MS / 1000
      } s later (past the authentication cache) labelled in ${
        seconds.toFixed(1)
      } s; ${ok} requests answered 200 from then on, ${refused} answered 401`,
    );
    assert.ok(ok > 0);
  }

  test('(a) kubeconfig tokenFile: the token bound to a Secret is rotated and the Secret deleted; labelling goes on', {
    skip: noAudit,
  }, async (t) => {
    const ns = await cluster.namespace('tokenfile');
    const cms = `/api/v1/namespaces/${ns}/configmaps`;
    await cluster.serviceAccount(ns, 'labeller', RULES);
    const tokenPath = cluster.writeFile(`token-${ns}`, await cluster.boundToken(ns, 'labeller', 'token-1'));
    const kubeconfig = cluster.writeKubeconfig({ user: { tokenFile: tokenPath } });
    await cluster.post(cms, { metadata: { name: 'before' } });
    const labeller = new Labeller([...ARGS, '--namespace', ns], { kubeconfig });
    try {
      await labelled(`${cms}/before`);
      await rotateToken(t, 'kubeconfig tokenFile', ns, tokenPath);
      assert.ok(labeller.running);
    } finally {
      const exit = await labeller.stop();
      labeller.kill();
      assertCleanExit(exit);
    }
  });

  const ca = clientCAFiles(dirname(sharedKubeconfig()));
  const noCA = skip || noAudit ||
    (existsSync(ca.key) ? false : "needs the project's own control plane (its client CA)");

  /**
   * Labelling as user A with a client certificate, then the RBAC moved to user B and A's
   * certificate replaced by B's: in files named by the kubeconfig, or in what an exec plugin
   * prints (with a 15 s expiry, so it runs again every 7.5 s).
   */
  async function certificateSwap(t: TestContext, source: 'files' | 'exec', runtime: Runtime): Promise<void> {
    const ns = await cluster.namespace(`cert-${source}`);
    const cms = `/api/v1/namespaces/${ns}/configmaps`;
    const [userA, userB] = [`labeller-a-${ns}`, `labeller-b-${ns}`];
    const role = `${ns}-labeller`;
    const binding = `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${role}`;
    const subject = (name: string) => [{ kind: 'User', apiGroup: 'rbac.authorization.k8s.io', name }];
    await cluster.post('/apis/rbac.authorization.k8s.io/v1/clusterroles', { metadata: { name: role }, rules: RULES });
    await cluster.post('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      metadata: { name: role },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
      subjects: subject(userA),
    });
    cluster.onClose(() => cluster.delete(binding));
    cluster.onClose(() => cluster.delete(`/apis/rbac.authorization.k8s.io/v1/clusterroles/${role}`));
    const a = signClientCertificate(ca, userA);
    let kubeconfig: string;
    let swap: (pair: { cert: string; key: string }) => void;
    if (source === 'files') {
      const certPath = cluster.writeFile(`cert-${ns}.pem`, a.cert);
      const keyPath = cluster.writeFile(`key-${ns}.pem`, a.key);
      kubeconfig = cluster.writeKubeconfig({ user: { 'client-certificate': certPath, 'client-key': keyPath } });
      swap = (pair) => {
        replaceFile(certPath, pair.cert);
        replaceFile(keyPath, pair.key);
      };
    } else {
      const credential = (pair: { cert: string; key: string }) =>
        JSON.stringify({
          apiVersion: 'client.authentication.k8s.io/v1',
          kind: 'ExecCredential',
          status: { clientCertificateData: pair.cert, clientKeyData: pair.key, expirationTimestamp: 'EXPIRY' },
        });
      const credentialPath = cluster.writeFile(`credential-${ns}.json`, credential(a));
      const plugin = cluster.writeFile(
        `plugin-${ns}.sh`,
        `#!/bin/sh\nsed "s/EXPIRY/$(date -u -d '+15 seconds' +%Y-%m-%dT%H:%M:%SZ)/" ${credentialPath}\n`,
      );
      chmodSync(plugin, 0o755);
      kubeconfig = cluster.writeKubeconfig({
        user: { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: plugin, interactiveMode: 'Never' } },
      });
      swap = (pair) => replaceFile(credentialPath, credential(pair));
    }
    await cluster.post(cms, { metadata: { name: 'before' } });
    const labeller = new Labeller([...ARGS, '--namespace', ns], { kubeconfig, runtime });
    try {
      await labelled(`${cms}/before`);
      const current = await cluster.get<{ metadata: object; roleRef: object }>(binding);
      await cluster.put(binding, { ...current, subjects: subject(userB) });
      swap(signClientCertificate(ca, userB));
      const swappedAt = Date.now();
      await cluster.post(cms, { metadata: { name: 'after' } });
      await labelled(`${cms}/after`, 60_000);
      const seconds = (Date.now() - swappedAt) / 1000;
      // Only the identities under test: cluster-wide labellers of other test files may patch it too.
      const patchedBy = labellerRequests(
        swappedAt,
        (e) =>
          e.verb === 'patch' && e.objectRef?.namespace === ns && e.objectRef.name === 'after' &&
          e.responseStatus?.code === 200,
      )
        .map((e) => e.user?.username)
        .filter((user) => user === userA || user === userB);
      figure(
        t,
        `client certificate from ${
          source === 'files' ? 'files' : 'an exec plugin'
        } swapped (user A → B, RBAC moved), ${runtime}: a new object labelled ${seconds.toFixed(1)} s later, by ${
          patchedBy.join(', ')
        }`,
      );
      assert.deepEqual(patchedBy, [userB]);
      assert.ok(labeller.running);
    } finally {
      const exit = await labeller.stop();
      labeller.kill();
      assertCleanExit(exit);
    }
  }

  for (const runtime of ['node', 'deno'] as const) {
    test(
      `(b) client certificate files: user A, then user B with the RBAC moved to B; labelling goes on within a minute (${runtime})`,
      { skip: noCA },
      (t) => certificateSwap(t, 'files', runtime),
    );
  }
  test(
    '(b) client certificate from an exec plugin: user A, then user B; the plugin run before expiry brings a new pool',
    { skip: noCA },
    (t) => certificateSwap(t, 'exec', 'node'),
  );

  test(
    '(c) exec plugin with short-lived tokens: one run per expiry, never two at once, no 401 once refreshed; a revoked token is refreshed once',
    { skip: noAudit },
    async (t) => {
      const ns = await cluster.namespace('exec');
      const cms = `/api/v1/namespaces/${ns}/configmaps`;
      await cluster.serviceAccount(ns, 'labeller', RULES);
      // The plugin hands out pre-minted tokens, one per run, each bound to its own Secret so the
      // test can revoke it, and reports an expiry `expiry` seconds ahead.
      const dir = mkdtempSync(join(tmpdir(), 'labeller-exec-'));
      const tokens: string[] = [];
      for (let i = 1; i <= 16; i++) tokens.push(await cluster.boundToken(ns, 'labeller', `token-${i}`));
      writeFileSync(join(dir, 'tokens'), `${tokens.join('\n')}\n`);
      writeFileSync(join(dir, 'runs'), '');
      writeFileSync(join(dir, 'expiry'), '20');
      const plugin = join(dir, 'plugin.sh');
      writeFileSync(
        plugin,
        `#!/bin/sh
set -e
d=$(dirname "$0")
echo "start $(date +%s%N)" >> "$d/runs"
n=$(grep -c start "$d/runs")
token=$(sed -n "\${n}p" "$d/tokens")
sleep 0.2
expiry=$(date -u -d "+$(cat "$d/expiry") seconds" +%Y-%m-%dT%H:%M:%SZ)
echo "end $(date +%s%N)" >> "$d/runs"
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s","expirationTimestamp":"%s"}}\\n' "$token" "$expiry"
`,
      );
      chmodSync(plugin, 0o755);
      const kubeconfig = cluster.writeKubeconfig({
        user: { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: plugin, interactiveMode: 'Never' } },
      });
      /** [start, end] of every plugin run, in ms. */
      const runs = (): [number, number][] => {
        const lines = readFileSync(join(dir, 'runs'), 'utf8').split('\n').filter(Boolean).map((l) =>
          l.split(' ') as [string, string]
        );
        const starts = lines.filter(([k]) => k === 'start').map(([, v]) => Number(BigInt(v) / 1_000_000n));
        const ends = lines.filter(([k]) => k === 'end').map(([, v]) => Number(BigInt(v) / 1_000_000n));
        return starts.map((s, i) => [s, ends[i] ?? Infinity]);
      };
      const names = (prefix: string) => Array.from({ length: 20 }, (_, i) => `${prefix}-${String(i).padStart(2, '0')}`);
      await cluster.createMany(cms, names('first'), (name) => ({ metadata: { name } }));
      const startedAt = Date.now();
      const labeller = new Labeller([...ARGS, '--namespace', ns], { kubeconfig });
      try {
        for (const name of names('first')) await labelled(`${cms}/${name}`);
        // 45 s of work: every superseded token is revoked at once; 20 objects arrive together
        // twice, so 20 PATCHes may find the token stale at the same moment.
        const phaseEnd = Date.now() + 45_000;
        let batch = 0;
        while (Date.now() < phaseEnd) {
          const done = runs().length;
          for (let i = 1; i < done; i++) {
            await cluster.delete(`/api/v1/namespaces/${ns}/secrets/token-${i}`).catch(() => {});
          }
          if (Date.now() > startedAt + 15_000 * (batch + 1) && batch < 2) {
            await cluster.createMany(cms, names(`batch${batch}`), (name) => ({ metadata: { name } }));
            batch++;
          }
          await sleep(1000);
        }
        for (const name of [...names('batch0'), ...names('batch1')]) await labelled(`${cms}/${name}`);
        const elapsed = (Date.now() - startedAt) / 1000;
        const timed = runs();
        for (let i = 1; i < timed.length; i++) {
          assert.ok(timed[i]![0] >= timed[i - 1]![1], `plugin runs overlap: ${JSON.stringify(timed)}`);
        }
        // One run per 10 s (a 20 s credential refreshed 10 s early), plus the first.
        assert.ok(
          timed.length <= Math.ceil(elapsed / 10) + 1,
          `${timed.length} plugin runs in ${elapsed.toFixed(0)} s`,
        );
        assert.ok(
          timed.length >= Math.floor(elapsed / 10) - 1,
          `the plugin ran again before each expiry: ${timed.length} runs in ${elapsed.toFixed(0)} s`,
        );
        const refusedBefore = labellerRequests(startedAt, unauthorized).length;
        assert.equal(refusedBefore, 0, 'no request was sent with a revoked (superseded) token');

        // A token reported valid for an hour, revoked after a few seconds: the next requests get
        // 401, the plugin runs once for all of them, and the requests are retried.
        writeFileSync(join(dir, 'expiry'), '3600');
        await eventually(
          async () => runs().length > timed.length,
          'the plugin to hand out the hour-long token',
          30_000,
          200,
        );
        const current = runs().length;
        await cluster.delete(`/api/v1/namespaces/${ns}/secrets/token-${current}`);
        const revokedAt = Date.now();
        await sleep(AUTH_CACHE_MS);
        await cluster.createMany(cms, names('revoked'), (name) => ({ metadata: { name } }));
        for (const name of names('revoked')) {
          await labelled(`${cms}/${name}`);
        }
        const refused = labellerRequests(revokedAt, unauthorized).length;
        const extraRuns = runs().length - current;
        figure(
          t,
          `exec plugin, 20 s tokens: ${timed.length} runs in ${
            elapsed.toFixed(0)
          } s (never two at once), 0 requests answered 401 while tokens were renewed ahead of expiry; an hour-long token revoked early: ${refused} requests answered 401, then ${extraRuns} plugin run, labelling went on`,
        );
        assert.ok(refused >= 1, 'the revoked token was refused');
        assert.equal(extraRuns, 1, 'one plugin run for all the requests refused at once');
        assert.ok(labeller.running);
      } finally {
        const exit = await labeller.stop();
        labeller.kill();
        assertCleanExit(exit);
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  test(
    "in-cluster: token, CA and namespace at the kubelet's mount point, no kubeconfig; the rotated token is picked up",
    { skip: noAudit },
    async (t) => {
      const ns = await cluster.namespace('incluster');
      const cms = `/api/v1/namespaces/${ns}/configmaps`;
      await cluster.serviceAccount(ns, 'labeller', RULES);
      const config = JSON.parse(readFileSync(sharedKubeconfig(), 'utf8')) as {
        clusters: { cluster: { server: string; 'certificate-authority-data': string } }[];
      };
      const { server, 'certificate-authority-data': caData } = config.clusters[0]!.cluster;
      const url = new URL(server);
      const sa = mkdtempSync(join(tmpdir(), 'labeller-serviceaccount-'));
      writeFileSync(join(sa, 'ca.crt'), Buffer.from(caData, 'base64'));
      writeFileSync(join(sa, 'namespace'), ns);
      writeFileSync(join(sa, 'token'), await cluster.boundToken(ns, 'labeller', 'token-1'));
      const home = mkdtempSync(join(tmpdir(), 'labeller-home-'));
      await cluster.post(cms, { metadata: { name: 'before' } });
      // --namespace: a cluster-wide run would label other test files' objects.
      const labeller = new Labeller([...ARGS, '--namespace', ns, '--leader-elect'], {
        kubeconfig: '',
        wrapper: inClusterWrapper(sa),
        env: {
          KUBERNETES_SERVICE_HOST: url.hostname,
          KUBERNETES_SERVICE_PORT: url.port || '443',
          KUBECONFIG: '',
          HOME: home,
        },
      });
      try {
        await labelled(`${cms}/before`);
        // The pod's namespace file chose where the Lease lives.
        await cluster.get(`/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/labeller`);
        await rotateToken(t, 'in-cluster token file', ns, join(sa, 'token'));
        assert.ok(labeller.running);
      } finally {
        const exit = await labeller.stop();
        labeller.kill();
        assertCleanExit(exit);
        rmSync(sa, { recursive: true, force: true });
        rmSync(home, { recursive: true, force: true });
      }
    },
  );

  test("kubeconfig proxy-url: labelling goes through the proxy, over labeller's own tunnels", async () => {
    const ns = await cluster.namespace('proxy');
    const cms = `/api/v1/namespaces/${ns}/configmaps`;
    // A plain HTTP CONNECT proxy, as corporate networks have them.
    let tunnels = 0;
    const proxy = createServer();
    proxy.on('connect', (request, client, head) => {
      tunnels++;
      const [host = '', port = ''] = (request.url ?? '').split(':');
      const upstream = connect(Number(port), host, () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        upstream.write(head);
        upstream.pipe(client).pipe(upstream);
      });
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
    });
    await new Promise<void>((done) => proxy.listen(0, '127.0.0.1', done));
    const address = proxy.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    const config = JSON.parse(readFileSync(sharedKubeconfig(), 'utf8')) as {
      clusters: { cluster: Record<string, unknown> }[];
    };
    for (const c of config.clusters) c.cluster['proxy-url'] = `http://127.0.0.1:${port}`;
    const kubeconfig = cluster.writeFile(`kubeconfig-proxy-${ns}`, JSON.stringify(config));
    await cluster.post(cms, { metadata: { name: 'through-proxy' } });
    const labeller = new Labeller([...ARGS, '--namespace', ns], { kubeconfig });
    try {
      await labelled(`${cms}/through-proxy`);
      assert.ok(tunnels > 0, 'requests went through the proxy');
      assert.ok(labeller.running);
    } finally {
      const exit = await labeller.stop();
      labeller.kill();
      assertCleanExit(exit);
      proxy.closeAllConnections();
      proxy.close();
    }
  });
});
