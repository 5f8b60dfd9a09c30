// One seeded chaos run against a full test control plane (controllers, scheduler, kwok nodes):
// two replicas of labeller under leader election, as a ServiceAccount, label two namespaces'
// ConfigMaps, Deployments, ReplicaSets, Pods and (while its CRD is installed) Widgets from the
// namespace's `team` label, a ConfigMap source of cost centres and an HTTPS source of sites, while
// a sequence of operations drawn from the seed changes the world and disturbs labeller. The
// oracle (oracle.ts) says what every object's labels must be; the invariants are checked as the
// run goes and at its end:
//   never strip  no key the config in force wants, from readable inputs, disappears from an
//                object that still exists (sampled every second; a key not wanted at some moment
//                of the last GRACE_MS may go);
//   convergence  within CONVERGE_MS of the last operation every object carries exactly the
//                oracle's labels of the scenario's keys;
//   bounded      labeller's PATCHes stay within twice the changes the oracle predicts, plus a
//                constant per restart;
//   health       no replica exits by itself but for a named reason (lost leadership, no API
//                server at start) nor is unready without one (/readyz), each is ready once
//                converged and stops cleanly at the end (exit 0, no crash), peak RSS stays
//                bounded, and no Lease is left but the run's own.
// Operations: ConfigMaps created and deleted, namespace labels changed, Deployments scaled (the
// controllers make and delete Pods), a CRD installed (with Widgets) and removed, the ConfigMap
// source rewritten with good, empty, malformed and mass-removing content or deleted for a while,
// the HTTPS source answering the same, too large a body, no answer for a while or flipping
// between two contents, live reloads that add and drop keys and ones that do not parse, a kind's
// RBAC revoked for a while, another manager overwriting a key once. Perturbations: SIGKILL and
// restart of either replica (between a write and its echo, at random), SIGSTOP for part of a
// lease duration (the other replica takes over), every connection dropped, every byte delayed
// (a stale view), kube-apiserver restarted.
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isNotFound } from '../../src/kube/errors.ts';
import { dump } from 'js-yaml';
import { auditEvents, byLabeller } from '../cluster/audit.ts';
import { Cluster, type PolicyRule } from '../cluster/cluster.ts';
import { FaultProxy } from '../cluster/faultproxy.ts';
import type { ControlPlane } from '../controlplane/controlplane.ts';
import { Catalog } from '../cluster/catalog.ts';
import { crashed } from '../process/crash.ts';
import { freePorts } from '../controlplane/process.ts';
import { eventually } from '../process/eventually.ts';
import { describeExit } from '../process/child.ts';
import { Labeller } from '../process/labeller.ts';
import { procSample } from '../process/procstat.ts';
import { sleep } from '../process/sleep.ts';
import {
  CATALOG_MAX_BYTES,
  catalogVerdict,
  type ConfigState,
  DOMAIN,
  expected,
  type HeldSource,
  type HeldValues,
  KEYS,
  matches,
  sourceVerdict,
  wanted,
  type WorldState,
} from './oracle.ts';
import { Random } from './random.ts';

/** A removal is justified if the key was not wanted at some moment this long before it was seen. */
const GRACE_MS = 45_000;
const CONVERGE_MS = 120_000;
const MAX_RSS_MIB = 300;
const TEAMS = ['red', 'blue', 'green', 'gray'] as const;
const INTRUDER = 'intruder';

/** The kinds whose RBAC an operation may revoke: each of the config's built-in kinds. */
const REVOCABLE = ['configmaps', 'deployments', 'replicasets', 'pods'] as const;
const REPLICAS = 2;

