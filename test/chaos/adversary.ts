// The chaos harness's adversary (issue 46): a tenant, a ServiceAccount that may edit ConfigMaps in
// its namespace and nothing else, against one labeller that keeps the config's admission
// policies, with protection (`protect: deny` on the team key) or without, as the seed draws. The
// tenant's operations, drawn from the seed beside an operator's:
//   flip       labeller's team key set to a value of the tenant's (`tenant-<n>`);
//   drop-key   labeller's team key removed;
//   forge      labeller's marker written, listing the team key, the static one and the tenant's own
//              key (set at create, `tenant.example.com/own`), which labeller never set;
//   create     a ConfigMap carrying the team key at a tenant's value, or 130-250 KiB of annotations
//              of its own, or both;
//   team       (the operator) the namespace's team label changed;
//   reload     (the operator) the config drops or adds the static key.
// Invariants, sampled every 500 ms and at the end, written from the documented behaviour:
//   protected       with protection, no object ever carries a tenant's value of the team key, and
//                   every flip, drop-key and forge is refused;
//   bounded         without protection, a tenant's value lasts at most BOUND_MS on an object;
//   never refused   every create is answered 201 (labeller's mutating policies never make one
//                   invalid), and with protection carries labeller's team value, not the tenant's;
//   never stripped  the tenant's own key, which labeller never set, never goes (a forged marker
//                   listing it makes labeller remove nothing);
//   no leftovers    once converged, no object carries the static key when the config drops it,
//                   and every object carries the team and static keys the config wants.
import { writeFileSync } from 'node:fs';
import { Cluster } from '../cluster/cluster.ts';
import type { ControlPlane } from '../controlplane/controlplane.ts';
import { eventually } from '../process/eventually.ts';
import { Labeller } from '../process/labeller.ts';
import { sleep } from '../process/sleep.ts';
import { ApiError } from '../../src/apimachinery/errors.ts';
import { POLICY_RULE, removePolicies } from './admission.ts';
import { DOMAIN } from './oracle.ts';
import { Random } from './random.ts';

const TEAM = `${DOMAIN}/team`;
const STATIC = `${DOMAIN}/static`;
const OWN = 'tenant.example.com/own';
/** labeller's marker of labels under its default field manager (docs/operations.md, The marker). */
const MARKER = 'labeller.io/admitted-labels.labeller';
/** How long a tenant's value may last on an object without protection: labeller's retakes, one every 3 s at most, and a margin for a busy machine. */
const BOUND_MS = 12_000;
const CONVERGE_MS = 60_000;
const TEAMS = ['red', 'blue', 'green'] as const;

export type AdversaryOp =
  | { readonly op: 'flip'; readonly name: string; readonly value: string }
  | { readonly op: 'drop-key'; readonly name: string }
  | { readonly op: 'forge'; readonly name: string }
  | { readonly op: 'create'; readonly name: string; readonly team: boolean; readonly annotationBytes: number }
  | { readonly op: 'team'; readonly team: string }
  | { readonly op: 'reload'; readonly static: boolean }
  | { readonly op: 'pause'; readonly ms: number };

export interface AdversaryViolation {
  readonly invariant: 'protected' | 'bounded' | 'never refused' | 'never stripped' | 'no leftovers' | 'health';
  readonly detail: string;
}

export interface AdversaryResult {
  readonly seed: number;
  readonly protect: boolean;
  readonly operations: readonly AdversaryOp[];
  readonly violations: readonly AdversaryViolation[];
  /** The tenant's operations, and how many the API server refused. */
  readonly tenant: { readonly ops: number; readonly refused: number };
  /** The longest a tenant's value lasted on an object, in ms, as sampled (0: never seen). */
  readonly longestMs: number;
  /** How long labeller took to put its value back after each change that went through, in ms, sorted. */
  readonly restoredMs: readonly number[];
  readonly creates: number;
}

/** Whether a seed's run protects the team key: every other seed. */
export function protectOf(seed: number): boolean {
  return seed % 2 === 1;
}

