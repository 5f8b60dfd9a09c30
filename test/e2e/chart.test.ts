// The Helm chart, the sidecar example and the Dockerfile.
//  - Rendering (helm only, no cluster): lint and template pass for the defaults and every example;
//    the schema and the chart's own checks reject bad values with messages that say what to fix;
//    RBAC is derived from the kinds; the Deployment is hardened and its ConfigMap is a config
//    labeller accepts; sharded mode passes its flags, not --leader-elect, and grants its Leases;
//    the dashboard and the alerts are off by default and, on, link to runbooks that exist
//    (test/e2e/monitoring.test.ts runs them against a real Prometheus); helm test's Pods are as
//    hardened as the Deployment and ask what the release needs (chart-install.test.ts runs them).
//  - Against the API server: the rendered RBAC, applied and used through a token minted for the
//    chart's ServiceAccount, is enough for labeller to do its job, and nothing more (cluster-wide
//    and namespaced); every rendered object passes server-side validation; the sidecar example
//    labels its namespace with its Role and LABELLER_* variables only.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { load, loadAll } from 'js-yaml';
import { parseConfig } from '../../src/config/parse.ts';
import { markerKeys } from '../../src/labelling/admitted.ts';
import { parseDuration } from '../../src/util/duration.ts';
import { anchors } from '../../scripts/linkcheck.ts';
import { freePorts } from '../controlplane/controlplane.ts';
import { procSample } from '../process/procstat.ts';
import {
  adminClient,
  create,
  createNamespace,
  eventually,
  labelsOf,
  serviceAccountKubeconfig,
  skip,
} from './cluster.ts';
import {
  ADMISSION_POLICIES_RULE,
  assertAccess,
  createConfigMap,
  createDeployment,
  each,
  EVENTS_RULE,
  EVENTS_VERBS,
  grant,
  GUARD_RULE,
  installRbac,
  labelled,
  LABELLER_VERBS,
  ownerRule,
  ownLabel,
  POLICY_PARAMS_RULE,
  POLICY_REPORTS_RULE,
  PROTECTION_RULE,
  read,
  rulesOf,
  SHARD_LAYOUT_RULE,
} from './chart-rbac.ts';
import {
  apply,
  CHART,
  type Container,
  containers,
  EXAMPLES,
  flagValue,
  lint,
  localArgs,
  type Manifest,
  only,
  render,
  ROOT,
  SIDECAR,
  template,
} from './helm.ts';
import { Labeller, runLabeller } from '../process/labeller.ts';

// The defaults have no kinds (an install without kinds fails and says what to set): every example instead.
const VALUE_FILES: readonly (string | undefined)[] = EXAMPLES;
const shortName = (file: string | undefined) => (file ? file.slice(CHART.length + 1) : 'default values');

interface VolumeMount {
  name: string;
  mountPath: string;
  readOnly?: boolean;
}

/** What the tests read of a rendered container beyond `Container`. */
interface ContainerDetails {
  resources: Record<string, { cpu?: string; memory?: string } | undefined> & {
    limits: { cpu?: string; memory?: string };
  };
  ports: { name: string; containerPort: number }[];
  livenessProbe: { httpGet: object };
  readinessProbe: { httpGet: object };
  securityContext: { capabilities?: object; readOnlyRootFilesystem?: boolean; allowPrivilegeEscalation?: boolean };
  volumeMounts?: VolumeMount[];
}

interface PodSpec {
  enableServiceLinks: boolean;
  automountServiceAccountToken?: boolean;
  terminationGracePeriodSeconds: number;
  serviceAccountName: string;
  securityContext: Record<string, unknown>;
  containers: (Container & ContainerDetails)[];
  volumes: {
    name: string;
    emptyDir?: object;
    configMap?: { name: string };
    projected?: { sources: { serviceAccountToken?: object }[] };
  }[];
}
/** A rule group of the PrometheusRule: its alerts. */
interface RuleGroup {
  readonly name: string;
  readonly rules: {
    readonly alert: string;
    readonly expr: string;
    readonly for: string;
    readonly labels: Record<string, string>;
    readonly annotations: Record<string, string>;
  }[];
}

const podSpec = (deployment: Manifest) => (deployment['spec'] as { template: { spec: PodSpec } }).template.spec;

