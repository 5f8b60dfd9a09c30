// The chart's sharded mode installed for real (`helm install` of chart/examples/sharded.yaml into
// the test control plane), with its replicas run as the chart runs them. The test control plane
// runs no pod (no kubelet; the full one's kwok nodes only pretend to), so each replica is the
// labeller command run here with the Deployment's arguments and the ConfigMap as the API server
// holds them (helm.ts's localArgs) and a token of the chart's ServiceAccount, under the RBAC the
// chart installed. Three members: each ready, each holding a Lease of the group with its label,
// their writes disjoint and covering the hash space, labeller_shard_owned_ratio adding up to 1
// over them, every object of many namespaces labelled, each cache its share, nothing refused; the
// PodDisruptionBudget lets one member at a time go. On a server that honours shardSelector (1.36+
// with the gate) it filters each member's lists and watches; on an older one (1.30) each member
// filters the whole stream itself. Then `helm uninstall` as it happens in a cluster: the release's
// RBAC and ServiceAccount are deleted with the Deployment, and the pods get SIGTERM only once the
// garbage collector has deleted them, so the members may no longer delete their Leases. Those stay
// until a member of the group's next install deletes them (or the cleanup Job:
// chart-cleanup.test.ts); members stopped before the uninstall (scaled to 0) leave none.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { decodeBuckets } from '../../src/shard/ranges.ts';
import type { AuditEvent } from '../cluster/audit.ts';
import { freePorts } from '../controlplane/controlplane.ts';
import { assertCleanExit } from '../process/crash.ts';
import { figure } from '../process/figures.ts';
import { Labeller } from '../process/labeller.ts';
import { sample } from '../process/metrics.ts';
import {
  adminClient,
  auditEvents,
  auditSkip,
  createNamespace,
  eventually,
  kubeconfig as adminKubeconfig,
  serviceAccountKubeconfig,
  skip,
} from './cluster.ts';
import { createConfigMap, ownLabel } from './chart-rbac.ts';
import { CHART, install, localArgs, type Manifest, tool } from './helm.ts';

const SHARDED = join(CHART, 'examples', 'sharded.yaml');
const MEMBERS = 3;
const NAMESPACES = 12;
const PER_NAMESPACE = 2;
const LEASE_MS = 4000;
/** The namespace hash space's buckets (src/shard/ranges.ts), which the members' Leases publish. */
const BUCKETS = 256;
const GROUP_LABEL = 'labeller.io/shard-group';
const LABEL = 'example.com/namespace';
/** Generous: a 2-core machine runs three labellers, the API server and other test files at once. */
const CONVERGE_MS = 90_000;
// The cluster is shared with other test files: this release labels only the objects it made.
const { labels: OWN, selector: OWN_SELECTOR } = ownLabel('shards');

const VALUES = {
  kinds: [{ resource: 'configmaps' }],
  labels: { [LABEL]: '{{namespace}}' },
  selector: OWN_SELECTOR,
  // Short timings keep the test quick (the example's are 15 s, 10 s, 2 s).
  leaderElection: { enabled: false, leaseDuration: '4s', renewDeadline: '3s', retryPeriod: '1s' },
  // Its CRD is chart-install.test.ts's to make; monitoring is not what this file tests.
  metrics: { serviceMonitor: { enabled: false } },
};

interface Meta {
  readonly name: string;
  readonly namespace?: string;
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
}
interface Deployment extends Manifest {
  readonly spec: {
    readonly replicas: number;
    readonly selector: { readonly matchLabels: Record<string, string> };
    readonly template: { readonly metadata: Meta; readonly spec: { readonly serviceAccountName: string } };
  };
}
interface Pdb {
  readonly spec: {
    readonly maxUnavailable?: number | string;
    readonly minAvailable?: number | string;
    readonly selector: { readonly matchLabels: Record<string, string> };
  };
}
interface Lease {
  readonly metadata: Meta;
  readonly spec: { readonly holderIdentity?: string };
}
interface ConfigMapList {
  readonly items: readonly { readonly metadata: Meta & { readonly namespace: string } }[];
}

/** A replica: the labeller process, its HTTP port, and the Lease and identity it says it holds. */
interface Member {
  readonly labeller: Labeller;
  readonly port: number;
  readonly lease: string;
  readonly identity: string;
}

const get = async <T>(path: string): Promise<T> => (await adminClient()).json<T>('GET', path);