/** One step of a run, as drawn from the seed (and written out to replay it). */
export type Operation =
  | { readonly op: 'create'; readonly ns: number; readonly name: string }
  | { readonly op: 'delete'; readonly ns: number; readonly name: string }
  | { readonly op: 'team'; readonly ns: number; readonly team: string | null }
  | { readonly op: 'source'; readonly document: unknown }
  /** The HTTPS source's body, as served. */
  | { readonly op: 'catalog'; readonly body: string }
  /** The HTTPS source answering nothing (connection refused) for `ms`. */
  | { readonly op: 'catalog-down'; readonly ms: number }
  /** The HTTPS source flipping between two bodies every 300 ms for `ms`, ending on the second. */
  | { readonly op: 'catalog-flip'; readonly bodies: readonly [string, string]; readonly ms: number }
  | { readonly op: 'reload'; readonly config: ConfigState }
  | { readonly op: 'intrude'; readonly ns: number; readonly name: string }
  | { readonly op: 'scale'; readonly ns: number; readonly replicas: number }
  /** The Widgets CRD installed (with two Widgets per namespace) or removed. */
  | { readonly op: 'crd'; readonly install: boolean }
  /** Every right on `resource` taken from labeller's ServiceAccount for `ms`, then given back. */
  | { readonly op: 'revoke'; readonly resource: (typeof REVOCABLE)[number]; readonly ms: number }
  | { readonly op: 'kill'; readonly replica: number }
  | { readonly op: 'stop'; readonly replica: number; readonly ms: number }
  | { readonly op: 'drop' }
  /** Every byte between labeller and the API server `delayMs` late, for `ms`: a stale view. */
  | { readonly op: 'delay'; readonly delayMs: number; readonly ms: number }
  | { readonly op: 'restart-apiserver'; readonly ms: number }
  /** A config file that does not parse, for `ms`, then the config in force again. */
  | { readonly op: 'reload-invalid'; readonly ms: number }
  /** The source's ConfigMap deleted for `ms`, then written again with the content in use. */
  | { readonly op: 'source-gone'; readonly ms: number }
  | { readonly op: 'pause'; readonly ms: number };

export interface Violation {
  readonly invariant: 'never strip' | 'convergence' | 'bounded writes' | 'health';
  readonly detail: string;
}

export interface RunResult {
  readonly seed: number;
  readonly operations: readonly Operation[];
  readonly violations: readonly Violation[];
  readonly patches: number;
  readonly predicted: number;
  readonly convergedSeconds: number | undefined;
  readonly peakRssMiB: number;
  readonly restarts: number;
}

const INITIAL_SOURCE = { red: 'cc-1', blue: 'cc-2', green: 'cc-3', gray: 'cc-4' };
const INITIAL_CATALOG = { red: 'site-1', blue: 'site-2', green: 'site-3', gray: 'site-4' };
const INITIAL_CONFIG: ConfigState = { static: true, team: true, cc: true, site: true };
const CRD = { group: DOMAIN, plural: 'widgets', kind: 'Widget' } as const;

/** The operations of `seed`: drawn against a model of what exists, so each makes sense when it runs. */
export function generate(seed: number, count: number): Operation[] {
  const random = new Random(seed);
  const configMaps = [new Set(['cm-0', 'cm-1', 'cm-2']), new Set(['cm-0', 'cm-1', 'cm-2'])];
  let serial = 3;
  let config = INITIAL_CONFIG;
  let crd = false;
  const intruded = new Set<string>();
  const operations: Operation[] = [];
  for (let i = 0; i < count; i++) {
    const ns = random.int(0, 1);
    const kind = random.weighted({
      create: 4,
      delete: 2,
      team: 4,
      source: 3,
      catalog: 3,
      'catalog-down': 0.7,
      'catalog-flip': 0.7,
      reload: 2,
      intrude: 1,
      scale: 2,
      crd: 1,
      revoke: 1,
      kill: 1,
      stop: 1,
      drop: 1,
      delay: 0.7,
      'restart-apiserver': 0.3,
      'reload-invalid': 1,
      'source-gone': 0.7,
    });
    const existing = [...configMaps[ns]!];
    switch (kind) {
      case 'create': {
        const name = `cm-${serial++}`;
        configMaps[ns]!.add(name);
        operations.push({ op: 'create', ns, name });
        break;
      }
      case 'delete': {
        if (existing.length === 0) continue;
        const name = random.pick(existing);
        configMaps[ns]!.delete(name);
        operations.push({ op: 'delete', ns, name });
        break;
      }
      case 'intrude': {
        // Once per object: more would be a fight, which labeller yields (fights.ts), not this oracle's case.
        const fresh = existing.filter((name) => !intruded.has(`${ns}/${name}`));
        if (fresh.length === 0) continue;
        const name = random.pick(fresh);
        intruded.add(`${ns}/${name}`);
        operations.push({ op: 'intrude', ns, name });
        break;
      }
      case 'team':
        operations.push({ op: 'team', ns, team: random.chance(0.2) ? null : random.pick(TEAMS) });
        break;
      case 'source':
        operations.push({ op: 'source', document: sourceDocument(random, 'cc') });
        break;
      case 'catalog':
        operations.push({ op: 'catalog', body: catalogBody(random) });
        break;
      case 'catalog-flip':
        // Two edits that keep every key: whichever of them labeller sees, neither is an outage.
        operations.push({
          op: 'catalog-flip',
          bodies: [JSON.stringify(everyTeam(random, 'site')), JSON.stringify(everyTeam(random, 'site'))],
          ms: random.int(1000, 4000),
        });
        break;
      case 'reload': {
        const next = {
          static: random.chance(0.7),
          team: random.chance(0.7),
          cc: random.chance(0.7),
          site: random.chance(0.7),
        };
        // A config without labels does not load: keep one.
        config = next.static || next.team || next.cc || next.site ? next : { ...next, static: true };
        operations.push({ op: 'reload', config });
        break;
      }
      case 'scale':
        operations.push({ op: 'scale', ns, replicas: random.int(0, 3) });
        break;
      case 'crd':
        crd = !crd;
        operations.push({ op: 'crd', install: crd });
        break;
      case 'revoke':
        operations.push({ op: 'revoke', resource: random.pick(REVOCABLE), ms: random.int(2000, 8000) });
        break;
      case 'kill':
        operations.push({ op: 'kill', replica: random.int(0, REPLICAS - 1) });
        break;
      case 'stop':
        operations.push({ op: 'stop', replica: random.int(0, REPLICAS - 1), ms: random.int(1000, 8000) });
        break;
      case 'delay':
        operations.push({ op: 'delay', delayMs: random.int(200, 2000), ms: random.int(2000, 8000) });
        break;
      case 'catalog-down':
      case 'restart-apiserver':
      case 'reload-invalid':
      case 'source-gone':
        operations.push({ op: kind, ms: random.int(1000, 5000) });
        break;
      default:
        operations.push({ op: kind });
    }
    operations.push({ op: 'pause', ms: random.int(50, 1500) });
  }
  return operations;
}