describe('chart: lint and render', () => {
  test('helm lint --strict passes for every example', async () => {
    for (const file of VALUE_FILES) {
      const run = await lint({ files: file ? [file] : [] });
      assert.equal(run.code, 0, `${shortName(file)}: ${run.stdout}${run.stderr}`);
    }
  });

  test('every rendered object carries the standard app.kubernetes.io labels', async () => {
    for (const file of VALUE_FILES) {
      const manifests = await render({ release: 'rel', files: file ? [file] : [] });
      assert.ok(manifests.length >= 6, `${shortName(file)}: rendered ${manifests.length} objects`);
      for (const m of manifests) {
        const labels = m.metadata.labels ?? {};
        for (
          const key of [
            'app.kubernetes.io/name',
            'app.kubernetes.io/instance',
            'app.kubernetes.io/version',
            'app.kubernetes.io/managed-by',
            'helm.sh/chart',
          ]
        ) {
          assert.ok(labels[key], `${shortName(file)}: ${m.kind} ${m.metadata.name} lacks ${key}`);
        }
        assert.equal(labels['app.kubernetes.io/instance'], 'rel');
      }
    }
  });

  test("the Deployment is hardened, probed and outlives labeller's grace period; its ConfigMap is a config labeller accepts", async () => {
    for (const file of VALUE_FILES) {
      const what = shortName(file);
      const manifests = await render({ release: 'rel', files: file ? [file] : [] });
      const deployment = only(manifests, 'Deployment');
      const pod = podSpec(deployment);
      const [container] = pod.containers;
      assert.ok(container && pod.containers.length === 1, what);
      const args = container.args ?? [];

      assert.equal(pod.enableServiceLinks, false, `${what}: enableServiceLinks`);
      assert.equal(pod.serviceAccountName, only(manifests, 'ServiceAccount').metadata.name);
      assert.equal(pod.securityContext['runAsNonRoot'], true, `${what}: runAsNonRoot`);
      assert.deepEqual(pod.securityContext['seccompProfile'], { type: 'RuntimeDefault' });
      assert.deepEqual(container['securityContext'], {
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
      });
      assert.equal(container.command, undefined, "the image's entry point runs, as in the Dockerfile");
      for (const kind of ['requests', 'limits']) {
        assert.ok(
          container['resources'][kind]?.cpu && container['resources'][kind]?.memory,
          `${what}: resources.${kind}`,
        );
      }

      // Probes on the port labeller serves them on.
      const port = container['ports'].find((p: { name: string }) => p.name === 'http');
      assert.equal(String(port?.containerPort), flagValue(args, '--http-port'));
      assert.deepEqual(container['livenessProbe'].httpGet, { path: '/healthz', port: 'http' });
      assert.deepEqual(container['readinessProbe'].httpGet, { path: '/readyz', port: 'http' });

      // Kubernetes waits for labeller's own grace period, with room to spare.
      const graceMs = parseDuration(flagValue(args, '--grace-period') ?? '');
      assert.ok(
        graceMs !== undefined && pod.terminationGracePeriodSeconds * 1000 >= graceMs + 10_000,
        `${what}: terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds} vs --grace-period ${graceMs} ms`,
      );

      // Nothing writable is needed; the config is mounted read-only where --config points.
      const mounts = container['volumeMounts'] as VolumeMount[];
      const configPath = flagValue(args, '--config') ?? '';
      const config = mounts.find((m) => configPath.startsWith(`${m.mountPath}/`));
      assert.ok(config?.readOnly, `${what}: the config is mounted read-only`);
      const configMap = only(manifests, 'ConfigMap');
      assert.equal(pod.volumes.find((v) => v.name === config.name)?.configMap?.name, configMap.metadata.name);
      const text = (configMap['data'] as Record<string, string>)[configPath.slice(config.mountPath.length + 1)] ?? '';
      assert.doesNotThrow(
        () => parseConfig(text, `${what}: ConfigMap`),
        `${what}: labeller's loader accepts the ConfigMap`,
      );

      // More than one replica: leader election on, or sharding; never both.
      const replicas = (deployment['spec'] as { replicas: number }).replicas;
      const [leading, sharded] = [args.includes('--leader-elect'), args.includes('--shards=auto')];
      assert.ok(!(leading && sharded), `${what}: --leader-elect with --shards=auto`);
      if (replicas > 1) {
        assert.ok(leading || sharded, `${what}: ${replicas} replicas without --leader-elect or --shards=auto`);
      }
    }
  });

  test('RBAC is derived from the kinds: list/watch/patch on exactly the configured resources', async () => {
    // CRDs carry their group; a built-in may give its group ("" for core); a kind with its own
    // namespaces gets Roles there instead of the ClusterRole.
    const crd = await render({ release: 'rel', namespace: 'ops', files: [join(CHART, 'examples', 'crd.yaml')] });
    // Events go with the ClusterRole when there is one.
    assert.deepEqual(rulesOf(only(crd, 'ClusterRole')), [
      grant('apps', 'deployments'),
      grant('cert-manager.io', 'certificates', 'clusterissuers'),
      grant('example.com', 'widgets'),
      EVENTS_RULE,
      GUARD_RULE,
    ]);
    assert.deepEqual(rulesOf(only(crd, 'Role', 'rel-labeller')), [grant('', 'resourcequotas')]);
    assert.equal(only(crd, 'Role', 'rel-labeller').metadata.namespace, 'default');
    const kinds = load((only(crd, 'ConfigMap')['data'] as Record<string, string>)['kinds.yaml'] ?? '') as {
      kinds: { resource: string }[];
    };
    assert.deepEqual(kinds.kinds.map((k) => k.resource), [
      'widgets.example.com',
      'certificates.cert-manager.io',
      'clusterissuers.cert-manager.io',
      'resourcequotas',
      'deployments.apps',
    ]);
    assert.ok(kinds.kinds.every((k) => !('group' in k) && !('scope' in k)), 'chart-only fields are stripped');

    // The leader-election Role: create any Lease, read and renew only labeller's and the sources'
    // memory; list the guard Leases of other labellers, hold the release's own.
    assert.deepEqual(rulesOf(only(crd, 'Role', 'rel-labeller-leader-election')), [
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create', 'list'] },
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        resourceNames: ['rel-labeller', 'rel-labeller-sources'],
        verbs: ['get', 'update'],
      },
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        resourceNames: ['rel-labeller-field-manager'],
        verbs: ['get', 'update', 'delete'],
      },
    ]);
    // The field manager is the release's name unless set.
    assert.ok((containers(only(crd, 'Deployment'))[0]?.args ?? []).includes('--field-manager=rel'));
    assert.equal(only(crd, 'Role', 'rel-labeller-leader-election').metadata.namespace, 'ops');

    // Namespaced mode: a Role in each watched namespace, no ClusterRole, and --namespace.
    const namespaced = await render({ release: 'rel', files: [join(CHART, 'examples', 'namespaced.yaml')] });
    assert.equal(namespaced.filter((m) => m.kind.startsWith('Cluster')).length, 0);
    const roles = namespaced.filter((m) => m.kind === 'Role' && m.metadata.name === 'rel-labeller');
    assert.deepEqual(roles.map((r) => r.metadata.namespace), ['team-a', 'team-a-staging']);
    for (const role of roles) {
      assert.deepEqual(rulesOf(role), [
        grant('', 'configmaps', 'persistentvolumeclaims', 'services'),
        grant('apps', 'deployments'),
        grant('networking.k8s.io', 'ingresses'),
        EVENTS_RULE,
      ]);
    }
    // Events on labeller's own Pod: a Role in the release namespace, which is not watched.
    assert.deepEqual(rulesOf(only(namespaced, 'Role', 'rel-labeller-events')), [EVENTS_RULE]);
    assert.equal(only(namespaced, 'Role', 'rel-labeller-events').metadata.namespace, 'labeller');
    assert.equal(namespaced.filter((m) => m.kind === 'RoleBinding').length, 4);
    assert.equal(
      flagValue(containers(only(namespaced, 'Deployment'))[0]?.args ?? [], '--namespace'),
      'team-a,team-a-staging',
    );

    // Every example: labeller's roles grant its three verbs (no get: it never reads one object by
    // name), on events create and patch, and on Leases list (the guard); nothing else.
    for (const file of VALUE_FILES) {
      for (
        const role of (await render({ files: file ? [file] : [] })).filter((m) =>
          /^(Cluster)?Role$/.test(m.kind) && !/-(leader-election|field-manager-guard|sharding)$/.test(m.metadata.name)
        )
      ) {
        for (const rule of rulesOf(role)) {
          const group = rule.apiGroups[0];
          if (isDeepStrictEqual(rule, SHARD_LAYOUT_RULE)) continue;
          assert.deepEqual(
            rule.verbs,
            group === 'events.k8s.io'
              ? EVENTS_VERBS
              : group === 'coordination.k8s.io'
              ? GUARD_RULE.verbs
              : LABELLER_VERBS,
            `${shortName(file)}: ${role.kind} ${role.metadata.name}`,
          );
        }
      }
    }
    // Events off: no rights on events, and --events=false.
    for (const file of [EXAMPLES[0]!, EXAMPLES[1]!]) {
      const quiet = await render({ files: [file], values: { events: { enabled: false } } });
      assert.deepEqual(
        quiet.filter((m) => /Role$/.test(m.kind) && rulesOf(m).some((r) => r.apiGroups.includes('events.k8s.io'))).map((
          m,
        ) => m.metadata.name),
        [],
        shortName(file),
      );
      assert.ok((containers(only(quiet, 'Deployment'))[0]?.args ?? []).includes('--events=false'), shortName(file));
    }
    // Templates reading related objects: read access to them, and only then.
    const related = {
      events: { enabled: false },
      labels: { team: '{{namespace.labels.team}}' },
      kinds: [{ resource: 'pods', labels: { 'example.com/part-of': '{{ root.labels.app.kubernetes.io/part-of }}' } }, {
        resource: 'jobs',
        labels: { 'example.com/cron': '{{owner.name}}' },
      }],
    };
    assert.deepEqual(rulesOf(only(await render({ values: related }), 'ClusterRole')), [
      grant('', 'pods'),
      grant('batch', 'jobs'),
      read('', 'namespaces', 'replicationcontrollers'),
      read('apps', 'daemonsets', 'deployments', 'replicasets', 'statefulsets'),
      read('batch', 'cronjobs', 'jobs'),
      GUARD_RULE,
    ]);
    // Owner kinds named in ownerKinds: read too, and in the config labeller reads.
    const operator = await render({ values: { ...related, ownerKinds: ['rollouts.argoproj.io'] } });
    assert.ok(rulesOf(only(operator, 'ClusterRole')).some((r) => r.apiGroups[0] === 'argoproj.io'));
    assert.match(
      (only(operator, 'ConfigMap')['data'] as Record<string, string>)['kinds.yaml'] ?? '',
      /ownerKinds:\n {2}- rollouts\.argoproj\.io/,
    );
    // Namespaced: owner kinds in each Role; namespaces by name in a ClusterRole of their own.
    const relatedNamespaced = await render({ values: { ...related, watchNamespaces: ['a', 'b'] } });
    assert.deepEqual(rulesOf(only(relatedNamespaced, 'ClusterRole')), [{
      apiGroups: [''],
      resources: ['namespaces'],
      resourceNames: ['a', 'b'],
      verbs: ['list', 'watch'],
    }]);
    assert.deepEqual(
      rulesOf(
        relatedNamespaced.find((m) =>
          m.kind === 'Role' && m.metadata.namespace === 'a' && !m.metadata.name.endsWith('-leader-election')
        )!,
      ),
      [
        grant('', 'pods'),
        grant('batch', 'jobs'),
        read('', 'replicationcontrollers'),
        read('apps', 'daemonsets', 'deployments', 'replicasets', 'statefulsets'),
        read('batch', 'cronjobs', 'jobs'),
      ],
    );
    assert.ok(only(relatedNamespaced, 'ClusterRoleBinding').metadata.name.endsWith('-namespaces'));

    // References: what they name is read, cluster-wide when cluster-scoped or in any namespace
    // (a pod's node, a PV's claim), else where the kind is; namespaced, in a ClusterRole of its own.
    const referencing = {
      events: { enabled: false },
      kinds: [
        { resource: 'pods', labels: { zone: '{{node.labels.zone}}', sa: '{{serviceAccount.name}}' } },
        { resource: 'persistentvolumes', labels: { team: '{{claim.labels.team}}' } },
      ],
    };
    assert.deepEqual(rulesOf(only(await render({ values: referencing }), 'ClusterRole')), [
      grant('', 'persistentvolumes', 'pods'),
      read('', 'nodes', 'persistentvolumeclaims', 'serviceaccounts'),
      GUARD_RULE,
    ]);
    const referencingNamespaced = await render({
      values: {
        events: { enabled: false },
        watchNamespaces: ['a'],
        kinds: [{ resource: 'pods', labels: { zone: '{{node.labels.zone}}', sa: '{{serviceAccount.name}}' } }],
        references: { backup: { of: 'pods', field: 'spec.x', to: 'backups.example.com' } },
      },
    });
    assert.deepEqual(rulesOf(only(referencingNamespaced, 'ClusterRole', 'labeller-references')), [read('', 'nodes')]);
    assert.deepEqual(
      rulesOf(
        referencingNamespaced.find((m) =>
          m.kind === 'Role' && m.metadata.namespace === 'a' && !m.metadata.name.endsWith('-leader-election')
        )!,
      ),
      [grant('', 'pods'), read('', 'serviceaccounts')],
    );
    assert.match(
      (only(referencingNamespaced, 'ConfigMap')['data'] as Record<string, string>)['kinds.yaml'] ?? '',
      /references:\n {2}backup:\n {4}field: spec\.x\n {4}of: pods\n {4}to: backups\.example\.com/,
    );

    // Leader election off: no leader-election Lease rights; the field-manager guard's, in the release namespace.
    const off = await render({ files: [EXAMPLES[0]!], values: { leaderElection: { enabled: false } } });
    assert.ok(!off.some((m) => m.metadata.name.endsWith('-leader-election')));
    assert.deepEqual(rulesOf(only(off, 'Role', 'labeller-field-manager-guard')), [
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        verbs: ['create', 'list', 'get', 'update', 'delete'],
      },
    ]);
    assert.ok(!(containers(only(off, 'Deployment'))[0]?.args ?? []).some((a) => a.startsWith('--lease')));
  });

  test("sharded mode: every replica a member of the group, with leader election's timings and without --leader-elect; its Role grants what membership needs on the release namespace's Leases", async () => {
    const sharded = join(CHART, 'examples', 'sharded.yaml');
    const manifests = await render({ release: 'rel', namespace: 'ops', files: [sharded] });
    const deployment = only(manifests, 'Deployment');
    assert.equal((deployment['spec'] as { replicas: number }).replicas, 3);
    const args = containers(deployment)[0]?.args ?? [];
    assert.deepEqual(args.filter((a) => /^--(shard|leader-elect)/.test(a)), [
      '--shards=auto',
      '--shard-group=rel-labeller',
      '--leader-elect-resource-namespace=ops',
      '--leader-elect-lease-duration=15s',
      '--leader-elect-renew-deadline=10s',
      '--leader-elect-retry-period=2s',
    ]);
    // The members' Leases: any in the release namespace (their names hash the member), and nothing about the leader's.
    const role = only(manifests, 'Role', 'rel-labeller-sharding');
    assert.equal(role.metadata.namespace, 'ops');
    assert.deepEqual(rulesOf(role), [{
      apiGroups: ['coordination.k8s.io'],
      resources: ['leases'],
      verbs: ['get', 'list', 'create', 'update', 'delete'],
    }]);
    // The oldest member lists the namespaces' names to lay the buckets out over them.
    assert.ok(
      rulesOf(only(manifests, 'ClusterRole', 'rel-labeller')).some((r) => isDeepStrictEqual(r, SHARD_LAYOUT_RULE)),
    );
    const binding = only(manifests, 'RoleBinding', 'rel-labeller-sharding');
    assert.equal(binding.metadata.namespace, 'ops');
    assert.deepEqual(binding['roleRef'], {
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'Role',
      name: 'rel-labeller-sharding',
    });
    assert.deepEqual(binding['subjects'], [{ kind: 'ServiceAccount', name: 'rel-labeller', namespace: 'ops' }]);
    assert.ok(!manifests.some((m) => m.metadata.name.endsWith('-leader-election')));
    // The field-manager guard keeps its own Role, as without leader election.
    assert.ok(manifests.some((m) => m.kind === 'Role' && m.metadata.name === 'rel-labeller-field-manager-guard'));
    // Drains take one member at a time.
    const pdb = only(manifests, 'PodDisruptionBudget');
    assert.deepEqual(pdb['spec'], {
      maxUnavailable: 1,
      selector: { matchLabels: { 'app.kubernetes.io/name': 'labeller', 'app.kubernetes.io/instance': 'rel' } },
    });

    // A group of one's own, and timings of one's own, reach the flags.
    const tuned = await render({
      release: 'rel',
      files: [sharded],
      values: { sharding: { group: 'labellers' }, leaderElection: { leaseDuration: '30s', retryPeriod: '5s' } },
    });
    const tunedArgs = containers(only(tuned, 'Deployment'))[0]?.args ?? [];
    assert.equal(flagValue(tunedArgs, '--shard-group'), 'labellers');
    assert.equal(flagValue(tunedArgs, '--leader-elect-lease-duration'), '30s');
    assert.equal(flagValue(tunedArgs, '--leader-elect-retry-period'), '5s');
    // The PodDisruptionBudget stays the user's switch: sharding alone makes none.
    const bare = await render({
      values: {
        labels: { a: 'b' },
        kinds: [{ resource: 'deployments' }],
        replicaCount: 3,
        leaderElection: { enabled: false },
        sharding: { enabled: true },
      },
    });
    assert.deepEqual(bare.filter((m) => m.kind === 'PodDisruptionBudget'), []);
    assert.equal(flagValue(containers(only(bare, 'Deployment'))[0]?.args ?? [], '--shard-group'), 'labeller');
    // The default group, the full name, must be a name labeller takes (a DNS-1123 label): a release name with a dot is not.
    const dotted = await template({
      release: 'my.rel',
      values: {
        labels: { a: 'b' },
        kinds: [{ resource: 'deployments' }],
        leaderElection: { enabled: false },
        sharding: { enabled: true },
      },
    });
    assert.notEqual(dotted.code, 0);
    assert.match(
      dotted.stderr,
      /sharding\.group: the release's full name "my\.rel-labeller" cannot name the shard group.*set sharding\.group/,
    );

    // Off (the default): no sharding flag, no sharding Role.
    for (const file of EXAMPLES.filter((f) => f !== sharded)) {
      const plain = await render({ files: [file] });
      assert.ok(!(containers(only(plain, 'Deployment'))[0]?.args ?? []).some((a) => a.startsWith('--shard')), file);
      assert.ok(!plain.some((m) => m.metadata.name.endsWith('-sharding')), file);
    }
  });

  test('admissionPolicies: off by default, nothing of it; on, the flag for labeller and its cleanup Job, and exactly the RBAC the policies need (on the cluster: chart-admission.test.ts)', async () => {
    const basic = { labels: { a: 'b' }, kinds: [{ resource: 'deployments' }], cleanupOnUninstall: true };
    const flagged = (manifests: Manifest[], kind: string) =>
      manifests.filter((m) => m.kind === kind).map((m) => containers(m)[0]?.args?.includes('--admission-policies'));
    const ofPolicies = (manifests: Manifest[]) =>
      manifests.filter((m) => /^ClusterRole(Binding)?$/.test(m.kind) && m.metadata.name.endsWith('-admission-policies'))
        .map((m) => `${m.kind} ${m.metadata.name}`);
    for (const file of EXAMPLES) {
      const plain = await render({ files: [file] });
      assert.deepEqual(flagged(plain, 'Deployment'), [false], file);
      assert.deepEqual(ofPolicies(plain), [], file);
    }
    const off = await render({ release: 'rel', values: basic });
    assert.deepEqual([...flagged(off, 'Deployment'), ...flagged(off, 'Job')], [false, false]);
    assert.deepEqual(ofPolicies(off), []);

    const on = await render({
      release: 'rel',
      namespace: 'ops',
      values: { ...basic, admissionPolicies: { enabled: true } },
    });
    assert.deepEqual([...flagged(on, 'Deployment'), ...flagged(on, 'Job')], [true, true]);
    assert.deepEqual(ofPolicies(on), [
      'ClusterRole rel-labeller-admission-policies',
      'ClusterRoleBinding rel-labeller-admission-policies',
      'ClusterRole rel-labeller-cleanup-admission-policies',
      'ClusterRoleBinding rel-labeller-cleanup-admission-policies',
    ]);
    const OWNER_RULE = ownerRule('rel-labeller-admission-policies');
    assert.deepEqual(rulesOf(only(on, 'ClusterRole', 'rel-labeller-admission-policies')), [
      ADMISSION_POLICIES_RULE,
      OWNER_RULE,
    ]);
    // The policies depend on that ClusterRole: uninstalled, or turned off, it takes them with it.
    assert.ok(
      containers(only(on, 'Deployment'))[0]?.args?.includes(
        '--admission-policies-owner=clusterroles.rbac.authorization.k8s.io/rel-labeller-admission-policies',
      ),
    );
    // protect: the ValidatingAdmissionPolicies too, for labeller and for the cleanup Job.
    const protecting = await render({
      release: 'rel',
      values: { ...basic, admissionPolicies: { enabled: true }, protect: { mode: 'deny' } },
    });
    assert.deepEqual(rulesOf(only(protecting, 'ClusterRole', 'rel-labeller-admission-policies')), [
      ADMISSION_POLICIES_RULE,
      PROTECTION_RULE,
      OWNER_RULE,
    ]);
    assert.deepEqual(rulesOf(only(protecting, 'ClusterRole', 'rel-labeller-cleanup-admission-policies')), [
      { ...ADMISSION_POLICIES_RULE, verbs: ['list', 'delete'] },
      { ...PROTECTION_RULE, verbs: ['list', 'delete'] },
    ]);
    assert.match(
      (only(protecting, 'ConfigMap', 'rel-labeller')['data'] as Record<string, string>)['kinds.yaml'] ?? '',
      /^protect:\n {2}mode: deny$/m,
    );
    assert.deepEqual(only(on, 'ClusterRoleBinding', 'rel-labeller-admission-policies')['subjects'], [
      { kind: 'ServiceAccount', name: 'rel-labeller', namespace: 'ops' },
    ]);
    // The cleanup Job only finds and deletes them.
    assert.deepEqual(rulesOf(only(on, 'ClusterRole', 'rel-labeller-cleanup-admission-policies')), [{
      ...ADMISSION_POLICIES_RULE,
      verbs: ['list', 'delete'],
    }]);
    assert.deepEqual(only(on, 'ClusterRoleBinding', 'rel-labeller-cleanup-admission-policies')['subjects'], [
      { kind: 'ServiceAccount', name: 'rel-labeller-cleanup', namespace: 'ops' },
    ]);
    // Nothing else about policies anywhere: the every-kind RBAC leaves them out.
    assert.deepEqual(
      on.filter((m) => /Role$/.test(m.kind) && !m.metadata.name.endsWith('-admission-policies'))
        .filter((m) => rulesOf(m).some((r) => r.apiGroups.includes('admissionregistration.k8s.io')))
        .map((m) => m.metadata.name),
      [],
    );

    // A ConfigMap source read whole is a policy's params: get on every ConfigMap. One read by `key` is not.
    const withSource = (key?: string) =>
      render({
        release: 'rel',
        values: {
          ...basic,
          admissionPolicies: { enabled: true },
          sources: { teams: { configMap: { namespace: 'ops', name: 'teams', ...(key ? { key } : {}) } } },
        },
      });
    assert.deepEqual(rulesOf(only(await withSource(), 'ClusterRole', 'rel-labeller-admission-policies')), [
      ADMISSION_POLICIES_RULE,
      OWNER_RULE,
      POLICY_PARAMS_RULE,
    ]);
    assert.deepEqual(rulesOf(only(await withSource('teams.yaml'), 'ClusterRole', 'rel-labeller-admission-policies')), [
      ADMISSION_POLICIES_RULE,
      OWNER_RULE,
    ]);
  });

  test("policyReports: off by default, nothing of it; on, the flags for labeller and helm test's preflight, and a ClusterRole with exactly the reports' rights and get on itself, their owner (on the cluster: policyreports.test.ts)", async () => {
    const basic = { labels: { a: 'b' }, kinds: [{ resource: 'deployments' }] };
    const podArgs = (pod: Manifest) => (pod['spec'] as { containers: Container[] }).containers[0]?.args ?? [];
    const argsOf = (manifests: Manifest[]) =>
      [
        ...manifests.filter((m) => m.kind === 'Deployment').map((m) => containers(m)[0]?.args ?? []),
        // helm test's preflight: `labeller status` with the controller's flags.
        ...manifests.filter((m) => m.kind === 'Pod').map(podArgs).filter((args) => args.includes('status')),
      ].map((args) => args.filter((arg) => arg.startsWith('--policy-reports')));
    const ofReports = (manifests: Manifest[]) =>
      manifests.filter((m) => /^ClusterRole(Binding)?$/.test(m.kind) && m.metadata.name.endsWith('-policy-reports'))
        .map((m) => `${m.kind} ${m.metadata.name}`);
    for (const file of EXAMPLES) {
      const plain = await render({ files: [file] });
      assert.ok(argsOf(plain).every((args) => args.length === 0), file);
      assert.deepEqual(ofReports(plain), [], file);
    }
    const on = await render({
      release: 'rel',
      namespace: 'ops',
      values: { ...basic, policyReports: { enabled: true } },
    });
    const owner = 'clusterroles.rbac.authorization.k8s.io/rel-labeller-policy-reports';
    assert.deepEqual(argsOf(on).sort(), [
      ['--policy-reports'],
      ['--policy-reports', `--policy-reports-owner=${owner}`],
    ]);
    assert.deepEqual(ofReports(on), [
      'ClusterRole rel-labeller-policy-reports',
      'ClusterRoleBinding rel-labeller-policy-reports',
    ]);
    assert.deepEqual(rulesOf(only(on, 'ClusterRole', 'rel-labeller-policy-reports')), [
      POLICY_REPORTS_RULE,
      ownerRule('rel-labeller-policy-reports'),
    ]);
    assert.deepEqual(only(on, 'ClusterRoleBinding', 'rel-labeller-policy-reports')['subjects'], [
      { kind: 'ServiceAccount', name: 'rel-labeller', namespace: 'ops' },
    ]);
    // Nothing of the reports anywhere else; without RBAC from the chart, no owner either.
    assert.deepEqual(
      on.filter((m) => /Role$/.test(m.kind) && !m.metadata.name.endsWith('-policy-reports'))
        .filter((m) => rulesOf(m).some((r) => r.apiGroups.includes('wgpolicyk8s.io'))).map((m) => m.metadata.name),
      [],
    );
    const noRbac = await render({
      release: 'rel',
      values: { ...basic, policyReports: { enabled: true }, rbac: { create: false } },
    });
    assert.deepEqual(argsOf(noRbac).filter((args) => args.length > 0)[0], ['--policy-reports']);
  });

  test('every-kind mode: scope and exclude reach the ConfigMap; mistakes are refused (its RBAC: chart-everykind.test.ts)', async () => {
    const example = await render({ release: 'rel', files: [join(CHART, 'examples', 'every-kind.yaml')] });
    const kinds = load((only(example, 'ConfigMap')['data'] as Record<string, string>)['kinds.yaml'] ?? '') as {
      kinds: Record<string, unknown>[];
    };
    assert.deepEqual(kinds.kinds[0], {
      resource: '*',
      scope: 'namespaced',
      exclude: ['pods', 'replicasets.apps', 'jobs.batch'],
    });
    const refused: [entry: object, values: object, message: RegExp][] = [
      [{ scope: 'all' }, { watchNamespaces: ['a'] }, /scope all covers cluster-scoped kinds, which need a ClusterRole/],
      [
        { scope: 'cluster', namespaces: ['a'] },
        {},
        /scope cluster covers cluster-scoped kinds only.*remove `namespaces`/,
      ],
      [{ group: 'apps' }, {}, /the every-kind entry covers the built-in API groups: remove `group`/],
      [{ scope: 'Cluster' }, {}, /the every-kind entry's scope is namespaced, cluster or all/],
    ];
    for (const [entry, values, message] of refused) {
      const run = await template({ values: { labels: { a: 'b' }, kinds: [{ resource: '*', ...entry }], ...values } });
      assert.match(run.stderr, message, JSON.stringify(entry));
    }
    const misplaced = await template({ values: { labels: { a: 'b' }, kinds: [{ resource: 'cm', exclude: ['x'] }] } });
    assert.match(misplaced.stderr, /only the every-kind entry \(resource: "\*"\) takes `exclude`/);
    const scoped = await template({ values: { labels: { a: 'b' }, kinds: [{ resource: 'cm', scope: 'all' }] } });
    assert.match(scoped.stderr, /scope all is for the every-kind entry/);
  });

  const schemaCases: [what: string, values: object, message: RegExp][] = [
    ['a bad conflicts policy', { conflicts: 'forse' }, /at '\/conflicts': value must be one of 'force', 'skip'/],
    [
      'a bad global label key',
      { labels: { 'bad key': 'x' } },
      /at '\/labels': validation failed[\s\S]*invalid propertyName 'bad key'[\s\S]*does not match pattern/,
    ],
    [
      'a bad label key of a kind',
      { kinds: [{ resource: 'cm', labels: { 'example.com/-x': 'y' } }] },
      /at '\/kinds\/0\/labels': validation failed[\s\S]*invalid propertyName 'example\.com\/-x'/,
    ],
    ['an unknown top-level key (a typo)', { replicas: 2 }, /additional properties 'replicas' not allowed/],
    [
      'an unknown field of a kind',
      { kinds: [{ resource: 'cm', namespace: ['x'] }] },
      /at '\/kinds\/0': additional properties 'namespace' not allowed/,
    ],
    ['replicaCount not an integer', { replicaCount: 1.5 }, /at '\/replicaCount': got number, want integer/],
    ['replicaCount a string', { replicaCount: 'two' }, /at '\/replicaCount': got string, want integer/],
    [
      'a duration without unit',
      { gracePeriod: '30' },
      /at '\/gracePeriod': got string|at '\/gracePeriod': '30' does not match pattern/,
    ],
    [
      'an invalid namespace name',
      { watchNamespaces: ['Team-A'] },
      /at '\/watchNamespaces\/0': 'Team-A' does not match pattern/,
    ],
    [
      'a bad pull policy',
      { image: { pullPolicy: 'Sometimes' } },
      /at '\/image\/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'/,
    ],
    [
      "an alert's duration with a fraction (Prometheus takes whole numbers)",
      { prometheusRule: { alerts: { sourceDown: { for: '1.5m' } } } },
      /at '\/prometheusRule\/alerts\/sourceDown\/for': '1\.5m' does not match pattern/,
    ],
    [
      'a shard group that cannot name a Lease',
      { sharding: { group: 'Team_A' } },
      /at '\/sharding\/group': 'Team_A' does not match pattern/,
    ],
    [
      'an unknown sharding field',
      { sharding: { shards: 3 } },
      /at '\/sharding': additional properties 'shards' not allowed/,
    ],
    [
      'an alert the chart does not have',
      { prometheusRule: { alerts: { sourceUp: { enabled: true } } } },
      /at '\/prometheusRule\/alerts': additional properties 'sourceUp' not allowed/,
    ],
  ];
  for (const [what, values, message] of schemaCases) {
    test(`values.schema.json rejects ${what} with a clear message`, async () => {
      const run = await template({ values });
      assert.notEqual(run.code, 0, `rendered: ${run.stdout.slice(0, 200)}`);
      assert.match(run.stderr, /values don't meet the specifications of the schema/);
      assert.match(run.stderr, message);
    });
  }

  test('the default values install nothing: helm says which kinds to set', async () => {
    const run = await template({});
    assert.notEqual(run.code, 0, `rendered: ${run.stdout.slice(0, 200)}`);
    assert.match(
      run.stderr,
      /kinds: no kinds to label\. Say what to label, e\.g\. `--set kinds\[0\]\.resource=deployments --set labels\.team=platform`/,
    );
  });

  const label = { labels: { 'example.com/x': 'y' } };
  const checkCases: [what: string, values: object, message: RegExp][] = [
    ['no kinds', { kinds: [] }, /kinds: no kinds to label/],
    [
      'an unknown resource without group',
      { kinds: [{ resource: 'widgets', ...label }] },
      /kinds\[0\] \(resource: widgets\): the chart does not know the API group of "widgets", so it cannot grant RBAC for it\. For a custom resource, add its group and write its plural: `resource: widgets` with `group: example\.com`/,
    ],
    [
      'the group given twice',
      { kinds: [{ resource: 'widgets.example.com', group: 'example.com', ...label }] },
      /give the API group once/,
    ],
    [
      'a custom kind instead of its plural',
      { kinds: [{ resource: 'Widget', group: 'example.com', ...label }] },
      /kinds\[0\] \(resource: Widget\): write the resource's plural name in lowercase \(e\.g\. "widgets"\)/,
    ],
    [
      'the same resource twice',
      { kinds: [{ resource: 'deploy', ...label }, { resource: 'Deployment.apps' }] },
      /kinds\[1\] \(resource: Deployment\.apps\): the same resource as kinds\[0\] \(deployments\.apps\): merge the two entries/,
    ],
    [
      'a cluster-scoped kind in namespaced mode',
      { watchNamespaces: ['a'], kinds: [{ resource: 'ns', ...label }] },
      /namespaces is cluster-scoped and needs a ClusterRole, but namespaced mode \(watchNamespaces\) grants Roles only/,
    ],
    [
      'a kind without labels',
      { kinds: [{ resource: 'cm' }] },
      /kinds\[0\] \(resource: cm\): no labels or annotations to apply: give this kind `labels` or set the global `labels`/,
    ],
    [
      'a null label without a global one',
      { kinds: [{ resource: 'cm', labels: { a: 'b', c: null } }] },
      /labels\["c"\] is null, which drops a global label, but there is no global label "c"/,
    ],
    [
      'an invalid constant label value',
      { kinds: [{ resource: 'cm', labels: { a: '-x-' } }] },
      /label a="-x-": not a valid label value/,
    ],
    [
      'several replicas without leader election',
      { replicaCount: 2, leaderElection: { enabled: false } },
      /replicaCount is 2 but leaderElection\.enabled is false: every replica would write\. Turn leader election on \(one replica writes\), or sharding\.enabled/,
    ],
    [
      'sharding together with leader election (on by default)',
      { replicaCount: 3, sharding: { enabled: true } },
      /sharding\.enabled and leaderElection\.enabled are both true.*To shard, set leaderElection\.enabled=false; else set sharding\.enabled=false/,
    ],
    [
      'sharded lease timings in the wrong order',
      { leaderElection: { enabled: false, leaseDuration: '5s' }, sharding: { enabled: true } },
      /need leaseDuration > renewDeadline > retryPeriod, got 5s, 10s, 2s/,
    ],
    [
      'lease timings in the wrong order',
      { leaderElection: { renewDeadline: '20s' } },
      /need leaseDuration > renewDeadline > retryPeriod, got 15s, 20s, 2s/,
    ],
    ['a ServiceMonitor without the Service', {
      metrics: { service: { enabled: false }, serviceMonitor: { enabled: true } },
    }, /metrics\.serviceMonitor\.enabled needs metrics\.service\.enabled/],
  ];
  for (const [what, values, message] of checkCases) {
    test(`the chart refuses ${what} with a message that says what to write`, async () => {
      const run = await template({ values: { kinds: [{ resource: 'deploy', ...label }], ...values } });
      assert.notEqual(run.code, 0, `rendered: ${run.stdout.slice(0, 200)}`);
      assert.match(run.stderr, message);
    });
  }

  test('allowProtectedPrefixes reaches the ConfigMap: only with it does labeller accept a copied label in a kubernetes.io key', async () => {
    const values = { labels: { 'app.kubernetes.io/name': '{{labels.app}}' }, kinds: [{ resource: 'deployments' }] };
    const configOf = async (extra: object) => {
      const manifests = await render({ release: 'rel', values: { ...values, ...extra } });
      return (only(manifests, 'ConfigMap')['data'] as Record<string, string>)['kinds.yaml'] ?? '';
    };
    const [without, opted] = [await configOf({}), await configOf({ allowProtectedPrefixes: true })];
    assert.throws(() => parseConfig(without, 'ConfigMap'), /allowProtectedPrefixes: true/);
    assert.doesNotThrow(() => parseConfig(opted, 'ConfigMap'));
  });

  test('the dashboard and the alerts are off by default; on, the sidecar finds the dashboard, and every alert has a summary, a description and its runbook in docs/operations.md', async () => {
    const kinds = { labels: { a: 'b' }, kinds: [{ resource: 'deployments' }] };
    const plain = await render({ release: 'rel', values: kinds });
    assert.deepEqual(plain.filter((m) => m.kind === 'PrometheusRule' || m.metadata.name.endsWith('-dashboard')), []);

    const values = {
      ...kinds,
      dashboard: { enabled: true, namespace: 'monitoring', annotations: { grafana_folder: 'Labeller' } },
      prometheusRule: {
        enabled: true,
        labels: { release: 'kube-prometheus-stack' },
        alertLabels: { team: 'platform' },
        alerts: { fights: { enabled: false }, labelsHeld: { for: '30m', threshold: 5 } },
      },
    };
    const lintRun = await lint({ values });
    assert.equal(lintRun.code, 0, `${lintRun.stdout}${lintRun.stderr}`);
    const manifests = await render({ release: 'rel', namespace: 'labeller', values });
    const dashboard = only(manifests, 'ConfigMap', 'rel-labeller-dashboard');
    assert.equal(dashboard.metadata.namespace, 'monitoring');
    assert.equal(dashboard.metadata.labels?.['grafana_dashboard'], '1');
    assert.deepEqual((dashboard.metadata as { annotations?: object }).annotations, { grafana_folder: 'Labeller' });
    assert.deepEqual(
      JSON.parse((dashboard['data'] as Record<string, string>)['labeller.json'] ?? ''),
      JSON.parse(readFileSync(join(CHART, 'dashboards', 'labeller.json'), 'utf8')),
    );

    const rule = only(manifests, 'PrometheusRule');
    assert.equal(rule.metadata.labels?.['release'], 'kube-prometheus-stack');
    const [group, ...more] = (rule['spec'] as { groups: RuleGroup[] }).groups;
    assert.ok(group && more.length === 0);
    assert.deepEqual(group.rules.map((r) => r.alert), [
      'LabellerSourceDown',
      'LabellerLabelsHeld',
      'LabellerKindsSkipped',
      'LabellerNotReady',
      'LabellerNoLeader',
    ]);
    const runbooks = anchors(readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8'));
    for (const r of group.rules) {
      assert.match(r.expr, /\{namespace="labeller", job="rel-labeller-metrics"\}/, r.alert);
      assert.deepEqual(r.labels['team'], 'platform', r.alert);
      assert.ok(r.labels['severity'], r.alert);
      assert.ok(r.annotations['summary'] && r.annotations['description'], r.alert);
      const [base, anchor] = r.annotations['runbook_url']?.split('#') ?? [];
      assert.equal(base, 'https://github.com/example/labeller/blob/v0.1.0/docs/operations.md', r.alert);
      assert.equal(anchor, r.alert.toLowerCase());
      assert.ok(runbooks.has(anchor), `docs/operations.md has no section #${anchor}`);
    }
    const held = group.rules.find((r) => r.alert === 'LabellerLabelsHeld');
    assert.equal(held?.for, '30m');
    assert.match(held?.expr ?? '', /\) > 5$/);
  });

  test("helm test's Pods (tests.enabled, on by default): Pods only, one container each, as hardened as the Deployment and with its image; the preflight with its scope as its ServiceAccount, /readyz through the Service, the admission probe with rights of its own (on the cluster: chart-install.test.ts)", async () => {
    const isTest = (m: Manifest) =>
      (m.metadata as { annotations?: Record<string, string> }).annotations?.['helm.sh/hook'] === 'test';
    const named = (m: Manifest) => m.metadata.labels?.['app.kubernetes.io/name'] === 'labeller-test';
    for (const file of EXAMPLES) {
      const what = shortName(file);
      const manifests = await render({ release: 'rel', files: [file] });
      const deployment = only(manifests, 'Deployment');
      const pod = podSpec(deployment);
      const [labeller] = pod.containers;
      const tests = manifests.filter(isTest);
      assert.deepEqual(
        tests.map((m) => [m.kind, m.metadata.name]),
        [['Pod', 'rel-labeller-test-rbac'], ['Pod', 'rel-labeller-test-readyz']],
        what,
      );
      assert.deepEqual(manifests.filter(named).filter((m) => !isTest(m)), [], `${what}: no admission test`);
      const off = await render({ release: 'rel', files: [file], values: { tests: { enabled: false } } });
      // tests.enabled=false removes them, and the NetworkPolicy's way in for them, only.
      const notPolicy = (m: Manifest) => m.kind !== 'NetworkPolicy';
      assert.deepEqual(off.filter(notPolicy), manifests.filter((m) => !isTest(m) && notPolicy(m)), what);
      assert.equal(off.length, manifests.length - tests.length, what);
      for (const test of tests) {
        const spec = test['spec'] as PodSpec & { restartPolicy: string; containers: (Container & ContainerDetails)[] };
        assert.deepEqual((test.metadata as { annotations?: object }).annotations, {
          'helm.sh/hook': 'test',
          'helm.sh/hook-weight': test.metadata.name.endsWith('-rbac') ? '1' : '2',
          'helm.sh/hook-delete-policy': 'before-hook-creation,hook-succeeded',
          'helm.sh/hook-output-log-policy': 'hook-failed',
        });
        // Nothing that selects the release's pods selects a test Pod.
        assert.equal(test.metadata.labels?.['app.kubernetes.io/name'], 'labeller-test');
        assert.equal(test.metadata.labels?.['app.kubernetes.io/component'], 'test');
        for (
          const selector of [
            (deployment['spec'] as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels,
            ...manifests.filter((m) => m.kind === 'Service').map((m) =>
              (m['spec'] as { selector: Record<string, string> }).selector
            ),
          ]
        ) {
          assert.ok(
            !isDeepStrictEqual({ ...test.metadata.labels, ...selector }, test.metadata.labels),
            `${what}: ${test.metadata.name}`,
          );
        }
        assert.equal(spec.restartPolicy, 'Never');
        assert.equal(spec.enableServiceLinks, false);
        assert.deepEqual(spec.securityContext, pod.securityContext);
        const [container, ...more] = spec.containers;
        assert.ok(container && more.length === 0 && !('initContainers' in spec), `${what}: one container`);
        assert.equal(container['image'], labeller!['image']);
        assert.equal(container['imagePullPolicy'], labeller!['imagePullPolicy']);
        assert.deepEqual(container['securityContext'], labeller!['securityContext']);
        assert.deepEqual(container['resources'], labeller!['resources']);
      }

      // The preflight: labeller status, the Deployment's config and scope, as its ServiceAccount, with its mounts.
      const rbac = tests[0]!['spec'] as PodSpec;
      const status = rbac.containers[0]!;
      assert.equal(rbac.serviceAccountName, pod.serviceAccountName);
      assert.equal(rbac.automountServiceAccountToken, pod.automountServiceAccountToken);
      assert.equal(status.command, undefined, "the image's entry point runs labeller");
      const scope =
        /^--(config|namespace|selector|field-manager|events|admission-policies|log-level|log-format|leader-elect|shards|shard-group)\b/;
      const args = status.args ?? [];
      assert.equal(args[0], 'status');
      assert.deepEqual(
        args.slice(1).sort(),
        (labeller!.args ?? []).filter((a) => scope.test(a) && !a.startsWith('--admission-policies-owner')).sort(),
        what,
      );
      assert.deepEqual(
        status['volumeMounts'],
        labeller!['volumeMounts']?.filter((m) => m.name !== 'sources-memory-key'),
      );
      assert.deepEqual(rbac.volumes, pod.volumes.filter((v) => v.name !== 'sources-memory-key'));

      // /readyz through the metrics Service, with no token.
      const readyz = tests[1]!['spec'] as PodSpec;
      const service = only(manifests, 'Service');
      const port = (service['spec'] as { ports: { port: number }[] }).ports[0]?.port;
      assert.equal(readyz.automountServiceAccountToken, false);
      assert.equal(readyz.serviceAccountName, undefined);
      assert.deepEqual(readyz.containers[0]!.command, ['/usr/local/bin/node']);
      assert.deepEqual(readyz.containers[0]!.args?.slice(0, 2), ['--input-type=module', '--eval']);
      assert.equal(
        readyz.containers[0]!.args?.[2],
        readFileSync(join(CHART, 'files', 'tests', 'readyz.mjs'), 'utf8'),
      );
      assert.deepEqual(
        readyz.containers[0]!.env?.find((e) => e.name === 'READYZ_URL')?.value,
        `http://${service.metadata.name}.labeller.svc:${port}/readyz`,
      );
    }
    const noService = await render({
      release: 'rel',
      files: [EXAMPLES[0]!],
      values: { metrics: { service: { enabled: false } } },
    });
    assert.deepEqual(noService.filter(isTest).map((m) => m.metadata.name), ['rel-labeller-test-rbac']);

    // The NetworkPolicy lets the test Pods reach the HTTP port when it names who may.
    const policy = only(
      await render({
        release: 'rel',
        files: [EXAMPLES[0]!],
        values: { networkPolicy: { enabled: true, metricsFrom: [{ namespaceSelector: {} }] } },
      }),
      'NetworkPolicy',
    );
    assert.deepEqual((policy['spec'] as { ingress: { from: object[] }[] }).ingress[0]?.from, [
      { namespaceSelector: {} },
      {
        podSelector: {
          matchLabels: { 'app.kubernetes.io/name': 'labeller-test', 'app.kubernetes.io/instance': 'rel' },
        },
      },
    ]);

    // admissionPolicies: a probe of a kind it labels, in a namespace it labels, with what its selector needs; what the policies must set.
    const probe = async (values: object, release = 'rel') => {
      const manifests = await render({
        release,
        namespace: 'ops',
        values: { admissionPolicies: { enabled: true }, ...values },
      });
      const pod = manifests.find((m) => m.kind === 'Pod' && m.metadata.name.endsWith('-test-admission'));
      if (!pod) return { manifests, env: undefined };
      const env = Object.fromEntries(
        ((pod['spec'] as PodSpec).containers[0]?.env ?? []).map((e) => [e.name, e.value]),
      );
      return { manifests, env, pod };
    };
    const { manifests: admitting, env, pod: admission } = await probe({
      labels: {
        'example.com/managed': 'labeller',
        'example.com/app': '{{labels.app}}',
        'example.com/where': '{{namespace}}-{{ kind }}',
      },
      kinds: [
        { resource: 'deployments' },
        {
          resource: 'cm',
          namespaces: ['shop', 'team'],
          selector: 'tier=web,app in (a,b),!legacy,zone notin (x)',
          labels: { 'example.com/cm': 'yes' },
        },
      ],
    });
    assert.deepEqual(JSON.parse(env?.['PROBE'] ?? ''), {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'labeller-helm-test-probe', namespace: 'shop', labels: { tier: 'web', app: 'a' } },
    });
    assert.equal(env?.['PROBE_PATH'], '/api/v1/namespaces/shop/configmaps');
    assert.deepEqual(JSON.parse(env?.['EXPECTED_LABELS'] ?? ''), {
      'example.com/managed': 'labeller',
      'example.com/where': 'shop-ConfigMap',
      'example.com/cm': 'yes',
    });
    assert.equal(env?.['MARKER'], markerKeys('rel').labels);
    assert.equal(env?.['NODE_EXTRA_CA_CERTS'], '/var/run/secrets/kubernetes.io/serviceaccount/ca.crt');
    const adm = admission!['spec'] as PodSpec;
    assert.equal(adm.serviceAccountName, 'rel-labeller-test');
    assert.equal(adm.automountServiceAccountToken, true);
    // Its ServiceAccount may create config maps in that namespace, and nothing else: regular objects, not hooks.
    assert.deepEqual(
      admitting.filter((m) => named(m) && !isTest(m)).map((m) =>
        `${m.kind} ${m.metadata.namespace}/${m.metadata.name}`
      ),
      ['ServiceAccount ops/rel-labeller-test', 'Role shop/rel-labeller-test', 'RoleBinding shop/rel-labeller-test'],
    );
    assert.deepEqual(rulesOf(only(admitting, 'Role', 'rel-labeller-test')), [{
      apiGroups: [''],
      resources: ['configmaps'],
      verbs: ['create'],
    }]);
    assert.deepEqual(only(admitting, 'RoleBinding', 'rel-labeller-test')['subjects'], [
      { kind: 'ServiceAccount', name: 'rel-labeller-test', namespace: 'ops' },
    ]);
    // The every-kind entry covers config maps; else service accounts; in the release namespace when it is watched.
    const every = await probe({ labels: { a: 'b' }, kinds: [{ resource: '*' }] });
    assert.equal(every.env?.['PROBE_PATH'], '/api/v1/namespaces/ops/configmaps');
    const accounts = await probe({ labels: { a: 'b' }, kinds: [{ resource: 'sa', namespaces: ['team', 'ops'] }] });
    assert.equal(accounts.env?.['PROBE_PATH'], '/api/v1/namespaces/ops/serviceaccounts');
    assert.equal(JSON.parse(accounts.env?.['PROBE'] ?? '{}').kind, 'ServiceAccount');
    // A long field manager: its marker is hashed, as labeller names it.
    const long = 'a-release-name-long-enough-to-be-hashed-in-the-marker-annotation';
    assert.equal(
      (await probe({ labels: { a: 'b' }, kinds: [{ resource: 'cm' }], fieldManager: long })).env?.['MARKER'],
      markerKeys(long).labels,
    );
    // No probe: no kind it can make, no label it can tell beforehand, a config not the chart's, a dry run, no RBAC.
    for (
      const values of [
        { labels: { a: 'b' }, kinds: [{ resource: 'deployments' }] },
        { labels: { a: '{{labels.app}}' }, kinds: [{ resource: 'cm' }] },
        { labels: { a: 'b' }, kinds: [{ resource: 'cm' }], existingConfigMap: 'mine' },
        { labels: { a: 'b' }, kinds: [{ resource: 'cm' }], dryRun: true },
        {
          labels: { a: 'b' },
          kinds: [{ resource: 'cm' }],
          rbac: { create: false },
          serviceAccount: { name: 'mine', create: false },
        },
        { labels: { a: 'b' }, kinds: [{ resource: 'cm' }], tests: { enabled: false } },
      ]
    ) {
      const { manifests } = await probe(values);
      assert.deepEqual(
        manifests.filter(named).filter((m) =>
          !m.metadata.name.endsWith('-test-rbac') && !m.metadata.name.endsWith('-test-readyz')
        ),
        [],
        JSON.stringify(values),
      );
    }
    const linted = await lint({
      values: { admissionPolicies: { enabled: true }, labels: { a: 'b' }, kinds: [{ resource: 'cm' }] },
    });
    assert.equal(linted.code, 0, `${linted.stdout}${linted.stderr}`);
  });

  test('the Dockerfile builds the layout image/build.sh builds: same script, scratch base, non-root, the same entry point and environment', async () => {
    const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
    const build = readFileSync(join(ROOT, 'image', 'build.sh'), 'utf8');
    assert.match(dockerfile, /^FROM node:24[-\w.]* AS build$/m, 'built on Node 24');
    assert.match(
      dockerfile,
      /bash image\/rootfs\.sh \/layers$/m,
      "the root filesystem from the image build's own script",
    );
    assert.match(dockerfile, /^FROM scratch$/m, 'nothing but the layers');
    const user = /^USER (\d+):(\d+)$/m.exec(dockerfile);
    assert.ok(user && user[1] !== '0', 'a numeric non-root USER');
    assert.match(build, new RegExp(`--user ${user[1]}:${user[2]}`), 'the same user as the OCI image');
    const entrypoint = /^ENTRYPOINT \[(.*)\]$/m.exec(dockerfile)?.[1]?.split(', ').map((part) =>
      JSON.parse(part) as string
    );
    assert.deepEqual(
      entrypoint,
      /--entrypoint (\S+)/.exec(build)?.[1]?.split(','),
      'the same entry point as the OCI image',
    );
    assert.deepEqual(
      [...dockerfile.matchAll(/^ENV (\S+)$/gm)].map((m) => m[1]),
      [...build.matchAll(/--env (\S+)/g)].map((m) => m[1]),
      'the same environment as the OCI image',
    );
    // The chart runs the image's entry point as the image's user.
    const pod = podSpec(only(await render({ files: [EXAMPLES[0]!] }), 'Deployment'));
    assert.equal(pod.containers[0]?.command, undefined);
    assert.equal(String(pod.securityContext['runAsUser']), user[1]);
    const ignore = readFileSync(join(ROOT, '.dockerignore'), 'utf8');
    for (const path of ['package.json', 'package-lock.json', 'scripts/', 'src/', 'image/']) {
      assert.match(ignore, new RegExp(`^!${path.replace('.', '\\.')}$`, 'm'));
    }
  });
});

