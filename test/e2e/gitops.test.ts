// labeller next to a GitOps tool (issue 33): Argo CD (ServerSideApply=true) and Flux's
// kustomize-controller, each simulated against the real API server as its sources do it (field
// manager, force, when it applies and what: see argoCd and flux below), syncing a Namespace and a
// Deployment as Git holds them, commit after commit, with a real labeller running. For each tool:
// - syncs whose manifests do not carry labeller's keys leave them, owned by labeller, and labeller
//   writes nothing (the tool's diff finds nothing either);
// - a key Git carried with labeller's value, then dropped, stays labeller's (argo-cd#15880);
// - a key Git carries with another value is a fight under `conflicts: force` (LabelFight Events,
//   labeller_fights_total, FIGHT_RETAKES writes then none, `explain` says fight), and the tool's
//   under `conflicts: skip` (counted, a LabelConflict Event, `status` and `explain` say so, no write);
// - the same key with the tool told to leave labeller's keys alone (docs/gitops.md's settings): no fight.
// docs/gitops.md quotes what these tests print.
import assert from 'node:assert/strict';
import { isDeepStrictEqual } from 'node:util';
import { dump } from 'js-yaml';
import { describe, test } from 'node:test';
import type { ExplainReport } from '../../src/commands/explain.ts';
import type { StatusReport } from '../../src/commands/status.ts';
import { isNotFound } from '../../src/apimachinery/errors.ts';
import type { FieldsV1, ManagedFieldsEntry } from '../../src/apimachinery/objects.ts';
import { FIGHT_RETAKES } from '../../src/labelling/fights.ts';
import { keyOwners } from '../../src/labelling/object.ts';
import { byLabeller } from '../cluster/audit.ts';
import { freePorts } from '../controlplane/controlplane.ts';
import { assertCleanExit } from '../process/crash.ts';
import { figure } from '../process/figures.ts';
import { Labeller } from '../process/labeller.ts';
import { sleep } from '../process/sleep.ts';
import {
  adminClient,
  type AuditEvent,
  auditSkip,
  auditTail,
  configFile,
  createNamespace,
  eventually,
  patchLabels,
} from './cluster.ts';

const TEAM = 'example.com/team';
const COST_CENTER = 'example.com/cost-center';
/** What selects the test's Namespace for labeller (and no other test's). */
const APP = 'example.com/gitops-e2e';
/** The Argo CD Application's and the Flux Kustomization's name. */
const APPLICATION = 'shop';
/** The pace of the sync loops: Argo CD's self-heal waits 5 s, Flux's interval is minutes; sped up. */
const TICK_MS = 300;

interface Metadata {
  readonly name: string;
  readonly namespace?: string;
  readonly uid?: string;
  readonly resourceVersion?: string;
  readonly labels?: Readonly<Record<string, string>>;
  readonly annotations?: Readonly<Record<string, string>>;
  readonly managedFields?: readonly ManagedFieldsEntry[];
}

/** An object as Git holds it, or as the API server answers it. */
interface KubeObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: Metadata;
  readonly [field: string]: unknown;
}

const pathOf = ({ kind, metadata }: KubeObject): string =>
  kind === 'Namespace'
    ? `/api/v1/namespaces/${metadata.name}`
    : `/apis/apps/v1/namespaces/${metadata.namespace}/deployments/${metadata.name}`;

/** The test's Git repository: a Namespace and a Deployment; each commit changes the image and may add labels. */
class Git {
  readonly ns: string;
  revision = 1;

  constructor(ns: string) {
    this.ns = ns;
  }

  commit(): void {
    this.revision++;
  }

  manifests(labels: Readonly<Record<string, string>> = {}): KubeObject[] {
    return [
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: this.ns, labels: { [APP]: this.ns, ...labels } } },
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'web', namespace: this.ns, labels: { app: 'web', ...labels } },
        spec: {
          replicas: 1,
          selector: { matchLabels: { app: 'web' } },
          template: {
            metadata: { labels: { app: 'web' } },
            spec: { containers: [{ name: 'web', image: `registry.example.com/web:1.${this.revision}` }] },
          },
        },
      },
    ];
  }
}

async function get(path: string): Promise<KubeObject | undefined> {
  try {
    return await (await adminClient()).json<KubeObject>('GET', path);
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
  }
}

/** A server-side apply of `object` as `manager` with force (`--force-conflicts`), as both tools send it. */
async function apply(object: KubeObject, manager: string, dryRun = false): Promise<KubeObject> {
  return (await adminClient()).json<KubeObject>('PATCH', pathOf(object), {
    query: { fieldManager: manager, force: true, ...(dryRun ? { dryRun: 'All' } : {}) },
    headers: { 'content-type': 'application/apply-patch+yaml' },
    body: JSON.stringify(object),
  });
}