/** A source document: mostly good edits, sometimes what an outage answers. */
function sourceDocument(random: Random, prefix: string): unknown {
  const shape = random.weighted({ edit: 6, empty: 1, null: 1, 'not a mapping': 1, 'mass removal': 1 });
  switch (shape) {
    case 'empty':
      return {};
    case 'null':
      return null;
    case 'not a mapping':
      return ['maintenance'];
    case 'mass removal':
      return { [random.pick(TEAMS)]: `${prefix}-9` };
    default: {
      const document: Record<string, string> = {};
      for (const team of TEAMS) if (random.chance(0.85)) document[team] = `${prefix}-${random.int(1, 6)}`;
      return document;
    }
  }
}

/** The HTTPS source's body: a source document, or a good-looking one too large to take. */
function catalogBody(random: Random): string {
  if (!random.chance(0.15)) return JSON.stringify(sourceDocument(random, 'site'));
  return JSON.stringify({ ...everyTeam(random, 'site'), padding: 'x'.repeat(CATALOG_MAX_BYTES) });
}

function everyTeam(random: Random, prefix: string): Record<string, string> {
  return Object.fromEntries(TEAMS.map((team) => [team, `${prefix}-${random.int(1, 6)}`]));
}

interface Sample {
  readonly at: number;
  /** `kind/namespace/name` → uid and the scenario's labels. */
  readonly objects: ReadonlyMap<string, { readonly uid: string; readonly labels: Record<string, string> }>;
}

const KINDS = [
  { path: (ns: string) => `/api/v1/namespaces/${ns}/configmaps`, name: 'configmaps' },
  { path: (ns: string) => `/apis/apps/v1/namespaces/${ns}/deployments`, name: 'deployments' },
  { path: (ns: string) => `/apis/apps/v1/namespaces/${ns}/replicasets`, name: 'replicasets' },
  { path: (ns: string) => `/api/v1/namespaces/${ns}/pods`, name: 'pods' },
  { path: (ns: string) => `/apis/${CRD.group}/v1/namespaces/${ns}/${CRD.plural}`, name: CRD.plural, optional: true },
] as const;