export function generateAdversary(seed: number, count: number): AdversaryOp[] {
  const random = new Random(seed ^ 0xadd);
  const names = ['cm-0', 'cm-1', 'cm-2'];
  let serial = 3;
  let flips = 0;
  const operations: AdversaryOp[] = [];
  for (let i = 0; i < count; i++) {
    const kind = random.weighted({ flip: 4, 'drop-key': 1.5, forge: 1.5, create: 2.5, team: 1, reload: 1 });
    switch (kind) {
      case 'flip':
        operations.push({ op: 'flip', name: random.pick(names), value: `tenant-${flips++}` });
        break;
      case 'drop-key':
      case 'forge':
        operations.push({ op: kind, name: random.pick(names) });
        break;
      case 'create': {
        const name = `cm-${serial++}`;
        names.push(name);
        const big = random.chance(0.5);
        operations.push({
          op: 'create',
          name,
          team: !big || random.chance(0.5),
          annotationBytes: big ? random.int(130, 250) * 1024 : 0,
        });
        break;
      }
      case 'team':
        operations.push({ op: 'team', team: random.pick(TEAMS) });
        break;
      case 'reload':
        operations.push({ op: 'reload', static: random.chance(0.5) });
        break;
    }
    operations.push({ op: 'pause', ms: random.int(200, 1500) });
  }
  return operations;
}

/**
 * An annotation of the config's own, 6 000 bytes: with the marker repeating it, a create carrying
 * 250 KiB of the tenant's annotations passes the API server's 256 KiB, unless the policy bounds
 * what it sets.
 */
const TERMS = 't'.repeat(6000);

const configYaml = (ns: string, withStatic: boolean, protect: boolean) => `
labels:
  ${TEAM}: "{{namespace.labels.team}}"
${withStatic ? `  ${STATIC}: "on"\n` : ''}annotations:
  ${DOMAIN}/terms: ${TERMS}
${protect ? `protect: {mode: deny, keys: [${TEAM}]}\n` : ''}kinds:
  - resource: configmaps
    namespaces: [${ns}]
`;