// Cluster-wide labellers of this file select only the objects it made.
const { labels: OWN, selector: OWN_SELECTOR } = ownLabel('rbac');
const LABELS = { 'example.com/team': 'platform', 'example.com/namespace': '{{namespace}}' };

describe('chart: RBAC against the API server', { skip }, () => {
  test('cluster-wide: the rendered RBAC lets labeller label config maps and deployments, and allows nothing more', async () => {
    const target = await createNamespace('chart-target');
    const { namespace, manifests, kubeconfig, leaseName } = await installRbac('chart-cw', {
      labels: LABELS,
      selector: OWN_SELECTOR,
      kinds: [{ resource: 'configmaps' }, { resource: 'deployments' }],
    });
    await createConfigMap(target, 'app-config', OWN);
    await createDeployment(target, 'web', OWN);
    await create(`/api/v1/namespaces/${target}/secrets`, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'token' },
      stringData: { a: 'b' },
    });

    // Enough: labeller, as the chart's ServiceAccount with the chart's arguments, labels both kinds.
    // As deployed: with leader election, so the field-manager guard holds the Lease the RBAC names.
    const labeller = new Labeller(localArgs(manifests, { leaderElection: true }), { kubeconfig });
    try {
      const expected = { 'example.com/team': 'platform', 'example.com/namespace': target };
      await eventually(
        () => labelled(`/api/v1/namespaces/${target}/configmaps/app-config`, expected),
        'the config map to be labelled',
      );
      await eventually(
        () => labelled(`/apis/apps/v1/namespaces/${target}/deployments/web`, expected),
        'the deployment to be labelled',
      );
      assert.deepEqual(
        labeller.logs.filter((l) =>
          l.level === 'error' || /\b403\b|forbidden/i.test(`${l.msg} ${String(l['error'] ?? '')}`)
        ),
        [],
      );
    } finally {
      const exit = await labeller.stop();
      assert.equal(exit.code, 0, exit.stderr);
    }

    // Nothing more: the four verbs on the two resources (and the one Lease), nothing else.
    const configmaps = { resource: 'configmaps' };
    const deployments = { group: 'apps', resource: 'deployments' };
    const leases = { group: 'coordination.k8s.io', resource: 'leases', namespace };
    await assertAccess(
      kubeconfig,
      [
        ...each(LABELLER_VERBS, configmaps),
        ...each(LABELLER_VERBS, deployments),
        ...each(LABELLER_VERBS, { ...deployments, namespace: target }),
        ...each(['create', 'list'], leases),
        ...each(['get', 'update'], { ...leases, name: leaseName }),
        ...each(['get', 'update'], { ...leases, name: `${leaseName}-sources` }),
        ...each(EVENTS_VERBS, { group: 'events.k8s.io', resource: 'events', namespace: target }),
        ...each(['get', 'update', 'delete'], { ...leases, name: `${leaseName}-field-manager` }),
        // The guard looks for other labellers' Leases everywhere (list, nothing else).
        ...each(['list'], { ...leases, namespace: target }),
      ],
      [
        ...each(['get', 'create', 'update', 'delete', 'deletecollection'], configmaps),
        ...each(['get'], { ...deployments, namespace: target }),
        ...each(['create', 'update', 'delete'], { ...deployments, namespace: target }),
        ...each(['patch', 'update'], { ...deployments, subresource: 'scale', namespace: target }),
        ...each(['patch'], { ...deployments, subresource: 'status', namespace: target }),
        ...each(LABELLER_VERBS, { resource: 'secrets', namespace: target }),
        ...each(['list', 'patch'], { resource: 'pods' }),
        ...each(['list', 'patch'], { group: 'apps', resource: 'statefulsets' }),
        ...each(['list'], { resource: 'namespaces' }),
        ...each(['watch', 'delete'], leases),
        ...each(['get', 'update', 'delete'], { ...leases, name: 'someone-elses' }),
        ...each(['create'], { ...leases, namespace: target }),
        ...each(['create'], { group: 'rbac.authorization.k8s.io', resource: 'rolebindings', namespace }),
      ],
    );

    // And labeller itself is refused a kind outside the configuration.
    const exit = await runLabeller(['--kinds', 'secrets', '--label', 'a=b', '--namespace', target, '--once'], {
      kubeconfig,
    });
    assert.equal(exit.code, 1, exit.stderr);
    assert.match(exit.stderr, /403 Forbidden/);
    assert.equal((await labelsOf(`/api/v1/namespaces/${target}/secrets/token`))['a'], undefined);
  });

  test("cluster-wide with leader election: the Lease Role is enough for the chart's full arguments", async () => {
    const target = await createNamespace('chart-target');
    const { namespace, manifests, kubeconfig, leaseName } = await installRbac('chart-le', {
      labels: LABELS,
      selector: OWN_SELECTOR,
      kinds: [{ resource: 'configmaps' }],
    });
    await createConfigMap(target, 'app-config', OWN);
    const [httpPort = 0] = await freePorts(1);
    const labeller = new Labeller(localArgs(manifests, { leaderElection: true, httpPort }), { kubeconfig });
    try {
      await eventually(
        () => labelled(`/api/v1/namespaces/${target}/configmaps/app-config`, { 'example.com/team': 'platform' }),
        'the config map to be labelled by the leader',
      );
      const lease = await eventually(async () => {
        const client = await adminClient();
        const found = await client.json<{ spec: { holderIdentity?: string } }>(
          'GET',
          `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${leaseName}`,
        );
        return found.spec.holderIdentity ? found : undefined;
      }, `Lease ${namespace}/${leaseName} to be held`);
      assert.ok(lease.spec.holderIdentity);
      await eventually(async () => (await fetch(`http://127.0.0.1:${httpPort}/readyz`)).ok, '/readyz to answer 200');
      assert.equal((await fetch(`http://127.0.0.1:${httpPort}/healthz`)).status, 200);
      assert.deepEqual(
        labeller.logs.filter((l) => /\b403\b|forbidden/i.test(`${l.msg} ${String(l['error'] ?? '')}`)),
        [],
      );
    } finally {
      const exit = await labeller.stop();
      assert.equal(exit.code, 0, exit.stderr);
    }
  });

  test('namespaced mode: a Role in the watched namespace is enough with --namespace; all namespaces are forbidden', async () => {
    const watched = await createNamespace('chart-watched');
    const other = await createNamespace('chart-other');
    const { manifests, kubeconfig } = await installRbac('chart-ns', {
      labels: LABELS,
      watchNamespaces: [watched],
      kinds: [{ resource: 'cm' }],
    });
    assert.deepEqual(manifests.filter((m) => m.kind.startsWith('Cluster')), [], 'no cluster-wide RBAC');
    assert.deepEqual(
      manifests.filter((m) => m.kind === 'Role' && m.metadata.namespace === watched).map((r) => rulesOf(r)),
      [[grant('', 'configmaps'), EVENTS_RULE]],
    );
    await createConfigMap(watched, 'app-config', OWN);
    await createConfigMap(other, 'app-config', OWN);

    const labeller = new Labeller(localArgs(manifests, { leaderElection: false }), { kubeconfig });
    try {
      await eventually(
        () => labelled(`/api/v1/namespaces/${watched}/configmaps/app-config`, { 'example.com/namespace': watched }),
        "the watched namespace's config map to be labelled",
      );
    } finally {
      const exit = await labeller.stop();
      assert.equal(exit.code, 0, exit.stderr);
    }
    assert.deepEqual(
      await labelsOf(`/api/v1/namespaces/${other}/configmaps/app-config`),
      OWN,
      'untouched in a namespace it does not watch',
    );

    const configmaps = { resource: 'configmaps' };
    await assertAccess(
      kubeconfig,
      [
        ...each(LABELLER_VERBS, { ...configmaps, namespace: watched }),
        ...each(EVENTS_VERBS, { group: 'events.k8s.io', resource: 'events', namespace: watched }),
      ],
      [
        ...each(['list', 'watch'], configmaps),
        ...each(LABELLER_VERBS, { ...configmaps, namespace: other }),
        ...each(['create', 'delete'], { ...configmaps, namespace: watched }),
      ],
    );
    // Without --namespace, labeller's cluster-wide list is refused.
    const exit = await runLabeller(['--kinds', 'configmaps', '--label', 'a=b', '--once'], { kubeconfig });
    assert.equal(exit.code, 1, exit.stderr);
    assert.match(exit.stderr, /403 Forbidden/);
  });

  test('a ConfigMap source: its one ConfigMap, read by name, is all the chart grants of it, and enough to label from it', async () => {
    const watched = await createNamespace('chart-src-watched');
    const platform = await createNamespace('chart-src-platform');
    await create(`/api/v1/namespaces/${platform}/configmaps`, {
      metadata: { name: 'teams' },
      data: { 'teams.yaml': 'app-config: { costCenter: cc-7 }\n' },
    });
    await createConfigMap(platform, 'other', OWN);
    const { manifests, kubeconfig } = await installRbac('chart-src', {
      labels: { 'example.com/cost-center': '{{teams[name].costCenter}}' },
      watchNamespaces: [watched],
      kinds: [{ resource: 'cm' }],
      sources: { teams: { configMap: { namespace: platform, name: 'teams', key: 'teams.yaml' } } },
    });
    await createConfigMap(watched, 'app-config', OWN);
    const labeller = new Labeller(localArgs(manifests, { leaderElection: false }), { kubeconfig });
    try {
      await eventually(
        () => labelled(`/api/v1/namespaces/${watched}/configmaps/app-config`, { 'example.com/cost-center': 'cc-7' }),
        'the config map labelled from the source',
      );
    } finally {
      const exit = await labeller.stop();
      assert.equal(exit.code, 0, exit.stderr);
    }
    const configmaps = { resource: 'configmaps', namespace: platform };
    await assertAccess(
      kubeconfig,
      each(['get', 'list', 'watch'], { ...configmaps, name: 'teams' }),
      [...each(['get', 'list', 'watch'], { ...configmaps, name: 'other' }), ...each(['list', 'patch'], configmaps)],
    );
  });

  test("every rendered object passes the API server's validation (server-side dry run, strict fields)", async () => {
    for (const file of VALUE_FILES) {
      const namespace = await createNamespace('chart-dry');
      const watched = await createNamespace('chart-dry-watched');
      const namespaced = file?.endsWith('namespaced.yaml');
      const manifests = await render({
        release: namespace,
        namespace,
        files: file ? [file] : [],
        ...(namespaced ? { values: { watchNamespaces: [watched] } } : {}),
      });
      // The ServiceMonitor needs the Prometheus Operator's CRD: check that it finds the Service instead.
      const monitors = manifests.filter((m) => m.kind === 'ServiceMonitor');
      for (const monitor of monitors) {
        const service = only(manifests, 'Service');
        const spec = monitor['spec'] as {
          selector: { matchLabels: Record<string, string> };
          endpoints: { port: string }[];
        };
        for (const [key, value] of Object.entries(spec.selector.matchLabels)) {
          assert.equal(service.metadata.labels?.[key], value);
        }
        assert.deepEqual(
          spec.endpoints.map((e) => e.port),
          (service['spec'] as { ports: { name: string }[] }).ports.map((p) => p.name),
        );
      }
      const run = await apply(manifests.filter((m) => m.kind !== 'ServiceMonitor'), [
        '--dry-run=server',
        '--validate=strict',
      ]);
      assert.match(run.stdout, /deployment\.apps\/\S+ created \(server dry run\)/, shortName(file));
    }
  });
});