/** The rights labeller's ServiceAccount has; `revoked` is left out. */
function rules(revoked?: string): PolicyRule[] {
  const kinds: PolicyRule[] = [
    { apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch', 'patch'] },
    { apiGroups: ['apps'], resources: ['deployments', 'replicasets'], verbs: ['list', 'watch', 'patch'] },
    { apiGroups: [''], resources: ['pods'], verbs: ['list', 'watch', 'patch'] },
  ].flatMap((rule) => {
    const resources = rule.resources.filter((resource) => resource !== revoked);
    return resources.length > 0 ? [{ ...rule, resources }] : [];
  });
  return [
    ...kinds,
    { apiGroups: [CRD.group], resources: [CRD.plural], verbs: ['list', 'watch', 'patch'] },
    { apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['*'] },
    { apiGroups: ['', 'events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
  ];
}

/** Runs `operations` (or those of `seed`) against `cp`; never throws for a violation, only reports it. */
export async function run(
  cp: ControlPlane,
  seed: number,
  operations: readonly Operation[],
  log: (line: string) => void,
): Promise<RunResult> {
  const cluster = await Cluster.connect(cp.kubeconfig);
  const proxy = await FaultProxy.start(cp.server);
  const catalog = new Catalog(`chaos-${seed}`);
  catalog.body = JSON.stringify(INITIAL_CATALOG);
  await catalog.up();
  const violations: Violation[] = [];
  const namespaces = [await cluster.namespace(`chaos-${seed}-a`), await cluster.namespace(`chaos-${seed}-b`)];
  const sourceNs = await cluster.namespace(`chaos-${seed}-src`);
  const teams = new Map<string, string | undefined>([[namespaces[0]!, 'red'], [namespaces[1]!, 'blue']]);
  let source: ReadonlyMap<string, string> = new Map(Object.entries(INITIAL_SOURCE));
  let sites: ReadonlyMap<string, string> = new Map(Object.entries(INITIAL_CATALOG));
  let config = INITIAL_CONFIG;
  let crd = false;
  const intruded = new Set<string>();
  /** Whether each source's document as written now is refused (labeller keeps an older one). */
  const refused = { cc: false, site: false };
  const held = new Map<HeldSource, HeldValues>();
  const world = (): WorldState => ({ config, teams, source, catalog: sites, held, intruded });
  /** What the oracle wanted, over time, per namespace. */
  const history: { at: number; wanted: Map<string, Record<string, string>> }[] = [];
  const record = () => {
    // Once labeller wants the team key of an intruded object again, it takes it back (force).
    for (const key of intruded) if (KEYS.team in wanted(world(), key.split('/')[1]!)) intruded.delete(key);
    history.push({ at: Date.now(), wanted: new Map(namespaces.map((ns) => [ns, wanted(world(), ns)])) });
  };
  /**
   * A process about to start reads each source's document as written: refused, it holds the
   * source's key where it is on each object now (a hold already begun keeps its values).
   */
  const starting = async () => {
    const sources = (['cc', 'site'] as const).filter((source) => refused[source] && !held.has(source));
    if (sources.length === 0) return;
    const now = await snapshot(cluster, namespaces);
    for (const source of sources) {
      held.set(source, new Map([...now.objects].map(([key, { labels }]) => [key, labels[KEYS[source]]])));
    }
    record();
  };
  let predicted = 0;
  let patches = 0;
  let peakRssMiB = 0;
  let restarts = 0;
  let convergedSeconds: number | undefined;

  // A run before may have left the CRD installed (it stopped part-way): each run starts without it.
  await cluster.deleteCrd(CRD.group, CRD.plural).catch(() => {});
  for (const [i, ns] of namespaces.entries()) {
    await cluster.patchLabels(`/api/v1/namespaces/${ns}`, { team: teams.get(ns) ?? null }, 'chaos');
    await cluster.createMany(`/api/v1/namespaces/${ns}/configmaps`, ['cm-0', 'cm-1', 'cm-2'], (name) => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name },
    }));
    await cluster.post(`/apis/apps/v1/namespaces/${ns}/deployments`, deployment(`web-${i}`, 1));
  }
  /** Replaces the source's ConfigMap, or creates it when it is gone. */
  const writeSource = (document: unknown) =>
    cluster.put(`/api/v1/namespaces/${sourceNs}/configmaps/teams`, sourceMap(sourceNs, document)).catch(() =>
      cluster.post(`/api/v1/namespaces/${sourceNs}/configmaps`, sourceMap(sourceNs, document))
    );
  await cluster.post(`/api/v1/namespaces/${sourceNs}/configmaps`, sourceMap(sourceNs, INITIAL_SOURCE));
  const writeConfig = () => writeFileSync(configPath, configYaml(config, namespaces, sourceNs, catalog));
  const configPath = cluster.writeFile(`chaos-${seed}.yaml`, '');
  writeConfig();
  // As the chart runs it: a ServiceAccount's token, through the fault proxy.
  const account = await cluster.serviceAccount(sourceNs, 'labeller', rules(), proxy.url);
  // Under leader election, as the chart runs it: a restarted process is the same group, so the
  // field-manager guard lets it in whatever config its predecessor's Lease recorded.
  const probePorts = await freePorts(REPLICAS);
  const start = (_: unknown, i: number) =>
    new Labeller([
      '--health-probe-bind-address',
      `127.0.0.1:${probePorts[i]}`,
      '--config',
      configPath,
      '--leader-elect',
      '--leader-election-namespace',
      sourceNs,
      '--lease-duration',
      '6s',
      '--renew-deadline',
      '4s',
      '--retry-period',
      '1s',
    ], { kubeconfig: account.kubeconfig });
  const replicas = Array.from({ length: REPLICAS }, start);
  /** The replicas the scenario is killing on purpose. */
  const killing = new Set<number>();
  record();

  // Every second: the objects' labels, checked against the oracle's history (never strip), and RSS.
  let previous: Sample | undefined;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      try {
        const sample = await snapshot(cluster, namespaces);
        if (previous) violations.push(...stripped(previous, sample, history));
        previous = sample;
        for (const [i, labeller] of replicas.entries()) {
          const readiness = await readyz(probePorts[i]!);
          if (readiness && !readiness.ready && !/^- \S/m.test(readiness.text)) {
            violations.push({
              invariant: 'health',
              detail: `replica ${i} unready without a reason: ${readiness.text}`,
            });
          }
          const rss = labeller.running ? procSample(labeller.pid)?.rss : undefined;
          // A process on its way out reads as no RSS.
          if (rss !== undefined && Number.isFinite(rss)) peakRssMiB = Math.max(peakRssMiB, rss / 2 ** 20);
          // Exited by itself: as the kubelet would, start it again. Losing leadership (a stop past
          // the renew deadline), an API server that cannot be reached at start, and a start while
          // the config file is invalid (exit 2 naming it: a crash loop until it is valid again)
          // are reasons to exit.
          if (labeller.running || killing.has(i)) continue;
          const exit = await labeller.exited;
          // Killed on purpose meanwhile: the scenario starts it again.
          if (killing.has(i) || replicas[i] !== labeller) continue;
          const named = /"lost leadership"|cannot reach the API server/.test(labeller.stderr) ||
            (exit.code === 2 && exit.fatal?.includes(configPath) === true);
          if (!named || crashed(labeller.stderr)) {
            violations.push({
              invariant: 'health',
              detail: `replica ${i} exited ${describeExit(exit)} by itself (whole log: ${
                keepLog(seed, i, labeller)
              }): ${labeller.stderr.slice(-1500)}`,
            });
          }
          restarts++;
          await starting();
          replicas[i] = start(undefined, i);
        }
      } catch {
        // The API server restarting: the next sample catches up.
      }
      await sleep(1000);
    }
  })();

  const objectsIn = (ns: string): number =>
    [...(previous?.objects.keys() ?? [])].filter((k) => k.split('/')[1] === ns).length;
  /** Counts the objects whose wanted labels `change` alters, as the oracle sees them. */
  const predict = (change: () => void): void => {
    const before = namespaces.map((ns) => JSON.stringify(wanted(world(), ns)));
    change();
    for (const [i, ns] of namespaces.entries()) {
      if (JSON.stringify(wanted(world(), ns)) !== before[i]) predicted += objectsIn(ns);
    }
    record();
  };
  /** The HTTPS source's next body, with what the oracle makes of it. */
  const serve = (body: string) => {
    const verdict = catalogVerdict(sites, body);
    refused.site = !('good' in verdict);
    if ('good' in verdict) {
      predict(() => {
        sites = verdict.good;
        held.delete('site');
      });
    }
    catalog.body = body;
  };
  /** Kills replica `i` and starts it again. */
  const restart = async (i: number) => {
    killing.add(i);
    replicas[i]!.kill();
    await replicas[i]!.exited;
    restarts++;
    await starting();
    replicas[i] = start(undefined, i);
    killing.delete(i);
  };

  const perform = async (operation: Operation, ns: string): Promise<void> => {
    switch (operation.op) {
      case 'create':
        await cluster.post(`/api/v1/namespaces/${ns}/configmaps`, {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: operation.name },
        });
        predicted++;
        break;
      case 'delete':
        await cluster.delete(`/api/v1/namespaces/${ns}/configmaps/${operation.name}`).catch(() => {});
        intruded.delete(`configmaps/${ns}/${operation.name}`);
        break;
      case 'team':
        predict(() => teams.set(ns, operation.team ?? undefined));
        await cluster.patchLabels(`/api/v1/namespaces/${ns}`, { team: operation.team }, 'chaos');
        break;
      case 'source': {
        const verdict = sourceVerdict(source, operation.document);
        refused.cc = !('good' in verdict);
        if ('good' in verdict) {
          predict(() => {
            source = verdict.good;
            held.delete('cc');
          });
        }
        await writeSource(operation.document);
        break;
      }
      case 'catalog':
        serve(operation.body);
        break;
      case 'catalog-down':
        // Unreachable: its last good content stays.
        await catalog.down();
        await sleep(operation.ms);
        await catalog.up();
        break;
      case 'catalog-flip':
        for (let i = 0, end = Date.now() + operation.ms; Date.now() < end; i++) {
          catalog.body = operation.bodies[i % 2]!;
          await sleep(300);
        }
        serve(operation.bodies[1]);
        break;
      case 'reload':
        predict(() => (config = operation.config));
        writeConfig();
        break;
      case 'intrude':
        // Wanted by labeller: it takes the key back (force); else the intruder's value stays theirs.
        if (!(KEYS.team in wanted(world(), ns))) intruded.add(`configmaps/${ns}/${operation.name}`);
        record();
        await cluster.patchLabels(
          `/api/v1/namespaces/${ns}/configmaps/${operation.name}`,
          { [KEYS.team]: INTRUDER },
          'intruder',
        );
        predicted++;
        break;
      case 'scale':
        await cluster.client.json('PATCH', `/apis/apps/v1/namespaces/${ns}/deployments/web-${operation.ns}/scale`, {
          headers: { 'content-type': 'application/merge-patch+json' },
          body: JSON.stringify({ spec: { replicas: operation.replicas } }),
        });
        predicted += operation.replicas + 1;
        break;
      case 'crd':
        if (operation.install) {
          await cluster.createCrd(CRD.group, CRD.plural, CRD.kind);
          crd = true;
          for (const namespace of namespaces) {
            for (const name of ['widget-0', 'widget-1']) {
              await cluster.post(`/apis/${CRD.group}/v1/namespaces/${namespace}/${CRD.plural}`, {
                apiVersion: `${CRD.group}/v1`,
                kind: CRD.kind,
                metadata: { name },
              });
              predicted++;
            }
          }
        } else {
          await cluster.deleteCrd(CRD.group, CRD.plural);
          crd = false;
        }
        break;
      case 'revoke':
        // Unreadable or unwritable meanwhile: nothing of that kind changes; given back, it converges.
        await cluster.setRules(account.role, rules(operation.resource));
        await sleep(operation.ms);
        await cluster.setRules(account.role, rules());
        break;
      case 'kill':
        await restart(operation.replica);
        break;
      case 'stop': {
        const labeller = replicas[operation.replica]!;
        if (!labeller.running) break;
        process.kill(labeller.pid, 'SIGSTOP');
        await sleep(operation.ms);
        process.kill(labeller.pid, 'SIGCONT');
        break;
      }
      case 'drop':
        proxy.drop();
        break;
      case 'delay':
        proxy.delay(operation.delayMs);
        await sleep(operation.ms);
        proxy.delay(0);
        break;
      case 'reload-invalid':
        // Rejected: the config in force stays; then it is written back, so a restart finds a valid one.
        writeFileSync(configPath, 'labels: [unclosed\n');
        await sleep(operation.ms);
        writeConfig();
        break;
      case 'source-gone':
        // Unreadable: its last good content stays; then back with the content in use.
        await cluster.delete(`/api/v1/namespaces/${sourceNs}/configmaps/teams`).catch(() => {});
        await sleep(operation.ms);
        await writeSource(Object.fromEntries(source));
        refused.cc = false;
        // Held keys stay held: the content written back is the oracle's last good, which the
        // process that holds them never read; it reads it now and takes it (same keys).
        predict(() => held.delete('cc'));
        break;
      case 'restart-apiserver':
        await cp.stopApiServer();
        await sleep(operation.ms);
        await cp.startApiServer();
        restarts++;
        break;
      case 'pause':
        await sleep(operation.ms);
        break;
    }
  };

  try {
    await settle(cluster, namespaces, world, CONVERGE_MS);
    for (const operation of operations) {
      const ns = 'ns' in operation ? namespaces[operation.ns]! : '';
      // Through an API server restart the operation is tried again until it goes through.
      await retrying(() => perform(operation, ns));
    }
    const ended = Date.now();
    const wrong = await settle(cluster, namespaces, world, CONVERGE_MS);
    if (wrong.length > 0) {
      violations.push({
        invariant: 'convergence',
        detail: `not as the oracle says ${CONVERGE_MS / 1000} s after the last operation: ${
          wrong.slice(0, 10).join('; ')
        }`,
      });
    } else convergedSeconds = (Date.now() - ended) / 1000;
    // Converged, every replica is ready again (a standby is ready too), whatever it went through.
    for (const [i, port] of probePorts.entries()) {
      const ready = await eventually(async () => (await readyz(port))?.ready, 'ready', 30_000).catch(() => false);
      if (!ready) {
        const last = await readyz(port);
        violations.push({
          invariant: 'health',
          detail: `replica ${i} not ready at the end: ${last?.text ?? 'no answer'}`,
        });
      }
    }
  } finally {
    sampling = false;
    await sampler;
    for (const [i, labeller] of replicas.entries()) {
      const exit = await labeller.stop('SIGTERM', 30_000);
      if (exit.code !== 0 || crashed(labeller.stderr)) {
        violations.push({
          invariant: 'health',
          detail: `replica ${i} exited ${describeExit(exit)} (whole log: ${keepLog(seed, i, labeller)}): ${
            labeller.stderr.slice(-2000)
          }`,
        });
      }
    }
    violations.push(...(await leftLeases(cluster, sourceNs)));
    patches = auditEvents(cp.auditLog, (e) =>
      byLabeller(e) && e.verb === 'patch' && namespaces.includes(e.objectRef?.namespace ?? '') &&
      (e.responseStatus?.code ?? 0) < 300).length;
    if (crd) {
      await cluster.deleteCrd(CRD.group, CRD.plural).catch(() => {});
    }
    await catalog.close();
    await proxy.close();
    await cluster.close();
  }
  const bound = 2 * predicted + 30 * (restarts + 1);
  if (patches > bound) {
    violations.push({
      invariant: 'bounded writes',
      detail: `${patches} PATCHes, more than 2 × ${predicted} predicted changes + ${30 * (restarts + 1)}`,
    });
  }
  if (peakRssMiB > MAX_RSS_MIB) {
    violations.push({ invariant: 'health', detail: `peak RSS ${peakRssMiB.toFixed(0)} MiB` });
  }
  log(
    `seed ${seed}: ${
      operations.filter((o) => o.op !== 'pause').length
    } operations, ${patches} PATCHes (${predicted} changes predicted), ${restarts} restarts, converged ${
      convergedSeconds?.toFixed(1) ?? '-'
    } s after the last, peak RSS ${peakRssMiB.toFixed(0)} MiB, ${violations.length} violations`,
  );
  return { seed, operations, violations, patches, predicted, convergedSeconds, peakRssMiB, restarts };
}