/**
 * Whether the dry run's answer differs from the live object: labels, annotations, or anything
 * outside metadata and status (fluxcd/pkg ssa's hasDrifted; Argo CD's server-side diff compares
 * the dry run's answer with the live object in the same spirit).
 */
function drifted(live: KubeObject | undefined, predicted: KubeObject): boolean {
  if (!live) return true;
  const rest = ({ metadata: _, status: __, ...others }: KubeObject) => others;
  return !isDeepStrictEqual(live.metadata.labels ?? {}, predicted.metadata.labels ?? {}) ||
    !isDeepStrictEqual(live.metadata.annotations ?? {}, predicted.metadata.annotations ?? {}) ||
    !isDeepStrictEqual(rest(live), rest(predicted));
}

const withMetadata = (object: KubeObject, extra: Partial<Pick<Metadata, 'labels' | 'annotations'>>): KubeObject => ({
  ...object,
  metadata: {
    ...object.metadata,
    labels: { ...object.metadata.labels, ...extra.labels },
    annotations: { ...object.metadata.annotations, ...extra.annotations },
  },
});

/** labeller's keys the tool is told to leave to labeller's field manager, as docs/gitops.md configures it. */
interface Leave {
  /** labeller's field manager: Argo CD's `ignoreDifferences[].managedFieldsManagers`. */
  readonly manager: string;
  /** labeller's label keys: Flux's `spec.ignore[].paths`. */
  readonly keys: readonly string[];
}

/** A GitOps tool's sync loop, one round at a time. */
interface GitOpsTool {
  readonly name: string;
  /** Its field manager. */
  readonly manager: string;
  /** What tells it to leave labeller's keys alone (`leave`), as docs/gitops.md shows it. */
  readonly leaving: string;
  /** One round of its loop over Git's `manifests`: compares, and applies what it would; answers the kinds it applied. */
  sync(manifests: readonly KubeObject[], leave?: Leave): Promise<string[]>;
}

/** The label keys of `object` that `manager` owns, by any operation (Argo CD's trustedManager matches the name). */
const labelsOwnedBy = (object: KubeObject, manager: string): string[] =>
  [...keyOwners(object.metadata.managedFields, 'labels')]
    .filter(([, owners]) => owners.some((o) => o.manager === manager)).map(([key]) => key);

const withLabels = (object: KubeObject, labels: Readonly<Record<string, string>>): KubeObject => ({
  ...object,
  metadata: { ...object.metadata, labels },
});

/**
 * Argo CD with the sync option ServerSideApply=true (and ServerSideDiff=true), as argoproj/argo-cd
 * and argoproj/gitops-engine do it:
 * - field manager `argocd-controller` (argo-cd common/common.go: ArgoCDSSAManager), force on
 *   every apply (gitops-engine pkg/utils/kube/resource_ops.go, newApplyOptions:
 *   `if serverSideApply || serverSideDiff { o.ForceConflicts = true }`; docs/user-guide/
 *   sync-options.md: "kubectl apply --server-side --force-conflicts");
 * - the server-side diff is that apply as a dry run (docs/user-guide/diff-strategies.md); an
 *   automated sync (self-heal) runs when a resource differs and applies every resource of the
 *   Application (sync-options.md: without ApplyOutOfSyncOnly, "apply every object");
 * - each resource carries the tracking annotation (resource_tracking.md: annotation tracking,
 *   the default since 3.0).
 * Its client-side apply migration only moves `kubectl-client-side-apply` Update entries: none here.
 * With `leave`: `ignoreDifferences: [{managedFieldsManagers: [labeller]}]` and the sync option
 * RespectIgnoreDifferences=true. The fields of Git a trusted manager owns are left out of the diff
 * (util/argo/managedfields Normalize) and, at sync, take their live values
 * (controller/sync.go normalizeTargetResources): modelled here for labels.
 */