describe('sidecar example', { skip }, () => {
  test('runs namespace-scoped with only a Role, configured by its LABELLER_* variables, within its memory limit', async (t) => {
    const namespace = await createNamespace('sidecar');
    const docs = loadAll(readFileSync(SIDECAR, 'utf8')) as Manifest[];
    assert.deepEqual(docs.map((d) => d.kind).sort(), ['Deployment', 'Role', 'RoleBinding', 'ServiceAccount']);
    assert.ok(
      docs.every((d) => d.metadata.namespace === undefined),
      'nothing names a namespace: kubectl apply -n chooses it',
    );
    await apply(docs.map((d) => ({ ...d, metadata: { ...d.metadata, namespace } })));
    await createConfigMap(namespace, 'shop-config', OWN);
    await create(`/api/v1/namespaces/${namespace}/services`, {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'shop' },
      spec: { selector: { 'app.kubernetes.io/name': 'shop' }, ports: [{ port: 80, targetPort: 8080 }] },
    });

    const deployment = only(docs, 'Deployment');
    const pod = podSpec(deployment);
    const sidecar = pod.containers.find((c) => c.name === 'labeller');
    assert.ok(sidecar);
    assert.equal(sidecar.args, undefined, 'no arguments');
    assert.equal(sidecar.command, undefined, "the image's entry point");
    // The container's environment as the kubelet would resolve it; fieldRef metadata.namespace is the pod's namespace.
    const env: Record<string, string> = {};
    const downward: Record<string, string> = {
      'metadata.namespace': namespace,
      'metadata.name': 'shop-0',
      'metadata.uid': '',
    };
    for (const variable of sidecar.env ?? []) {
      const field = variable.valueFrom?.fieldRef?.fieldPath;
      if (field !== undefined && field in downward) env[variable.name] = downward[field] ?? '';
      else if (variable.value !== undefined) env[variable.name] = variable.value;
      else assert.fail(`unexpected env source for ${variable.name}`);
    }
    assert.ok(
      Object.keys(env).every((name) =>
        name.startsWith('LABELLER_') || name === 'NODE_OPTIONS' || name.startsWith('POD_')
      ),
      Object.keys(env).join(', '),
    );
    // Hardened like the chart's container, and Kubernetes waits for labeller's own grace period.
    assert.deepEqual(sidecar['securityContext'].capabilities, { drop: ['ALL'] });
    assert.equal(sidecar['securityContext'].readOnlyRootFilesystem, true);
    assert.equal(sidecar['securityContext'].allowPrivilegeEscalation, false);
    // The ServiceAccount token reaches labeller's container only, read-only where in-cluster config reads it; nothing writable (Node runs the TypeScript sources itself).
    assert.equal(pod.automountServiceAccountToken, false, 'no token for every container');
    const tokenVolumes = new Set(
      pod.volumes.filter((v) => v.projected?.sources.some((s) => s.serviceAccountToken)).map((v) => v.name),
    );
    for (const container of pod.containers.filter((c) => c.name !== 'labeller')) {
      assert.deepEqual(
        (container['volumeMounts'] ?? []).filter((m: VolumeMount) =>
          tokenVolumes.has(m.name) || m.mountPath.startsWith('/var/run/secrets')
        ),
        [],
        `${container.name} has no token mount`,
      );
    }
    assert.deepEqual(sidecar['volumeMounts'], [{
      name: 'labeller-serviceaccount',
      mountPath: '/var/run/secrets/kubernetes.io/serviceaccount',
      readOnly: true,
    }]);
    assert.deepEqual(pod.volumes.find((v) => v.name === 'labeller-serviceaccount')?.projected?.sources, [
      { serviceAccountToken: { path: 'token', expirationSeconds: 3600 } },
      { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
      { downwardAPI: { items: [{ path: 'namespace', fieldRef: { fieldPath: 'metadata.namespace' } }] } },
    ]);
    assert.ok(
      pod.terminationGracePeriodSeconds * 1000 > (parseDuration(env['LABELLER_GRACE_PERIOD'] ?? '30s') ?? Infinity),
    );
    assert.equal(pod.enableServiceLinks, false);
    // A free port instead of the pod's (ports here are shared with other tests); the variables of the test process itself are blanked.
    const [httpPort = 0] = await freePorts(1);
    env['LABELLER_HTTP_PORT'] = String(httpPort);
    for (const name of Object.keys(process.env)) if (name.startsWith('LABELLER_') && !(name in env)) env[name] = '';

    const kubeconfig = await serviceAccountKubeconfig(namespace, pod.serviceAccountName);
    const labeller = new Labeller([], { kubeconfig, env });
    try {
      const expected = { 'app.kubernetes.io/part-of': 'shop', 'example.com/namespace': namespace };
      for (
        const path of [
          `/apis/apps/v1/namespaces/${namespace}/deployments/shop`,
          `/api/v1/namespaces/${namespace}/services/shop`,
          `/api/v1/namespaces/${namespace}/configmaps/shop-config`,
        ]
      ) {
        await eventually(() => labelled(path, expected), `${path} to be labelled`);
      }
      assert.deepEqual(
        labeller.logs.filter((l) => /\b403\b|forbidden/i.test(`${l.msg} ${String(l['error'] ?? '')}`)),
        [],
      );
      assert.equal((await fetch(`http://127.0.0.1:${httpPort}/healthz`)).status, 200, "the liveness probe's endpoint");
      // The Role's two lease rules are enough to lead.
      const client = await adminClient();
      const lease = await client.json<{ spec: { holderIdentity?: string } }>(
        'GET',
        `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${env['LABELLER_LEADER_ELECTION_ID']}`,
      );
      assert.ok(lease.spec.holderIdentity, 'the sidecar holds its Lease');
      // Within the container's memory limit (the Node.js process; the kernel counts a little more).
      const limit = /^(\d+)Mi$/.exec(String(sidecar['resources'].limits.memory));
      const peak = procSample(labeller.pid)?.peakRss;
      assert.ok(limit);
      if (peak !== undefined) t.diagnostic(`peak RSS ${(peak / 2 ** 20).toFixed(0)} MiB, limit ${limit[1]} MiB`);
      if (peak !== undefined) {
        assert.ok(
          peak < Number(limit[1]) * 2 ** 20,
          `peak RSS ${(peak / 2 ** 20).toFixed(0)} MiB over the limit ${limit[1]} MiB`,
        );
      }
    } finally {
      const exit = await labeller.stop();
      assert.equal(exit.code, 0, exit.stderr);
    }
  });
});