/** A replica's /readyz: undefined when it does not answer within a second (stopped, exited). */
async function readyz(port: number): Promise<{ ready: boolean; text: string } | undefined> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(1000) });
    return { ready: response.ok, text: await response.text() };
  } catch {
    return undefined;
  }
}

/**
 * Leases in labeller's namespace other than its group's own once both replicas have stopped:
 * the leader-election Lease, the guard's and the sources' memory stay by design.
 */
async function leftLeases(cluster: Cluster, namespace: string): Promise<Violation[]> {
  const own = new Set(['labeller', 'labeller-field-manager', 'labeller-sources']);
  const leases = await cluster.get<{ items: { metadata: { name: string } }[] }>(
    `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`,
  );
  const left = leases.items.map((lease) => lease.metadata.name).filter((name) => !own.has(name));
  return left.length === 0 ? [] : [{ invariant: 'health', detail: `Leases left behind: ${left.join(', ')}` }];
}

/** Waits until every object carries exactly the oracle's labels; answers what is still wrong after `timeoutMs`. */
async function settle(
  cluster: Cluster,
  namespaces: readonly string[],
  world: () => WorldState,
  timeoutMs: number,
): Promise<string[]> {
  let wrong: string[] = [];
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline;) {
    try {
      const sample = await snapshot(cluster, namespaces);
      wrong = [...sample.objects].flatMap(([key, { labels }]) => {
        const want = expected(world(), key, INTRUDER);
        return matches(labels, want) ? [] : [`${key}: ${JSON.stringify(labels)}, wanted ${JSON.stringify(want)}`];
      });
      if (wrong.length === 0) return [];
    } catch {
      // The API server restarting: try again.
    }
    await sleep(1000);
  }
  return wrong;
}