const argoCd: GitOpsTool = {
  name: 'Argo CD',
  manager: 'argocd-controller',
  leaving: 'ignoreDifferences managedFieldsManagers: [labeller], RespectIgnoreDifferences=true',
  async sync(manifests, leave) {
    const targets: KubeObject[] = [];
    for (const m of manifests) {
      const group = m.apiVersion.includes('/') ? m.apiVersion.split('/')[0] : '';
      const id = `${APPLICATION}:${group}/${m.kind}:${m.metadata.namespace ?? ''}/${m.metadata.name}`;
      let target = withMetadata(m, { annotations: { 'argocd.argoproj.io/tracking-id': id } });
      const live = leave && await get(pathOf(target));
      if (leave && live) {
        const labels = { ...target.metadata.labels };
        for (const key of labelsOwnedBy(live, leave.manager)) {
          const value = live.metadata.labels?.[key];
          if (key in labels && value !== undefined) labels[key] = value;
        }
        target = withLabels(target, labels);
      }
      targets.push(target);
    }
    const diffs: boolean[] = [];
    for (const target of targets) {
      diffs.push(drifted(await get(pathOf(target)), await apply(target, this.manager, true)));
    }
    if (!diffs.includes(true)) return [];
    // Sync waves: the Namespace before what lives in it.
    for (const target of targets) await apply(target, this.manager);
    return targets.map((t) => t.kind);
  },
};

/** The managedFields entries kustomize-controller takes over (kustomization_controller.go, apply(); no --override-manager). */
const FLUX_TAKES_OVER: readonly { readonly prefix: string; readonly operation: string }[] = [
  { prefix: 'kubectl', operation: 'Apply' },
  { prefix: 'kubectl', operation: 'Update' },
  { prefix: 'before-first-apply', operation: 'Update' },
  { prefix: 'kustomize-controller', operation: 'Update' },
];

/** The union of two field sets. */
function mergeFields(a: FieldsV1 = {}, b: FieldsV1 = {}): FieldsV1 {
  const merged: Record<string, FieldsV1> = { ...a };
  for (const [key, value] of Object.entries(b)) merged[key] = mergeFields(merged[key], value);
  return merged;
}

/**
 * kustomize-controller's managedFields clean-up before it applies (ssa cleanupMetadata,
 * PatchReplaceFieldsManagers): the entries of the managers it takes over (FLUX_TAKES_OVER, by
 * prefix and operation) merge into its own Apply entry, by a JSON patch. Answers whether it patched.
 */
async function fluxCleanup(live: KubeObject, manager: string): Promise<boolean> {
  const entries = live.metadata.managedFields ?? [];
  const existing = entries.find((e) => e.manager === manager && e.operation === 'Apply' && !e.subresource);
  let own = existing;
  const kept: ManagedFieldsEntry[] = [];
  for (const entry of entries) {
    if (entry === existing) continue;
    const takenOver = !entry.subresource &&
      FLUX_TAKES_OVER.some((m) => entry.operation === m.operation && (entry.manager ?? '').startsWith(m.prefix));
    if (!takenOver) kept.push(entry);
    else {
      own = own
        ? { ...own, fieldsV1: mergeFields(own.fieldsV1, entry.fieldsV1) }
        : { ...entry, manager, operation: 'Apply' };
    }
  }
  if (own === existing || !own) return false;
  await (await adminClient()).json('PATCH', pathOf(live), {
    query: { fieldManager: manager },
    headers: { 'content-type': 'application/json-patch+json' },
    body: JSON.stringify([{ op: 'replace', path: '/metadata/managedFields', value: [...kept, own] }]),
  });
  return true;
}

/**
 * Flux's kustomize-controller, as fluxcd/pkg ssa's ResourceManager.ApplyAllStaged does it
 * (Namespaces first), per object:
 * - a dry-run apply with force as `kustomize-controller` (ssa/manager_apply.go, dryRunApply:
 *   client.ForceOwnership; the apply too);
 * - the managedFields cleanup (cleanupMetadata, PatchReplaceFieldsManagers): entries of the
 *   managers it takes over (prefix and operation: FLUX_TAKES_OVER) become its own Apply entry,
 *   by a JSON patch of metadata.managedFields;
 * - an apply only if it cleaned something or the object drifted (hasDrifted).
 * Objects get its owner labels kustomize.toolkit.fluxcd.io/name and /namespace (SetOwnerLabels).
 * `spec.force` only recreates objects whose immutable fields changed: no part of this.
 * With `leave`: `spec.ignore` with the paths of labeller's label keys (kustomize-controller 1.9).
 */