/** labeller's rights: its ConfigMaps and namespace, Leases, Events, and its policies, mutating and validating. */
const LABELLER_RULES = [
  { apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch', 'patch'] },
  { apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list', 'watch'] },
  { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['*'] },
  { apiGroups: ['', 'events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
  POLICY_RULE,
  { ...POLICY_RULE, resources: ['validatingadmissionpolicies', 'validatingadmissionpolicybindings'] },
];

export async function runAdversary(
  cp: ControlPlane,
  seed: number,
  operations: readonly AdversaryOp[],
  protect: boolean,
  log: (line: string) => void,
): Promise<AdversaryResult> {
  const cluster = await Cluster.connect(cp.kubeconfig);
  const violations: AdversaryViolation[] = [];
  // A run before may have left its policies (it stopped part-way): each run starts without them.
  await removePolicies(cluster).catch(() => {});
  const ns = await cluster.namespace(`adversary-${seed}`);
  const opsNs = await cluster.namespace(`adversary-${seed}-ops`);
  let team: string = TEAMS[0];
  let withStatic = true;
  await cluster.patchLabels(`/api/v1/namespaces/${ns}`, { team }, 'operator');
  // The tenant: a ServiceAccount whose Role gives it ConfigMaps in its namespace, and nothing else.
  await cluster.post(`/api/v1/namespaces/${ns}/serviceaccounts`, { metadata: { name: 'tenant' } });
  await cluster.post(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles`, {
    metadata: { name: 'tenant' },
    rules: [{
      apiGroups: [''],
      resources: ['configmaps'],
      verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'],
    }],
  });
  await cluster.post(`/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
    metadata: { name: 'tenant' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'tenant' },
    subjects: [{ kind: 'ServiceAccount', name: 'tenant', namespace: ns }],
  });
  const tenant = await Cluster.connect(await cluster.serviceAccountKubeconfig(ns, 'tenant'));
  const configPath = cluster.writeFile(`adversary-${seed}.yaml`, '');
  const writeConfig = () => writeFileSync(configPath, configYaml(ns, withStatic, protect));
  writeConfig();
  const account = await cluster.serviceAccount(opsNs, 'labeller', LABELLER_RULES);
  const labeller = new Labeller(['--config', configPath, '--admission-policies', '--requeue-after', '10s'], {
    kubeconfig: account.kubeconfig,
  });
  const path = (name: string) => `/api/v1/namespaces/${ns}/configmaps/${name}`;
  const made = new Set<string>();
  let creates = 0;
  const tenantOps = { ops: 0, refused: 0 };
  /** Answers whether the tenant's request went through; a refusal by a policy is counted, anything else thrown. */
  const asTenant = async (what: string, request: () => Promise<unknown>): Promise<boolean> => {
    tenantOps.ops++;
    try {
      await request();
      if (protect && what !== 'create') {
        violations.push({ invariant: 'protected', detail: `the tenant's ${what} went through under deny` });
      }
      return true;
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 403 || !/AdmissionPolicy/.test(error.message)) throw error;
      tenantOps.refused++;
      if (!protect || what === 'create') {
        violations.push({ invariant: 'never refused', detail: `${what}: ${error.message}` });
      }
      return false;
    }
  };
  const createAsTenant = async (name: string, withTeam: boolean, annotationBytes: number) => {
    const labels: Record<string, string> = { [OWN]: 'mine', ...(withTeam ? { [TEAM]: `tenant-create-${name}` } : {}) };
    const annotations = annotationBytes > 0 ? { 'tenant.example.com/blob': 'b'.repeat(annotationBytes) } : {};
    let answer: { metadata: { labels?: Record<string, string> } } | undefined;
    const through = await asTenant('create', async () => {
      answer = await tenant.post(`/api/v1/namespaces/${ns}/configmaps`, {
        metadata: { name, labels, annotations },
        data: { a: '1' },
      });
    });
    if (!through) return;
    creates++;
    made.add(name);
    const carried = answer?.metadata.labels?.[TEAM];
    if (protect && carried?.startsWith('tenant-')) {
      violations.push({ invariant: 'protected', detail: `${name} was created carrying ${TEAM}=${carried} under deny` });
    }
  };

  /** How long labeller took to put its team value back after each change that went through, in ms. */
  const restoredMs: number[] = [];
  /** Resolves with how long after `since` object `name` carried labeller's team again (BOUND_MS and a violation if it never did). */
  const restored = async (name: string, since: number): Promise<number> => {
    while (Date.now() - since < BOUND_MS) {
      const labels = await cluster.labelsOf(path(name)).catch(() => undefined);
      if (labels?.[TEAM] === team) return Date.now() - since;
      await sleep(50);
    }
    violations.push({
      invariant: 'bounded',
      detail: `${name} did not carry ${TEAM}=${team} again within ${BOUND_MS} ms`,
    });
    return BOUND_MS;
  };

  // Samples every 500 ms: a tenant's value of the team key (how long each lasts), and the tenant's own key.
  const seenSince = new Map<string, number>();
  let longestMs = 0;
  let sampling = true;
  /** Set once a tenant's change is seen refused: before, the harness's own probe of it may go through, and is undone. */
  let enforced = false;
  const sampler = (async () => {
    while (sampling) {
      try {
        const list = await cluster.get<{ items: { metadata: { name: string; labels?: Record<string, string> } }[] }>(
          `/api/v1/namespaces/${ns}/configmaps`,
        );
        const now = Date.now();
        const present = new Set<string>();
        for (const { metadata } of list.items) {
          const value = metadata.labels?.[TEAM];
          if (made.has(metadata.name) && metadata.labels?.[OWN] !== 'mine') {
            violations.push({
              invariant: 'never stripped',
              detail: `${metadata.name} lost ${OWN}, which labeller never set`,
            });
            made.delete(metadata.name);
          }
          if (!value?.startsWith('tenant-')) continue;
          const id = `${metadata.name}=${value}`;
          present.add(id);
          if (protect && enforced) {
            violations.push({ invariant: 'protected', detail: `${metadata.name} carried ${TEAM}=${value} under deny` });
          }
          const since = seenSince.get(id) ?? now;
          seenSince.set(id, since);
          longestMs = Math.max(longestMs, now - since);
        }
        for (const [id, since] of seenSince) {
          if (present.has(id)) continue;
          seenSince.delete(id);
          if (!protect && Date.now() - since > BOUND_MS) {
            violations.push({ invariant: 'bounded', detail: `${id} lasted ${Date.now() - since} ms` });
          }
        }
      } catch {
        // The next sample catches up.
      }
      await sleep(500);
    }
  })();

  try {
    for (const name of ['cm-0', 'cm-1', 'cm-2']) {
      await cluster.post(`/api/v1/namespaces/${ns}/configmaps`, { metadata: { name, labels: { [OWN]: 'mine' } } });
      made.add(name);
    }
    await labeller.waitForLog(
      (l) => l.msg === 'admission policy applied' && /Binding$/.test(String(l['kind'])),
      60_000,
    );
    if (protect) {
      await labeller.waitForLog(
        (l) => l.msg === 'admission policy applied' && l['kind'] === 'ValidatingAdmissionPolicyBinding',
        60_000,
      );
    }
    // The policies in force: a create by the operator carries the static key.
    let probes = 0;
    await eventually(
      async () => {
        const probe = await cluster.post<{ metadata: { labels?: Record<string, string> } }>(
          `/api/v1/namespaces/${ns}/configmaps`,
          { metadata: { name: `probe-${probes++}`, labels: { [OWN]: 'mine' } } },
        );
        made.add(`probe-${probes - 1}`);
        return probe.metadata.labels?.[STATIC] === 'on';
      },
      'the policies in force',
      60_000,
    );
    // Protection in force too: a flip by the tenant is refused.
    if (protect) {
      await eventually(
        async () => {
          try {
            await tenant.patchLabels(path('cm-0'), { [TEAM]: 'tenant-probe' }, 'kubectl-label');
            await cluster.patchLabels(path('cm-0'), { [TEAM]: team }, 'operator');
            return false;
          } catch (error) {
            return error instanceof ApiError && error.status === 403;
          }
        },
        'the protection in force',
        60_000,
      );
      enforced = true;
    }
    for (const operation of operations) {
      switch (operation.op) {
        case 'flip':
        case 'drop-key': {
          const value = operation.op === 'flip' ? operation.value : null;
          const at = Date.now();
          const through = await asTenant(
            operation.op,
            () => tenant.patchLabels(path(operation.name), { [TEAM]: value }, 'kubectl-label'),
          );
          // Without protection: how long until labeller's value is back.
          if (through) restoredMs.push(await restored(operation.name, at));
          break;
        }
        case 'forge':
          await asTenant('forge', () =>
            tenant.client.json('PATCH', path(operation.name), {
              query: { fieldManager: 'kubectl-annotate' },
              headers: { 'content-type': 'application/merge-patch+json' },
              body: JSON.stringify({
                metadata: { annotations: { [MARKER]: `${TEAM}=${team},${STATIC}=on,${OWN}=mine` } },
              }),
            }));
          break;
        case 'create':
          await createAsTenant(operation.name, operation.team, operation.annotationBytes);
          break;
        case 'team':
          team = operation.team;
          await cluster.patchLabels(`/api/v1/namespaces/${ns}`, { team }, 'operator');
          break;
        case 'reload':
          withStatic = operation.static;
          writeConfig();
          break;
        case 'pause':
          await sleep(operation.ms);
          break;
      }
    }

    // Converged: every object carries the team the config wants (the tenant's values gone), the
    // static key exactly when the config sets it.
    const converged = await eventually(
      async () => {
        const list = await cluster.get<{ items: { metadata: { name: string; labels?: Record<string, string> } }[] }>(
          `/api/v1/namespaces/${ns}/configmaps`,
        );
        const wrong = list.items.filter(({ metadata: { labels = {} } }) =>
          labels[TEAM] !== team || (labels[STATIC] === 'on') !== withStatic
        );
        return wrong.length === 0 || wrong.map((o) => `${o.metadata.name} ${JSON.stringify(o.metadata.labels)}`);
      },
      'converged',
      CONVERGE_MS,
    ).catch(() => undefined);
    if (converged !== true) {
      const list = await cluster.get<{ items: { metadata: { name: string; labels?: Record<string, string> } }[] }>(
        `/api/v1/namespaces/${ns}/configmaps`,
      );
      for (const { metadata } of list.items) {
        const labels = metadata.labels ?? {};
        if (labels[TEAM] !== team || (labels[STATIC] === 'on') !== withStatic) {
          violations.push({
            invariant: 'no leftovers',
            detail: `${metadata.name} carries ${JSON.stringify(labels)}; the config wants ${TEAM}=${team}${
              withStatic ? `, ${STATIC}=on` : ` and no ${STATIC}`
            }`,
          });
        }
      }
    }
  } finally {
    sampling = false;
    await sampler;
    const exit = await labeller.stop('SIGTERM', 30_000);
    if (exit.code !== 0) {
      violations.push({ invariant: 'health', detail: `labeller exited ${exit.code}: ${labeller.stderr.slice(-1500)}` });
    }
    await tenant.close();
    await cluster.close();
  }
  log(
    `seed ${seed} (adversary${
      protect ? ', protect deny' : ''
    }): ${tenantOps.ops} tenant operations, ${tenantOps.refused} refused, ${creates} creates; ${
      restoredMs.length > 0
        ? `labeller's value back ${restoredMs.length} times, within ${Math.max(...restoredMs)} ms (median ${
          [...restoredMs].sort((a, b) => a - b)[restoredMs.length >> 1]
        } ms)`
        : 'no change of the team key went through'
    }; a tenant's value seen for ${(longestMs / 1000).toFixed(1)} s at most; ${violations.length} violations`,
  );
  restoredMs.sort((a, b) => a - b);
  return { seed, protect, operations, violations, tenant: tenantOps, longestMs, restoredMs, creates };
}