/** Keys that disappeared between two samples from an object that still exists, while wanted throughout the grace. */
function stripped(
  before: Sample,
  after: Sample,
  history: readonly { at: number; wanted: Map<string, Record<string, string>> }[],
): Violation[] {
  const violations: Violation[] = [];
  for (const [key, now] of after.objects) {
    const then = before.objects.get(key);
    if (!then || then.uid !== now.uid) continue;
    const ns = key.split('/')[1]!;
    for (const label of Object.keys(then.labels)) {
      if (label in now.labels) continue;
      const window = history.filter((h, i) =>
        h.at >= after.at - GRACE_MS || history[i + 1] === undefined || history[i + 1]!.at >= after.at - GRACE_MS
      );
      if (window.every((h) => label in (h.wanted.get(ns) ?? {}))) {
        violations.push({
          invariant: 'never strip',
          detail: `${label} removed from ${key} at ${
            new Date(after.at).toISOString()
          } while the config wanted it throughout the last ${GRACE_MS / 1000} s`,
        });
      }
    }
  }
  return violations;
}

async function snapshot(cluster: Cluster, namespaces: readonly string[]): Promise<Sample> {
  const at = Date.now();
  const objects = new Map<string, { uid: string; labels: Record<string, string> }>();
  for (const ns of namespaces) {
    for (const kind of KINDS) {
      type List = {
        items: {
          metadata: { name: string; uid: string; labels?: Record<string, string>; deletionTimestamp?: string };
        }[];
      };
      // A kind whose CRD is not installed has no objects.
      const list = await cluster.get<List>(kind.path(ns)).catch((error: unknown) => {
        if ('optional' in kind && isNotFound(error)) return { items: [] };
        throw error;
      });
      for (const { metadata } of list.items) {
        // On its way out: labelled no more, and not the oracle's business.
        if (metadata.deletionTimestamp) continue;
        const labels = Object.fromEntries(
          Object.entries(metadata.labels ?? {}).filter(([k]) => k.startsWith(`${DOMAIN}/`)),
        );
        objects.set(`${kind.name}/${ns}/${metadata.name}`, { uid: metadata.uid, labels });
      }
    }
  }
  return { at, objects };
}