const flux: GitOpsTool = {
  name: 'Flux',
  manager: 'kustomize-controller',
  leaving: `spec.ignore paths /metadata/labels/<key> (kustomize-controller 1.9)`,
  async sync(manifests, leave) {
    const applied: string[] = [];
    const staged = [...manifests].sort((a, b) => Number(b.kind === 'Namespace') - Number(a.kind === 'Namespace'));
    for (const manifest of staged) {
      let object = withMetadata(manifest, {
        labels: {
          'kustomize.toolkit.fluxcd.io/name': APPLICATION,
          'kustomize.toolkit.fluxcd.io/namespace': 'flux-system',
        },
      });
      const live = await get(pathOf(object));
      const predicted = await apply(object, this.manager, true);
      const cleaned = live ? await fluxCleanup(live, this.manager) : false;
      // spec.ignore (ssa/manager_apply.go: hasDriftedWithIgnore, computeDriftedPaths, applyDriftResult):
      // ignored paths are left out of the drift check; one that drifted is stripped from the apply when
      // another Apply manager owns it, else set to its live value.
      const ignored = live ? (leave?.keys ?? []) : [];
      const without = (o: KubeObject) =>
        withLabels(
          o,
          Object.fromEntries(Object.entries(o.metadata.labels ?? {}).filter(([k]) => !ignored.includes(k))),
        );
      if (!cleaned && !drifted(live && without(live), without(predicted))) continue;
      if (live && ignored.length > 0) {
        const labels: Record<string, string> = { ...object.metadata.labels };
        const others = keyOwners(live.metadata.managedFields, 'labels');
        for (const key of ignored) {
          const value = live.metadata.labels?.[key];
          if (value === predicted.metadata.labels?.[key]) continue;
          const strip = (others.get(key) ?? []).some((o) => o.operation === 'Apply' && o.manager !== this.manager);
          if (strip || value === undefined) delete labels[key];
          else labels[key] = value;
        }
        object = withLabels(object, labels);
      }
      await apply(object, this.manager);
      applied.push(object.kind);
    }
    return applied;
  },
};