/** The release's Deployment and ConfigMap as the API server holds them. */
async function installed(namespace: string, fullname: string): Promise<[Deployment, Manifest]> {
  return [
    await get<Deployment>(`/apis/apps/v1/namespaces/${namespace}/deployments/${fullname}`),
    await get<Manifest>(`/api/v1/namespaces/${namespace}/configmaps/${fullname}`),
  ];
}

/** Starts a replica as the pod would run; resolves once it has said which Lease it holds. */
async function startMember(objects: readonly Manifest[], kubeconfig: string): Promise<Member> {
  const [port = 0] = await freePorts(1);
  // leaderElection: true keeps the --leader-elect-* flags as rendered: sharded mode passes its
  // Lease namespace and timings in them (and no --leader-elect).
  const labeller = new Labeller(localArgs(objects, { leaderElection: true, httpPort: port }), { kubeconfig });
  const joining = await labeller.waitForLog((l) => l.msg === 'joining shard group', 60_000);
  return {
    labeller,
    port,
    lease: String(joining['lease']),
    identity: String(joining['identity']),
  };
}

async function metrics(member: Member): Promise<string> {
  return (await fetch(`http://127.0.0.1:${member.port}/metrics`)).text();
}

async function ready(member: Member): Promise<boolean> {
  const response = await fetch(`http://127.0.0.1:${member.port}/readyz`);
  await response.text();
  return response.status === 200;
}

/** The group's member Leases, as `namespace/name` → the Lease. */
async function memberLeases(namespace: string, group: string): Promise<Map<string, Lease>> {
  const { items } = await (await adminClient()).json<{ items: Lease[] }>(
    'GET',
    `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`,
    { query: { labelSelector: `${GROUP_LABEL}=${group}` } },
  );
  return new Map(items.map((lease) => [`${namespace}/${lease.metadata.name}`, lease]));
}

/**
 * Waits until the members agree: one Lease each, labelled with the group and held by it, each
 * ready, their writes disjoint and covering every bucket; each member's /readyz ok, its
 * labeller_shard_members the member count, and its labeller_shard_owned_ratio (writes, and keeps:
 * no handover under way) its Lease's share. Resolves with each member's share.
 */
async function converged(members: readonly Member[], namespace: string, group: string): Promise<number[]> {
  return eventually(
    async () => {
      const leases = await memberLeases(namespace, group);
      if (leases.size !== members.length) return false;
      const owners = new Map<number, string>();
      const shares: number[] = [];
      for (const member of members) {
        const lease = leases.get(member.lease);
        if (!lease || lease.spec.holderIdentity !== member.identity) return false;
        if (lease.metadata.annotations?.['labeller.io/shard-ready'] !== 'true') return false;
        const writes = decodeBuckets(lease.metadata.annotations['labeller.io/shard-writes']);
        for (const bucket of writes) {
          if (owners.has(bucket)) return false;
          owners.set(bucket, member.lease);
        }
        const text = await metrics(member);
        const share = sample(text, 'labeller_shard_owned_ratio', { state: 'writes' });
        if (sample(text, 'labeller_shard_members') !== members.length) return false;
        if (share !== writes.size / BUCKETS) return false;
        if (sample(text, 'labeller_shard_owned_ratio', { state: 'keeps' }) !== share) return false;
        if (!(await ready(member))) return false;
        shares.push(share);
      }
      return owners.size === BUCKETS && shares;
    },
    `${members.length} members to agree on disjoint writes covering every bucket`,
    CONVERGE_MS,
    250,
  );
}

/** `namespace/name` → labels of this file's ConfigMaps in `namespaces`. */
async function labelsByObject(namespaces: ReadonlySet<string>): Promise<Map<string, Record<string, string>>> {
  const { items } = await get<ConfigMapList>(`/api/v1/configmaps?labelSelector=${encodeURIComponent(OWN_SELECTOR)}`);
  return new Map(
    items.filter((i) => namespaces.has(i.metadata.namespace)).map((i) => [
      `${i.metadata.namespace}/${i.metadata.name}`,
      i.metadata.labels ?? {},
    ]),
  );
}

/** Whether the API server honours shardSelector: this project's control plane turns the gate on from 1.36. */
async function serverFilters(): Promise<boolean | undefined> {
  if (!process.env['E2E_ETCD']) return undefined; // an existing cluster: its gates are unknown
  const version = await get<{ minor: string }>('/version');
  return Number.parseInt(version.minor, 10) >= 36;
}

/** Whether the label selector `selector` selects `labels`. */
const selects = (selector: Record<string, string>, labels: Record<string, string> | undefined): boolean =>
  Object.entries(selector).every(([key, value]) => labels?.[key] === value);