function sourceMap(namespace: string, document: unknown): object {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'teams', namespace },
    data: { 'teams.yaml': JSON.stringify(document) },
  };
}

/** kinds.yaml for `config`: written by the harness, read only by labeller. */
function configYaml(config: ConfigState, namespaces: readonly string[], sourceNs: string, catalog: Catalog): string {
  const labels: Record<string, string> = {};
  if (config.static) labels[KEYS.static] = 'on';
  if (config.team) labels[KEYS.team] = '{{namespace.labels.team}}';
  if (config.cc) labels[KEYS.cc] = '{{teams[namespace.labels.team]}}';
  if (config.site) labels[KEYS.site] = '{{sites[namespace.labels.team]}}';
  return dump({
    sources: {
      teams: { configMap: { namespace: sourceNs, name: 'teams', key: 'teams.yaml' } },
      sites: {
        url: catalog.url,
        interval: '1s',
        timeout: '2s',
        caFile: catalog.caFile,
        bearerTokenFile: catalog.tokenFile,
        maxBytes: CATALOG_MAX_BYTES,
      },
    },
    labels,
    kinds: ['configmaps', 'deployments', 'replicasets', 'pods', `${CRD.plural}.${CRD.group}`].map((resource) => ({
      resource,
      namespaces,
    })),
  });
}

function deployment(name: string, replicas: number): object {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: {
      replicas,
      selector: { matchLabels: { app: name } },
      template: {
        metadata: { labels: { app: name } },
        spec: { containers: [{ name, image: 'registry.k8s.io/pause:3.10' }] },
      },
    },
  };
}

/** Runs `operation` until it goes through (an API server restarting refuses it for a while): a minute at most. */
async function retrying(operation: () => Promise<void>): Promise<void> {
  for (const deadline = Date.now() + 60_000;;) {
    try {
      return await operation();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await sleep(1000);
    }
  }
}

/**
 * Writes a replica's whole output (its arguments, then stderr) beside the run's operations file;
 * answers the path. A health violation's detail quotes only the end of it.
 */
function keepLog(seed: number, replica: number, labeller: Labeller): string {
  const file = join(tmpdir(), `labeller-chaos-seed-${seed}-replica-${replica}-${labeller.pid}.log`);
  writeFileSync(file, labeller.stderr);
  return file;
}