/** The sum of the samples of `name` matching `labels` in Prometheus text. */
function total(metrics: string, name: string, labels: Readonly<Record<string, string>> = {}): number {
  return metrics.split('\n')
    .filter((l) =>
      (l.startsWith(`${name}{`) || l.startsWith(`${name} `)) &&
      Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`))
    )
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

/** Who owns label `key` of the object at `path`: `manager (operation)` from its managedFields. */
async function ownersOf(path: string, key: string): Promise<string[]> {
  const object = await get(path);
  return (keyOwners(object?.metadata.managedFields, 'labels').get(key) ?? []).map((o) =>
    `${o.manager} (${o.operation})`
  ).sort();
}

/** The managedFields of the object at `path`, trimmed to labels (each entry's label keys): what docs/gitops.md shows. */
async function labelOwnership(path: string): Promise<string> {
  const object = await get(path);
  const entries = (object?.metadata.managedFields ?? []).flatMap(({ manager, operation, fieldsV1 }) => {
    const labels = Object.keys(fieldsV1?.['f:metadata']?.['f:labels'] ?? {}).filter((k) => k.startsWith('f:')).sort();
    return labels.length > 0
      ? [{
        manager,
        operation,
        fieldsV1: { 'f:metadata': { 'f:labels': Object.fromEntries(labels.map((k) => [k, {}])) } },
      }]
      : [];
  });
  return dump({ managedFields: entries }, { flowLevel: 5 }).trimEnd();
}

interface Run {
  readonly ns: string;
  /** labeller's kinds.yaml. */
  readonly config: string;
  readonly git: Git;
  readonly tool: GitOpsTool;
  readonly labeller: Labeller;
  readonly objects: { readonly Namespace: string; readonly Deployment: string };
  /** labeller's PATCHes of the two objects since the previous call, as the audit log has them. */
  readonly patches: () => AuditEvent[];
  /** labeller's /metrics. */
  metrics(): Promise<string>;
  /**
   * Waits until labeller has looked at each of `kinds` again since `before` (its controller's
   * reconcile count grew) and has nothing left queued or running.
   */
  settled(kinds: readonly string[], before: string): Promise<void>;
}

/** A fresh namespace, Git's first revision synced by the tool, then labeller started on it and its labels there. */
async function start(tool: GitOpsTool, conflicts: 'force' | 'skip'): Promise<Run> {
  const ns = await createNamespace('gitops');
  const git = new Git(ns);
  await tool.sync(git.manifests());
  const objects = {
    Namespace: `/api/v1/namespaces/${ns}`,
    Deployment: `/apis/apps/v1/namespaces/${ns}/deployments/web`,
  } as const;
  const controllers: Readonly<Record<string, string>> = {
    Namespace: 'namespaces',
    Deployment: `deployments.apps/${ns}`,
  };
  const patches = auditTail((e: AuditEvent) =>
    byLabeller(e) && e.verb === 'patch' &&
    ((e.objectRef?.resource === 'namespaces' && e.objectRef.name === ns) ||
      (e.objectRef?.resource === 'deployments' && e.objectRef.namespace === ns))
  );
  const config = configFile(`
labels:
  ${TEAM}: payments
  ${COST_CENTER}: cc-42
conflicts: ${conflicts}
kinds:
  - resource: namespaces
    selector: "${APP}=${ns}"
  - resource: deployments
    namespaces: [${ns}]
`);
  const [port = 0] = await freePorts(1);
  const labeller = new Labeller(
    ['--config', config, '--requeue-after', '0', '--metrics-bind-address', `127.0.0.1:${port}`],
    { env: { POD_NAME: 'labeller-gitops-e2e' } },
  );
  const metrics = async () => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  try {
    for (const path of Object.values(objects)) {
      await eventually(async () => (await get(path))?.metadata.labels?.[TEAM] === 'payments', `${path} labelled`);
    }
    // The API server logs a request's last stage after answering it: wait for the PATCHes that
    // labelled both objects, so that the tests' first patches() call takes them with it.
    const first: AuditEvent[] = [];
    await eventually(async () => {
      first.push(...patches());
      return ['namespaces', 'deployments'].every((r) => first.some((e) => e.objectRef?.resource === r));
    }, "labeller's first PATCHes of both objects in the audit log");
  } catch (error) {
    labeller.kill();
    throw error;
  }
  return {
    ns,
    config,
    git,
    tool,
    labeller,
    objects,
    patches,
    metrics,
    async settled(kinds, before) {
      await eventually(async () => {
        const now = await metrics();
        return kinds.every((kind) => {
          const controller = controllers[kind] ?? kind;
          return total(now, 'controller_runtime_reconcile_total', { controller }) >
              total(before, 'controller_runtime_reconcile_total', { controller }) &&
            total(now, 'workqueue_depth', { controller }) === 0 &&
            total(now, 'controller_runtime_active_workers', { controller }) === 0;
        });
      }, `labeller to look at ${kinds.join(' and ')} again`);
    },
  };
}

/** One round of the tool's loop; once labeller has looked at what it changed. */
async function syncRound(run: Run, labels?: Readonly<Record<string, string>>, leave?: Leave): Promise<string[]> {
  const before = await run.metrics();
  const versions = await Promise.all(
    Object.values(run.objects).map(async (p) => (await get(p))?.metadata.resourceVersion),
  );
  const applied = await run.tool.sync(run.git.manifests(labels), leave);
  const after = await Promise.all(
    Object.values(run.objects).map(async (p) => (await get(p))?.metadata.resourceVersion),
  );
  const changed = Object.keys(run.objects).filter((_, i) => versions[i] !== after[i]);
  if (changed.length > 0) await run.settled(changed, before);
  return applied;
}

const writes = (events: readonly AuditEvent[]) => events.filter((e) => !e.requestURI.includes('dryRun='));

for (const tool of [argoCd, flux]) {
  const { name: toolName, manager } = tool;
  describe(`labeller next to ${toolName} (${manager})`, { skip: auditSkip }, () => {
    test("syncs whose manifests do not carry labeller's keys leave them, owned by labeller; labeller writes nothing", async (t) => {
      const run = await start(tool, 'force');
      try {
        run.patches();
        const patchesBefore = total(await run.metrics(), 'rest_client_requests_total', { method: 'PATCH' });
        // Someone labels the Deployment by hand: what each tool does with kubectl's fields shows too.
        const beforeHotfix = await run.metrics();
        await patchLabels(run.objects.Deployment, { hotfix: 'true' }, 'kubectl-label');
        await run.settled(['Deployment'], beforeHotfix);
        const applied: string[][] = [];
        for (let i = 0; i < 4; i++) {
          run.git.commit();
          applied.push(await syncRound(run));
        }
        // No new commit: the diff (a dry-run apply of Git) finds nothing, labeller's keys and all.
        assert.deepEqual(await syncRound(run), [], 'in sync');
        assert.deepEqual(writes(run.patches()), [], 'no PATCH from labeller');
        assert.equal(
          total(await run.metrics(), 'rest_client_requests_total', { method: 'PATCH' }),
          patchesBefore,
          'rest_client_requests_total{method="PATCH"} unchanged',
        );
        for (const path of Object.values(run.objects)) {
          const labels = (await get(path))?.metadata.labels ?? {};
          assert.deepEqual([labels[TEAM], labels[COST_CENTER]], ['payments', 'cc-42'], path);
          assert.deepEqual(await ownersOf(path, TEAM), ['labeller (Apply)'], path);
          assert.deepEqual(await ownersOf(path, COST_CENTER), ['labeller (Apply)'], path);
        }
        const hotfix = (await get(run.objects.Deployment))?.metadata.labels?.['hotfix'];
        if (manager === 'kustomize-controller') {
          // Flux took kubectl's entry over and applied Git without it: gone.
          assert.equal(hotfix, undefined, "Flux removes kubectl's label");
          assert.deepEqual(applied, [['Deployment'], ['Deployment'], ['Deployment'], ['Deployment']]);
        } else {
          assert.equal(hotfix, 'true', "Argo CD leaves kubectl's label");
          assert.deepEqual(applied, Array(4).fill(['Namespace', 'Deployment']));
        }
        const ownership = await labelOwnership(run.objects.Deployment);
        figure(
          t,
          `${toolName}: 4 syncs (${applied.flat().length} applies), 0 PATCH from labeller; the Deployment's labels:\n${ownership}`,
        );
        assertCleanExit(await run.labeller.stop());
      } finally {
        run.labeller.kill();
      }
    });

    test("a key Git carried with labeller's value, then dropped, stays labeller's (argo-cd#15880)", async (t) => {
      const run = await start(tool, 'force');
      try {
        run.patches();
        // A commit adds labeller's key with labeller's value (and a new image): both own it where the tool applied.
        run.git.commit();
        const applied = await syncRound(run, { [TEAM]: 'payments' });
        // Argo CD applies every resource; Flux only what drifted, and labeller's own value is no drift.
        assert.deepEqual(applied, manager === 'argocd-controller' ? ['Namespace', 'Deployment'] : ['Deployment']);
        for (const kind of ['Namespace', 'Deployment'] as const) {
          const owners = await ownersOf(run.objects[kind], TEAM);
          assert.deepEqual(
            owners,
            applied.includes(kind) ? [`${manager} (Apply)`, 'labeller (Apply)'].sort() : ['labeller (Apply)'],
            kind,
          );
        }
        const coOwned = await labelOwnership(run.objects.Deployment);
        // The next commit drops it again.
        run.git.commit();
        await syncRound(run);
        await syncRound(run);
        for (const path of Object.values(run.objects)) {
          assert.equal((await get(path))?.metadata.labels?.[TEAM], 'payments', path);
          assert.deepEqual(await ownersOf(path, TEAM), ['labeller (Apply)'], path);
        }
        assert.deepEqual(run.patches(), [], 'no PATCH from labeller');
        figure(
          t,
          `${toolName}: co-owned (applied: ${applied.join(', ') || 'nothing'}):\n${coOwned}\n` +
            `dropped from Git:\n${await labelOwnership(run.objects.Deployment)}`,
        );
        assertCleanExit(await run.labeller.stop());
      } finally {
        run.labeller.kill();
      }
    });

    test(
      'a key Git carries with another value, under conflicts: force: a fight, detected, bounded and explained',
      { timeout: 120_000 },
      async (t) => {
        const run = await start(tool, 'force');
        try {
          run.patches();
          const client = await adminClient();
          const uids = {
            Namespace: (await get(run.objects.Namespace))?.metadata.uid ?? '',
            Deployment: (await get(run.objects.Deployment))?.metadata.uid ?? '',
          };
          const fightEvents = async () => {
            const lists = await Promise.all(
              [run.ns, 'default'].map((namespace) =>
                client.json<{ items: { reason: string; note: string; regarding: { uid?: string; kind: string } }[] }>(
                  'GET',
                  `/apis/events.k8s.io/v1/namespaces/${namespace}/events`,
                  { query: { fieldSelector: 'reason=LabelFight' } },
                )
              ),
            );
            return lists.flatMap((l) => l.items).filter((e) => Object.values(uids).includes(e.regarding.uid ?? ''));
          };
          // A commit sets the key to another value; self-heal syncs whenever the live object differs.
          run.git.commit();
          const ops = { [TEAM]: 'ops' };
          let syncs = 0;
          let applies = 0;
          const events = await eventually(
            async () => {
              const applied = await run.tool.sync(run.git.manifests(ops));
              syncs++;
              applies += applied.length;
              const found = await fightEvents();
              return found.length === 2 && found;
            },
            'a LabelFight Event on the Namespace and on the Deployment',
            60_000,
            TICK_MS,
          );
          const fought = run.patches();
          // The loop goes on; labeller leaves the key to the tool for the backoff (1 minute, far longer than this).
          let appliesAfter = 0;
          for (let i = 0; i < 10; i++) {
            await sleep(TICK_MS);
            appliesAfter += (await run.tool.sync(run.git.manifests(ops))).length;
          }
          const after = run.patches();
          for (const kind of ['Namespace', 'Deployment'] as const) {
            const ofKind = fought.filter((e) =>
              e.objectRef?.resource === (kind === 'Namespace' ? 'namespaces' : 'deployments')
            );
            assert.equal(writes(ofKind).length, FIGHT_RETAKES, `${kind}: ${FIGHT_RETAKES} retakes, then yielded`);
            // Each contest first asks who holds the key, with a dry run: the retakes', and the one that yielded.
            assert.equal(
              ofKind.length - writes(ofKind).length,
              FIGHT_RETAKES + 1,
              `${kind}: a dry run naming the manager per contest`,
            );
            const labels = (await get(run.objects[kind]))?.metadata.labels ?? {};
            assert.deepEqual([labels[TEAM], labels[COST_CENTER]], ['ops', 'cc-42'], kind);
            assert.deepEqual(await ownersOf(run.objects[kind], TEAM), [`${manager} (Apply)`], kind);
          }
          assert.deepEqual(after, [], 'no PATCH from labeller while the key is left to the tool');
          assert.equal(appliesAfter, 0, `${toolName} sees no drift once labeller yields`);
          for (const event of events) {
            assert.match(
              event.note,
              new RegExp(
                `^label ${TEAM} was taken back by field manager "${manager}" each time labeller set it \\(${FIGHT_RETAKES} times in 10 min\\); left to it for 60 s`,
              ),
            );
          }
          const metrics = await run.metrics();
          for (const controller of ['namespaces', `deployments.apps/${run.ns}`]) {
            assert.equal(total(metrics, 'labeller_fights_total', { controller, field: 'labels' }), 1, controller);
          }
          const gauges = ['labeller_objects_pending', 'labeller_objects_conflicting'].map((name) =>
            `${name} ${total(metrics, name, { controller: `deployments.apps/${run.ns}` })}`
          );
          assert.equal(
            run.labeller.logs.filter((l) =>
              /taken back by a manager labeller yields to/.test(l.msg) && l['manager'] === manager
            ).length,
            2,
            'one log line per object',
          );

          // explain says fight, and why; status counts the conflict.
          const explained = await new Labeller(
            ['explain', 'deploy/web', '-n', run.ns, '--config', run.config, '-o', 'json'],
          ).exited;
          assert.equal(explained.code, 0, explained.stderr);
          const keys = new Map(
            (JSON.parse(explained.stdout) as ExplainReport).explanation?.keys.map((k) => [k.key, k]),
          );
          const team = keys.get(TEAM);
          assert.deepEqual([team?.state, team?.value, team?.desired, team?.why, team?.next], [
            'fight',
            'ops',
            'payments',
            `${manager} took it back each time labeller set it`,
            `left to ${manager} until the backoff ends, then retaken once (conflicts: force)`,
          ]);
          assert.equal(keys.get(COST_CENTER)?.state, 'applied');
          const table = await new Labeller(['explain', 'deploy/web', '-n', run.ns, '--config', run.config]).exited;
          const status = await new Labeller(['status', '--config', run.config, '-o', 'json']).exited;
          assert.equal(status.code, 0, status.stderr);
          const rows = (JSON.parse(status.stdout) as StatusReport).kinds.map((k) => [k.resource, k.conflicts]);
          assert.deepEqual(rows, [['namespaces', 1], ['deployments.apps', 1]]);
          const statusTable = await new Labeller(['status', '--config', run.config]).exited;

          // The fix: Git drops the key. The tool lets go of it, nobody owns it, and labeller sets it
          // again at once, backoff or not: a key that is missing is not contested.
          run.git.commit();
          const released = await syncRound(run);
          for (const [kind, path] of Object.entries(run.objects)) {
            await eventually(
              async () => (await get(path))?.metadata.labels?.[TEAM] === 'payments',
              `${kind} relabelled`,
            );
            assert.deepEqual(await ownersOf(path, TEAM), ['labeller (Apply)'], kind);
          }
          assert.deepEqual(await syncRound(run), [], 'in sync');
          const fixed = run.patches();
          assert.equal(writes(fixed).length, 2, 'one PATCH per object');
          figure(
            t,
            `${toolName}: ${syncs} self-heal syncs (${applies} applies) until both LabelFight Events; labeller: ` +
              `${writes(fought).length} retakes and ${
                fought.length - writes(fought).length
              } dry runs over 2 objects; ` +
              `then 10 syncs: ${appliesAfter} applies, ${after.length} PATCH from labeller; ${gauges.join(', ')}\n` +
              `${events[0]?.regarding.kind}: ${events[0]?.note}\n${table.stdout}\n${statusTable.stdout}\n` +
              `Git drops the key: ${toolName} applied ${released.join(', ')}; labeller: ${writes(fixed).length} PATCH`,
          );
          assertCleanExit(await run.labeller.stop());
        } finally {
          run.labeller.kill();
        }
      },
    );

    test('a key Git carries with another value, under conflicts: skip: left to the tool, counted, not written', async (t) => {
      const run = await start(tool, 'skip');
      try {
        run.patches();
        const ops = { [TEAM]: 'ops' };
        for (let i = 0; i < 3; i++) {
          run.git.commit();
          await syncRound(run, ops);
        }
        assert.deepEqual(run.patches(), [], 'no PATCH from labeller');
        for (const path of Object.values(run.objects)) {
          const labels = (await get(path))?.metadata.labels ?? {};
          assert.deepEqual([labels[TEAM], labels[COST_CENTER]], ['ops', 'cc-42'], path);
          assert.deepEqual(await ownersOf(path, TEAM), [`${manager} (Apply)`], path);
          assert.deepEqual(await ownersOf(path, COST_CENTER), ['labeller (Apply)'], path);
        }
        const metrics = await run.metrics();
        for (const controller of ['namespaces', `deployments.apps/${run.ns}`]) {
          assert.ok(total(metrics, 'labeller_conflicts_total', { controller }) >= 1, controller);
          assert.equal(total(metrics, 'labeller_fights_total', { controller }), 0, controller);
        }
        const client = await adminClient();
        const conflict = await eventually(async () => {
          const list = await client.json<{ items: { reason: string; note: string }[] }>(
            'GET',
            `/apis/events.k8s.io/v1/namespaces/${run.ns}/events`,
            { query: { fieldSelector: 'reason=LabelConflict' } },
          );
          return list.items[0];
        }, 'a LabelConflict Event on the Deployment');
        assert.match(conflict.note, new RegExp(`label ${TEAM} is "ops".*labeller wants "payments"`));
        const status = await new Labeller(['status', '--config', run.config, '-o', 'json']).exited;
        assert.equal(status.code, 0, status.stderr);
        const rows = (JSON.parse(status.stdout) as StatusReport).kinds.map((k) => [k.resource, k.conflicts, k.pending]);
        assert.deepEqual(rows, [['namespaces', 1, 0], ['deployments.apps', 1, 0]]);
        const explained = await new Labeller(
          ['explain', 'deploy/web', '-n', run.ns, '--config', run.config, '-o', 'json'],
        ).exited;
        const team = (JSON.parse(explained.stdout) as ExplainReport).explanation?.keys.find((k) => k.key === TEAM);
        assert.deepEqual([team?.state, team?.next], ['contested', 'left as it is (conflicts: skip)']);
        figure(
          t,
          `${toolName}: 3 syncs carrying ${TEAM}=ops, 0 PATCH from labeller; ${conflict.note}\n` +
            `${await labelOwnership(run.objects.Deployment)}`,
        );
        assertCleanExit(await run.labeller.stop());
      } finally {
        run.labeller.kill();
      }
    });

    test(`a key Git carries with another value, left to labeller (${tool.leaving}): no fight`, async (t) => {
      const run = await start(tool, 'force');
      try {
        run.patches();
        const leave = { manager: 'labeller', keys: [TEAM, COST_CENTER] };
        for (let i = 0; i < 3; i++) {
          run.git.commit();
          await syncRound(run, { [TEAM]: 'ops' }, leave);
        }
        assert.deepEqual(await syncRound(run, { [TEAM]: 'ops' }, leave), [], 'in sync');
        assert.deepEqual(run.patches(), [], 'no PATCH from labeller');
        for (const [kind, path] of Object.entries(run.objects)) {
          assert.equal((await get(path))?.metadata.labels?.[TEAM], 'payments', kind);
          const owners = await ownersOf(path, TEAM);
          // Argo CD applies the live value (both own it); Flux strips the key from its apply.
          assert.deepEqual(
            owners,
            manager === 'argocd-controller' ? [`${manager} (Apply)`, 'labeller (Apply)'] : ['labeller (Apply)'],
            kind,
          );
        }
        const metrics = await run.metrics();
        for (const controller of ['namespaces', `deployments.apps/${run.ns}`]) {
          assert.equal(total(metrics, 'labeller_fights_total', { controller }), 0, controller);
        }
        figure(
          t,
          `${toolName} (${tool.leaving}): 3 syncs with ${TEAM}=ops in Git, 0 PATCH from labeller; the Deployment's labels:\n` +
            `${await labelOwnership(run.objects.Deployment)}`,
        );
        assertCleanExit(await run.labeller.stop());
      } finally {
        run.labeller.kill();
      }
    });
  });
}