describe('chart: sharded replicas installed', { skip }, () => {
  test(
    'three members of the release: ready, their Leases labelled with the group, every object labelled, shares adding up to 1, the budget one member at a time; helm uninstall leaves their Leases to the next install',
    { skip: auditSkip, timeout: 300_000 },
    async (t) => {
      const namespace = await createNamespace('chart-shards');
      const release = namespace;
      const helmArgs = ['--kubeconfig', adminKubeconfig(), '--namespace', namespace];
      await install({ release, namespace, files: [SHARDED], values: VALUES });
      const fullname = `${release}-labeller`;
      let [deployment, configMap] = await installed(namespace, fullname);
      const group = fullname;
      const user = `system:serviceaccount:${namespace}:${deployment.spec.template.spec.serviceAccountName}`;
      assert.equal(deployment.spec.replicas, MEMBERS);

      // The budget fits: it selects exactly the Deployment's pods and lets one of the three go at a
      // time (desired healthy 2), so a drain moves one member's namespaces at a time and is never
      // blocked while all are ready. (No disruption controller runs here to fill in its status.)
      const pdb = await get<Pdb>(`/apis/policy/v1/namespaces/${namespace}/poddisruptionbudgets/${fullname}`);
      assert.deepEqual(pdb.spec.selector.matchLabels, deployment.spec.selector.matchLabels);
      assert.ok(selects(pdb.spec.selector.matchLabels, deployment.spec.template.metadata.labels));
      assert.equal(pdb.spec.selector.matchLabels['app.kubernetes.io/instance'], release, "only this release's pods");
      assert.equal(pdb.spec.minAvailable, undefined);
      assert.equal(pdb.spec.maxUnavailable, 1);
      const desiredHealthy = deployment.spec.replicas - Number(pdb.spec.maxUnavailable);
      assert.ok(desiredHealthy >= 1 && desiredHealthy === MEMBERS - 1, `desired healthy ${desiredHealthy}`);

      const namespaces = new Set<string>();
      for (let i = 0; i < NAMESPACES; i++) namespaces.add(await createNamespace('chart-shards-ns'));
      for (const ns of namespaces) {
        for (let i = 0; i < PER_NAMESPACE; i++) await createConfigMap(ns, `cm-${i}`, OWN);
      }
      const objects = NAMESPACES * PER_NAMESPACE;
      const patchesOf = (e: AuditEvent) =>
        e.user?.username === user && e.verb === 'patch' && e.objectRef?.resource === 'configmaps' &&
        namespaces.has(e.objectRef.namespace ?? '');

      let kubeconfig = await serviceAccountKubeconfig(namespace, deployment.spec.template.spec.serviceAccountName);
      const members: Member[] = [];
      try {
        for (let i = 0; i < MEMBERS; i++) members.push(await startMember([deployment, configMap], kubeconfig));
        for (const member of members) {
          assert.match(member.lease, new RegExp(`^${namespace}/${group}-member-[0-9a-f]{10}$`));
        }
        const started = Date.now();
        const shares = await converged(members, namespace, group);
        assert.ok(shares.every((share) => share > 0), `each member writes a share: ${shares.join(', ')}`);
        const sum = shares.reduce((a, b) => a + b, 0);
        assert.ok(Math.abs(sum - 1) < 1e-9, `labeller_shard_owned_ratio{state="writes"} adds up to ${sum}`);

        await eventually(
          async () => {
            const labels = await labelsByObject(namespaces);
            return labels.size === objects && [...labels].every(([key, l]) => l[LABEL] === key.split('/')[0]);
          },
          `all ${objects} ConfigMaps in ${NAMESPACES} namespaces labelled`,
          CONVERGE_MS,
          250,
        );
        const labelled = Date.now();
        // Each member caches its share only: the caches add up to the objects, none holds them all.
        const cached = await eventually(async () => {
          const counts = await Promise.all(
            members.map(async (m) => sample(await metrics(m), 'labeller_objects_cached', { controller: 'configmaps' })),
          );
          return counts.reduce((a: number, b) => a + (b ?? 0), 0) === objects && counts;
        }, `the members' caches to add up to the ${objects} ConfigMaps`);
        assert.ok(cached.every((n) => (n ?? 0) < objects), `no member caches every object: ${cached.join(', ')}`);

        const filters = await serverFilters();
        for (const member of members) {
          const text = await metrics(member);
          const filtering = ['server', 'client'].filter((f) =>
            sample(text, 'labeller_shard_filtering', { controller: 'configmaps', filtering: f }) === 1
          );
          assert.equal(filtering.length, 1, `one filtering for configmaps: ${filtering.join(', ')}`);
          if (filters !== undefined) assert.deepEqual(filtering, [filters ? 'server' : 'client']);
        }

        // Every object written, as the chart's ServiceAccount, and nothing refused: the chart's
        // RBAC is enough for sharded members (the namespaces' list for the shard layout included).
        // The field-manager guard first tries to list its Leases cluster-wide and, refused, looks
        // in its own namespace, which the chart grants.
        const mine = auditEvents((e) => e.user?.username === user && e.stage === 'ResponseComplete');
        const patched = new Map<string, number>();
        for (const e of mine.filter(patchesOf)) {
          const key = `${e.objectRef?.namespace}/${e.objectRef?.name}`;
          patched.set(key, (patched.get(key) ?? 0) + 1);
        }
        assert.equal(patched.size, objects, 'a PATCH of every object');
        const guardProbe = (e: AuditEvent) =>
          e.verb === 'list' && e.objectRef?.resource === 'leases' && !e.objectRef.namespace;
        assert.deepEqual(
          mine.filter((e) => e.responseStatus?.code === 403 && !guardProbe(e)).map((e) => `${e.verb} ${e.requestURI}`),
          [],
          "nothing else refused: the chart's RBAC is enough",
        );
        for (const member of members) {
          member.labeller.assertRunning();
          assert.equal(member.labeller.counts.error, 0, `no error logged:\n${member.labeller.stderr.slice(-3000)}`);
        }
        figure(
          t,
          `chart sharded: ${MEMBERS} members converged ${labelled - started} ms after the last started; shares ${
            shares.map((s) => s.toFixed(3)).join(' + ')
          }; cached ${cached.join(' + ')} of ${objects} ConfigMaps; ${
            [...patched.values()].reduce((a, b) => a + b, 0)
          } PATCHes; filtering ${filters === undefined ? 'unknown' : filters ? 'server' : 'client'}`,
        );

        // helm uninstall deletes the Deployment with the release's RBAC and ServiceAccount; the
        // kubelet sends SIGTERM once the garbage collector has deleted the pods, after that. Each
        // member leaves (it writes nothing more), but may no longer delete its Lease.
        const uninstalled = await tool('helm', ['uninstall', release, ...helmArgs]);
        assert.equal(uninstalled.code, 0, uninstalled.stderr);
        for (const exit of await Promise.all(members.map((m) => m.labeller.stop('SIGTERM', 30_000)))) {
          assertCleanExit(exit);
        }
        for (const member of members) {
          assert.ok(member.labeller.logs.some((l) => l.msg === 'left shard group'), 'each member left the group');
        }
        assert.deepEqual(
          [...(await memberLeases(namespace, group)).keys()].sort(),
          members.map((m) => m.lease).sort(),
          'their Leases stay: the RBAC that let them delete them went first',
        );

        // The group's next install: its first member deletes them once expired, and finds every
        // object right (no PATCH). Stopped before the uninstall (scaled to 0), it deletes its own.
        await install({ release, namespace, files: [SHARDED], values: VALUES });
        [deployment, configMap] = await installed(namespace, fullname);
        kubeconfig = await serviceAccountKubeconfig(namespace, deployment.spec.template.spec.serviceAccountName);
        const reinstalled = Date.now();
        const before = auditEvents(patchesOf).length;
        const next = await startMember([deployment, configMap], kubeconfig);
        members.push(next);
        await eventually(
          async () => [...(await memberLeases(namespace, group)).keys()].join() === next.lease,
          'the Leases left behind to be deleted by the next member',
          4 * LEASE_MS + 30_000,
          250,
        );
        const deleted = Date.now() - reinstalled;
        await converged([next], namespace, group);
        assert.deepEqual(auditEvents(patchesOf).slice(before), [], 'no PATCH: every object was right');
        assertCleanExit(await next.labeller.stop('SIGTERM', 30_000));
        const again = await tool('helm', ['uninstall', release, ...helmArgs]);
        assert.equal(again.code, 0, again.stderr);
        assert.deepEqual([...(await memberLeases(namespace, group)).keys()], [], 'no member Lease left');
        figure(t, `chart sharded: the Leases left by the uninstall deleted ${deleted} ms after the next install`);
      } finally {
        for (const member of members) member.labeller.kill();
      }
    },
  );
});
