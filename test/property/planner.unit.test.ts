// Model-based property tests of the ownership planner (src/labelling/reconcile.ts). Random
// sequences of what happens to one object (creates, with and without the user's labels and
// labeller's admission policies; other field managers' applies and updates; changes of the
// config) each followed by the PRODUCT's reconcile, through its MetadataClient port, against an
// in-memory server-side apply simulator written here (ApiServer). What the reconcile left is
// checked against a small reference model, also written here from the docs
// (docs/configuration.md#conflicts-force-or-skip, docs/operations.md "Keys set at admission are
// labeller's"), not from the planner:
//
// - which keys are labeller's: those its field manager's Apply entry owns, and those a believed
//   marker lists at the value the object carries and that only the before-first-apply placeholder
//   owns (or, for a forced `!key=value` entry, only the create's entry);
// - which managers really own a key: every managedFields entry but labeller's Apply entry, the
//   placeholder ("no writer, and does not count"), and the create's entry's nominal claim on a key
//   the policy forced over the request's value.
//
// Properties, after every reconcile:
// 1. a wanted key carries its wanted value, but where labeller may not take it (skip);
// 2. a key of labeller's that the config dropped is gone, unless another manager really owns it;
// 3. a key that is not labeller's and that it may not take (skip and not protected, or not
//    wanted) keeps its value and its other owners;
// 4. a second reconcile over the result sends no write.
//
// Documented exceptions, encoded in the model: under `skip`, a key labeller shares with another
// manager at the old value may stay at that value when the config changes it (that manager set
// it too); a marker on an object whose managedFields are empty cannot be told from a forgery
// (docs/operations.md: "there only protection tells a forgery apart"), so the model believes it as
// the product does. Not modelled: templates reading related objects or sources (held keys), fights
// (no FightTracker: every contested key under force is retaken), the 256 KiB annotation limit.
//
// The first runs found three product bugs, fixed since: under `skip`, a key labeller shared with
// another manager whose value the config changed made every apply of the object fail (409); a
// dropped key labeller's apply shared with the before-first-apply placeholder stayed (for ever
// once its marker was rewritten); a key a policy forced stayed after it was dropped when labeller
// applied within the creation's second. `PLANNER_RUNS=20000` searches deeper.
//
// A `*.unit.test.ts` file, so that test/run.ts runs it with the unit tests (`npm run test:unit`).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import jsonpatch from 'fast-json-patch';
import type { ConflictPolicy, MetadataField } from '../../src/config/model.ts';
import { compileTemplate, type Template } from '../../src/config/template.ts';
import type { FieldsV1, ManagedFieldsEntry, PartialObjectMetadata } from '../../src/apimachinery/objects.ts';
import { type LabelledObject, projector, writtenOrder } from '../../src/labelling/object.ts';
import {
  type AppliedMetadata,
  type ApplyTarget,
  LabelConflict,
  type Metadata,
  type MetadataClient,
  ObjectChanged,
  ObjectGone,
} from '../../src/labelling/ports.ts';
import { Reconciler } from '../../src/labelling/reconcile.ts';
import { createLogger } from '../../src/util/log.ts';

const FIELDS: readonly MetadataField[] = ['labels', 'annotations'];
const LABELLER = 'labeller';
/** The manager the API server gives every field when the first apply finds managedFields empty. */
const BEFORE_FIRST_APPLY = 'before-first-apply';
/** labeller's markers (labelling/admitted.ts's format), written out: the model reads them on its own. */
const MARKER: Readonly<Record<MetadataField, string>> = {
  labels: 'labeller.io/admitted-labels.labeller',
  annotations: 'labeller.io/admitted-annotations.labeller',
};
// Few keys and values, so that managers collide on them; a `/` in a key exercises JSON Pointers,
// `,` `=` `%` in an annotation value the marker's escapes.
const KEYS: Readonly<Record<MetadataField, readonly string[]>> = {
  labels: ['team', 'tier', 'example.com/owner'],
  annotations: ['note', 'example.com/runbook'],
};
const VALUES: Readonly<Record<MetadataField, readonly string[]>> = {
  labels: ['a', 'b', ''],
  annotations: ['x', 'y,z=1%'],
};
/**
 * A key whose template admission cannot render (`owner.*`, `root.*`: docs/operations.md "Left to
 * the controller"): the policy leaves it out, so the controller writes it right after the create,
 * often within the creation's second. Its template here is a constant all the same.
 */
const CONTROLLER_ONLY = 'example.com/owner';
const CREATORS = ['kubectl-create', 'kube-controller-manager'] as const;
/** Updaters (PUT/PATCH); one is also a creator, whose write merges into the create's entry. */
const UPDATERS = ['kubectl-label', 'kube-controller-manager'] as const;
/** Appliers, each with or without force: a Helm-like one and a GitOps one. */
const APPLIERS = ['helm', 'argocd-controller'] as const;

type Pairs = Readonly<Record<string, string>>;
type Sets = Record<MetadataField, Set<string>>;

// ---- the server-side apply simulator ----------------------------------------------------------

/** A managedFields entry: what one manager owns of each map, per key. */
interface Entry {
  readonly manager: string;
  readonly operation: 'Apply' | 'Update';
  /** When it last changed the object; none for an Apply entry whose applies never changed a value. */
  time: number | undefined;
  /** Owns a field outside metadata (a Deployment's spec): the create's entry of such an object. */
  readonly spec: boolean;
  /** Written by the create: the create's entry while its time is still the creation time. */
  readonly create: boolean;
  readonly labels: Set<string>;
  readonly annotations: Set<string>;
}

interface Stored {
  readonly uid: string;
  /** creationTimestamp, ms (whole seconds). */
  readonly created: number;
  version: number;
  readonly labels: Map<string, string>;
  readonly annotations: Map<string, string>;
  entries: Entry[];
}

/** A 409 from server-side apply: keys another manager owns with another value. */
class Conflict extends Error {
  readonly owners: { readonly field: MetadataField; readonly key: string; readonly manager: string }[];
  constructor(owners: Conflict['owners']) {
    super(owners.map((o) => `conflict with "${o.manager}": .metadata.${o.field}.${o.key}`).join('; '));
    this.owners = owners;
  }
}

/** A 422 from a JSON Patch: a failed test or a removal of a missing key. */
class Invalid extends Error {
  readonly path: string;
  constructor(path: string) {
    super(`the patch failed at ${path}`);
    this.path = path;
  }
}

type JsonPatch = { readonly op: 'test'; readonly path: string; readonly value: string } | {
  readonly op: 'remove';
  readonly path: string;
};

const emptySets = (): Sets => ({ labels: new Set(), annotations: new Set() });
const owns = (entry: Entry): boolean => entry.spec || entry.labels.size > 0 || entry.annotations.size > 0;
/** Whole seconds, as the API server writes times. */
const iso = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

/**
 * One object's metadata.labels and metadata.annotations under server-side apply, as the API
 * server keeps them (structured-merge-diff): ownership per key per managedFields entry.
 * - Apply: the applier's entry becomes exactly the keys it sent; a key it sent whose value
 *   changes conflicts (409) with every other entry owning it, unless forced, which takes it from
 *   them; the same value is shared. A key it applied before and no longer sends is removed,
 *   unless another entry owns it. An apply finding managedFields empty first gives every key to
 *   before-first-apply.
 * - Update (PUT, PATCH, JSON Patch): the updater owns the keys whose value it added or changed,
 *   taken from the others; a removed key leaves every entry. Not tracked at all while
 *   managedFields are empty (until a first apply).
 * - Create: the creator's Update entry owns what the request carried, computed before admission,
 *   so what a mutating policy adds is owned by nobody.
 * An entry left owning nothing goes; resourceVersion moves on any change.
 */
class ApiServer {
  now = Date.parse('2026-11-28T10:00:00Z');
  object: Stored | undefined;
  #versions = 0;
  #uids = 0;

  tick(seconds: number): void {
    this.now += seconds * 1000;
  }

  create(creator: string, request: Readonly<Record<MetadataField, Pairs>>, spec: boolean, policy?: Config): void {
    const labels = new Map(Object.entries(request.labels));
    const annotations = new Map(Object.entries(request.annotations));
    const entry: Entry = {
      manager: creator,
      operation: 'Update',
      time: this.now,
      spec,
      create: true,
      labels: new Set(labels.keys()),
      annotations: new Set(annotations.keys()),
    };
    this.object = {
      uid: `uid-${++this.#uids}`,
      created: this.now,
      version: ++this.#versions,
      labels,
      annotations,
      entries: owns(entry) ? [entry] : [],
    };
    if (policy) admit(this.object, policy);
  }

  apply(manager: string, sent: Readonly<Record<MetadataField, Pairs>>, force: boolean, dryRun: boolean): Stored {
    const object = structuredClone(this.#live());
    if (object.entries.length === 0) {
      const placeholder: Entry = {
        manager: BEFORE_FIRST_APPLY,
        operation: 'Update',
        time: this.now,
        spec: false,
        create: false,
        labels: new Set(object.labels.keys()),
        annotations: new Set(object.annotations.keys()),
      };
      if (owns(placeholder)) object.entries.push(placeholder);
    }
    const mine = object.entries.find((e) => e.manager === manager && e.operation === 'Apply');
    const others = object.entries.filter((e) => e !== mine);
    const changed = emptySets();
    const removed = emptySets();
    for (const field of FIELDS) {
      for (const [key, value] of Object.entries(sent[field])) {
        if (object[field].get(key) !== value) changed[field].add(key);
      }
      for (const key of mine?.[field] ?? []) {
        if (!Object.hasOwn(sent[field], key) && !others.some((e) => e[field].has(key))) removed[field].add(key);
      }
    }
    const conflicts = others.flatMap((e) =>
      FIELDS.flatMap((field) =>
        [...e[field]].filter((key) => changed[field].has(key)).map((key) => ({ field, key, manager: e.manager }))
      )
    );
    if (conflicts.length > 0 && !force) throw new Conflict(conflicts);
    for (const e of others) disown(e, changed, removed);
    const entry = mine ?? this.#entry(object, manager, 'Apply');
    for (const field of FIELDS) {
      entry[field].clear();
      for (const key of Object.keys(sent[field])) entry[field].add(key);
      for (const key of changed[field]) object[field].set(key, sent[field][key]!);
      for (const key of removed[field]) object[field].delete(key);
    }
    // The API server stamps an apply's entry only when the object's values changed.
    if (FIELDS.some((field) => changed[field].size + removed[field].size > 0)) entry.time = this.now;
    object.entries = object.entries.filter(owns);
    return this.#commit(object, dryRun);
  }

  /** An Update setting (or, with undefined, removing) one key. */
  update(manager: string, field: MetadataField, key: string, value: string | undefined): void {
    const object = structuredClone(this.#live());
    if (value === undefined) object[field].delete(key);
    else object[field].set(key, value);
    this.#commit(this.#tracked(this.#live(), object, manager), false);
  }

  /** A JSON Patch of `test` and `remove` operations on metadata, as an Update; atomic. */
  patch(manager: string, operations: readonly JsonPatch[], dryRun: boolean): Stored {
    const live = this.#live();
    const object = structuredClone(live);
    for (const operation of operations) {
      if (operation.op === 'test') {
        const actual = operation.path === '/metadata/uid'
          ? object.uid
          : operation.path === '/metadata/resourceVersion'
          ? String(object.version)
          : undefined;
        if (actual !== operation.value) throw new Invalid(operation.path);
        continue;
      }
      const [, metadata, field, token, ...rest] = operation.path.split('/');
      if (metadata !== 'metadata' || (field !== 'labels' && field !== 'annotations') || !token || rest.length) {
        throw new Invalid(operation.path);
      }
      const key = token.replaceAll('~1', '/').replaceAll('~0', '~');
      if (!object[field].delete(key)) throw new Invalid(operation.path);
    }
    return this.#commit(this.#tracked(live, object, manager), dryRun);
  }

  /** `next`, with managedFields as an Update of `live` by `manager` leaves them. */
  #tracked(live: Stored, next: Stored, manager: string): Stored {
    if (next.entries.length === 0) return next;
    const changed = emptySets();
    const removed = emptySets();
    for (const field of FIELDS) {
      for (const [key, value] of next[field]) if (live[field].get(key) !== value) changed[field].add(key);
      for (const key of live[field].keys()) if (!next[field].has(key)) removed[field].add(key);
    }
    for (const e of next.entries) disown(e, changed, removed);
    if (FIELDS.some((field) => changed[field].size > 0)) {
      const entry = next.entries.find((e) => e.manager === manager && e.operation === 'Update') ??
        this.#entry(next, manager, 'Update');
      for (const field of FIELDS) for (const key of changed[field]) entry[field].add(key);
      entry.time = this.now;
    }
    next.entries = next.entries.filter(owns);
    return next;
  }

  #entry(object: Stored, manager: string, operation: Entry['operation']): Entry {
    const entry: Entry = { manager, operation, time: undefined, spec: false, create: false, ...emptySets() };
    object.entries.push(entry);
    return entry;
  }

  #commit(object: Stored, dryRun: boolean): Stored {
    if (dryRun) return object;
    if (state(object) !== state(this.#live())) {
      object.version = ++this.#versions;
      this.object = object;
    }
    return this.object!;
  }

  #live(): Stored {
    if (!this.object) throw new Error('no object yet');
    return this.object;
  }
}

function disown(entry: Entry, ...sets: readonly Sets[]): void {
  for (const set of sets) for (const field of FIELDS) for (const key of set[field]) entry[field].delete(key);
}

/** Values and managedFields, to tell whether a write changed anything. */
function state(object: Stored): string {
  const sorted = (set: Iterable<string>) => [...set].sort();
  return JSON.stringify([
    [...object.labels].sort(),
    [...object.annotations].sort(),
    object.entries.map((e) => [e.manager, e.operation, e.time, e.spec, sorted(e.labels), sorted(e.annotations)]),
  ]);
}

/**
 * labeller's MutatingAdmissionPolicy at CREATE (src/admission/policy.ts), constants only: each
 * configured key is set under `force` or when protected, else only when the request does not
 * carry it; the marker lists what was set, `!key=value` where it replaced another value the
 * request carried; CONTROLLER_ONLY is left out. managedFields are not touched: they were computed
 * before admission.
 */
function admit(object: Stored, config: Config): void {
  const request = { labels: new Map(object.labels), annotations: new Map(object.annotations) };
  for (const field of FIELDS) {
    const entries: string[] = [];
    for (const [key, value] of Object.entries(config[field]).sort(([a], [b]) => (a < b ? -1 : 1))) {
      const carried = request[field].get(key);
      const forces = config.conflicts === 'force' || (field === 'labels' && config.protect.includes(key));
      if ((!forces && carried !== undefined) || key === CONTROLLER_ONLY) continue;
      object[field].set(key, value);
      entries.push(`${carried !== undefined && carried !== value ? '!' : ''}${key}=${escape(field, value)}`);
    }
    if (entries.length > 0) object.annotations.set(MARKER[field], entries.join(','));
  }
}

const ESCAPED: readonly (readonly [string, string])[] = [['%', '%25'], [',', '%2C'], ['=', '%3D']];
function escape(field: MetadataField, value: string): string {
  return field === 'labels' ? value : ESCAPED.reduce((text, [char, code]) => text.replaceAll(char, code), value);
}
function unescape(field: MetadataField, value: string): string {
  return field === 'labels' ? value : value.replace(/%(25|2C|3D)/g, (code) => ESCAPED.find(([, c]) => c === code)![0]);
}

/** The object as the metadata API serves it. */
function served(object: Stored): PartialObjectMetadata {
  const fieldsV1 = (e: Entry): FieldsV1 => {
    const keys = (field: MetadataField) => Object.fromEntries([...e[field]].map((key) => [`f:${key}`, {}]));
    const metadata = Object.fromEntries(
      FIELDS.filter((field) => e[field].size > 0).map((field) => [`f:${field}`, keys(field)]),
    );
    return { 'f:metadata': metadata, ...(e.spec ? { 'f:spec': {} } : {}) };
  };
  const managedFields: ManagedFieldsEntry[] = object.entries.map((e) => ({
    manager: e.manager,
    operation: e.operation,
    apiVersion: 'v1',
    ...(e.time === undefined ? {} : { time: iso(e.time) }),
    fieldsType: 'FieldsV1',
    fieldsV1: fieldsV1(e),
  }));
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: 'web',
      namespace: 'shop',
      uid: object.uid,
      resourceVersion: String(object.version),
      creationTimestamp: iso(object.created),
      labels: Object.fromEntries(object.labels),
      annotations: Object.fromEntries(object.annotations),
      managedFields,
    },
  };
}

/** The MetadataClient port over the simulator, as kinds/metadataclient.ts speaks to the API server; counts writes. */
class SimulatedClient implements MetadataClient {
  /** Apply and JSON Patch requests that are not dry runs, failed ones included. */
  writes = 0;
  readonly #server: ApiServer;

  constructor(server: ApiServer) {
    this.#server = server;
  }

  async apply(
    target: ApplyTarget,
    metadata: Metadata,
    { force, dryRun, annotationKeys }: Parameters<MetadataClient['apply']>[2],
  ): Promise<AppliedMetadata> {
    if (!dryRun) this.writes++;
    this.#guard(target);
    try {
      return answer(this.#server.apply(LABELLER, metadata, force, dryRun), annotationKeys);
    } catch (error) {
      throw error instanceof Conflict ? new LabelConflict(error.message, error.owners) : error;
    }
  }

  async remove(
    target: ApplyTarget,
    version: string,
    keys: Parameters<MetadataClient['remove']>[2],
    { markers, dryRun, annotationKeys }: Parameters<MetadataClient['remove']>[3],
  ): Promise<AppliedMetadata> {
    if (!dryRun) this.writes++;
    const pointer = (field: MetadataField, key: string) => `/metadata/${field}/${jsonpatch.escapePathComponent(key)}`;
    const operations: JsonPatch[] = [
      { op: 'test', path: '/metadata/uid', value: target.uid },
      { op: 'test', path: '/metadata/resourceVersion', value: version },
      ...FIELDS.flatMap((field) => keys[field].map((key) => ({ op: 'remove' as const, path: pointer(field, key) }))),
      ...markers.map((field) => ({ op: 'remove' as const, path: pointer('annotations', MARKER[field]) })),
    ];
    try {
      return answer(this.#server.patch(LABELLER, operations, dryRun), annotationKeys);
    } catch (error) {
      if (!(error instanceof Invalid)) throw error;
      throw error.path === '/metadata/uid' ? new ObjectGone(error.message) : new ObjectChanged(error.message);
    }
  }

  async annotations(target: ApplyTarget, keys: readonly string[]): Promise<Readonly<Record<string, string>>> {
    return pick(this.#guard(target).annotations, keys);
  }

  #guard(target: ApplyTarget): Stored {
    const object = this.#server.object;
    if (!object || object.uid !== target.uid) throw new ObjectGone(`${target.name} is gone`);
    return object;
  }
}

function answer(object: Stored, annotationKeys: readonly string[]): AppliedMetadata {
  return {
    labels: Object.fromEntries(object.labels),
    annotations: pick(object.annotations, annotationKeys),
    resourceVersion: String(object.version),
  };
}

function pick(map: ReadonlyMap<string, string>, keys: readonly string[]): Record<string, string> {
  return Object.fromEntries(keys.flatMap((key) => (map.has(key) ? [[key, map.get(key)!]] : [])));
}

// ---- the reference model --------------------------------------------------------------------

/** kinds.yaml for one kind: constant labels and annotations, the conflict policy, protected labels. */
interface Config {
  readonly labels: Pairs;
  readonly annotations: Pairs;
  readonly conflicts: ConflictPolicy;
  readonly protect: readonly string[];
}

/** One map of the object as the model sees it. */
interface FieldView {
  readonly values: ReadonlyMap<string, string>;
  /** Keys that are labeller's (see the top of the file). */
  readonly labellers: ReadonlySet<string>;
  /** Per key, the entries (`manager/operation`) that really own it. */
  readonly others: ReadonlyMap<string, ReadonlySet<string>>;
}
type View = Readonly<Record<MetadataField, FieldView>>;

/** The marker's entries, read on the model's own: `key=value`, `!key=value` forced. */
function markerEntries(field: MetadataField, text: string): Map<string, { value: string; forced: boolean }> {
  const entries = new Map<string, { value: string; forced: boolean }>();
  for (const item of text.split(',')) {
    const forced = item.startsWith('!');
    const body = forced ? item.slice(1) : item;
    const at = body.indexOf('=');
    if (at > 0) entries.set(body.slice(0, at), { value: unescape(field, body.slice(at + 1)), forced });
  }
  return entries;
}

function view(object: Stored): View {
  // Known here by history (written by the create, not rewritten since), not by the product's time rule.
  const create = object.entries.find((e) => e.create && e.time === object.created);
  const owners = (field: MetadataField, key: string) => object.entries.filter((e) => e[field].has(key));
  /** Owned as a policy's write leaves it: by nobody but the placeholder (or the create's entry). */
  const asAdmitted = (field: MetadataField, key: string, createToo: boolean) =>
    owners(field, key).every((e) => e.manager === BEFORE_FIRST_APPLY || (createToo && e === create));
  const result: Partial<Record<MetadataField, FieldView>> = {};
  for (const field of FIELDS) {
    const values = object[field];
    const labellers = new Set(
      object.entries.filter((e) => e.manager === LABELLER && e.operation === 'Apply').flatMap((e) => [...e[field]]),
    );
    /** Keys the create's entry owns only because the policy forced its value over the request's. */
    const nominal = new Set<string>();
    const marker = object.annotations.get(MARKER[field]);
    // A marker anyone wrote since the create vouches for nothing.
    if (marker !== undefined && asAdmitted('annotations', MARKER[field], true)) {
      for (const [key, { value, forced }] of markerEntries(field, marker)) {
        if (values.get(key) !== value) continue;
        if (forced) nominal.add(key);
        if (!asAdmitted(field, key, forced)) continue;
        labellers.add(key);
      }
    }
    const others = new Map<string, Set<string>>();
    for (const key of values.keys()) {
      const all = owners(field, key);
      const real = all.filter((e) =>
        !(e.manager === LABELLER && e.operation === 'Apply') && e.manager !== BEFORE_FIRST_APPLY &&
        !(e === create && nominal.has(key))
      );
      if (real.length > 0) others.set(key, new Set(real.map((e) => `${e.manager}/${e.operation}`)));
    }
    result[field] = { values: new Map(values), labellers, others };
  }
  return result as View;
}

type Property = 1 | 2 | 3;
interface Violation {
  readonly property: Property;
  readonly field: MetadataField;
  readonly key: string;
  readonly message: string;
}

/** What the model says the reconcile from `before` to `after` under `config` broke, per property. */
function violations(before: View, after: View, config: Config): Violation[] {
  const found: Violation[] = [];
  const show = (value: string | undefined) => (value === undefined ? 'absent' : JSON.stringify(value));
  for (const field of FIELDS) {
    const was = before[field];
    const now = after[field];
    const keys = new Set([...was.values.keys(), ...now.values.keys(), ...Object.keys(config[field])]);
    for (const key of keys) {
      if (key === MARKER.labels || key === MARKER.annotations) continue;
      const want = Object.hasOwn(config[field], key) ? config[field][key] : undefined;
      const v = was.values.get(key);
      const v2 = now.values.get(key);
      const theirs = was.others.get(key) ?? new Set<string>();
      const ours = was.labellers.has(key);
      const takes = config.conflicts === 'force' || (field === 'labels' && config.protect.includes(key));
      const at = `${field} ${key}: was ${show(v)}${ours ? " (labeller's)" : ''}${
        theirs.size ? ` owned by ${[...theirs].join(', ')}` : ''
      }, now ${show(v2)}`;
      const kept = () => {
        if (v2 !== v) found.push({ field, key, property: 3, message: `${at}; not labeller's to change` });
        const lost = [...theirs].filter((owner) => !now.others.get(key)?.has(owner));
        if (lost.length > 0) {
          found.push({ field, key, property: 3, message: `${at}; ${lost.join(', ')} no longer own it` });
        }
      };
      if (want !== undefined) {
        if (v === undefined || v === want || (!ours && takes) || (ours && (takes || theirs.size === 0))) {
          if (v2 !== want) found.push({ field, key, property: 1, message: `${at}; wanted ${show(want)}` });
        } else if (ours) {
          // skip, shared at the old value with a manager that set it too: left to it, or changed.
          if (v2 !== v && v2 !== want) found.push({ field, key, property: 1, message: `${at}; wanted ${show(want)}` });
        } else kept();
      } else if (ours && theirs.size === 0) {
        if (v2 !== undefined) found.push({ field, key, property: 2, message: `${at}; dropped from the config` });
      } else if (ours) {
        if (v2 !== v) {
          found.push({ field, key, property: 3, message: `${at}; dropped, but shared with another manager` });
        }
      } else kept();
    }
  }
  return found;
}

// ---- operations -------------------------------------------------------------------------------

type Op =
  | {
    readonly op: 'create';
    readonly creator: string;
    readonly labels: Pairs;
    readonly annotations: Pairs;
    /** The request has fields outside metadata (else, without labels, its managedFields are empty). */
    readonly spec: boolean;
    /** labeller's admission policies are in force. */
    readonly admission: boolean;
    /** labeller's reconcile follows within the creation's second. */
    readonly sameSecond: boolean;
  }
  | {
    readonly op: 'apply';
    readonly manager: string;
    readonly labels: Pairs;
    readonly annotations: Pairs;
    readonly force: boolean;
  }
  | {
    readonly op: 'update';
    readonly manager: string;
    readonly field: MetadataField;
    readonly key: string;
    /** Absent: the key is removed (`kubectl label key-`). */
    readonly value?: string;
  }
  | { readonly op: 'want'; readonly field: MetadataField; readonly key: string; readonly value: string }
  | { readonly op: 'drop'; readonly field: MetadataField; readonly key: string }
  | { readonly op: 'conflicts'; readonly conflicts: ConflictPolicy }
  | { readonly op: 'protect'; readonly key: string; readonly on: boolean };

/** Performs `op`; answers the config in force after it. */
function perform(server: ApiServer, config: Config, op: Op): Config {
  switch (op.op) {
    case 'create': {
      const request = { labels: op.labels, annotations: op.annotations };
      server.create(op.creator, request, op.spec, op.admission ? config : undefined);
      return config;
    }
    case 'apply':
      try {
        server.apply(op.manager, { labels: op.labels, annotations: op.annotations }, op.force, false);
      } catch (error) {
        // Their 409: nothing changes.
        if (!(error instanceof Conflict)) throw error;
      }
      return config;
    case 'update':
      server.update(op.manager, op.field, op.key, op.value);
      return config;
    case 'want':
      return { ...config, [op.field]: { ...config[op.field], [op.key]: op.value } };
    case 'drop': {
      const { [op.key]: _, ...rest } = config[op.field];
      return { ...config, [op.field]: rest };
    }
    case 'conflicts':
      return { ...config, conflicts: op.conflicts };
    case 'protect':
      return {
        ...config,
        protect: op.on ? [...new Set([...config.protect, op.key])] : config.protect.filter((k) => k !== op.key),
      };
  }
}

const KIND = { apiVersion: 'v1', kind: 'ConfigMap', resource: 'configmaps', group: '' };
const SILENT = createLogger({ level: 'error', format: 'json', write: () => {} });

/** The product's reconcile of the object as its cache would hold it under `config`. */
async function reconcile(server: ApiServer, config: Config, client: SimulatedClient): Promise<void> {
  const templates = (field: MetadataField) =>
    new Map<string, Template>(Object.entries(config[field]).map(([key, value]) => [key, compileTemplate(value)]));
  const reconciler = new Reconciler({
    kind: KIND,
    labels: templates('labels'),
    annotations: templates('annotations'),
    conflicts: config.conflicts,
    protect: { labels: new Set(config.protect), annotations: new Set() },
    dryRun: false,
    client,
    log: SILENT,
  });
  const project = projector({ fieldManager: LABELLER, written: writtenOrder(Object.keys(config.annotations)) });
  const cached: LabelledObject = project(served(server.object!), 'shop/web', undefined);
  await reconciler.reconcile(cached);
}

type Check = Property | 4;

/**
 * Runs `ops` from `initial`, each followed by a reconcile and a second one; throws with the first
 * violation of `check` (the step, the operation, the config and what broke).
 */
async function run(initial: Config, ops: readonly Op[], check: Check): Promise<void> {
  const server = new ApiServer();
  let config = initial;
  for (const [step, op] of ops.entries()) {
    server.tick(5);
    config = perform(server, config, op);
    if (!(op.op === 'create' && op.sameSecond)) server.tick(5);
    const before = view(server.object!);
    const shown = JSON.stringify(served(server.object!).metadata);
    const client = new SimulatedClient(server);
    await reconcile(server, config, client);
    const context = () =>
      `after step ${step} (${JSON.stringify(op)}) under ${JSON.stringify(config)}\nobject before: ${shown}`;
    if (check !== 4) {
      const broken = violations(before, view(server.object!), config).filter((v) => v.property === check);
      if (broken.length > 0) {
        throw new Error(`property ${check}: ${broken.map((b) => b.message).join('; ')}\n${context()}`);
      }
    }
    // The controller looks again once its write shows up in the watch.
    server.tick(5);
    const first = client.writes;
    const again = view(server.object!);
    await reconcile(server, config, client);
    if (check === 4 && client.writes > first) {
      throw new Error(
        `property 4: a second reconcile wrote again (${client.writes - first} request(s)); ${
          describe(again, view(server.object!))
        }\n${context()}`,
      );
    }
  }
}

/** What changed between two views, for messages. */
function describe(before: View, after: View): string {
  const changes: string[] = [];
  for (const field of FIELDS) {
    const keys = new Set([...before[field].values.keys(), ...after[field].values.keys()]);
    for (const key of keys) {
      const [a, b] = [before[field].values.get(key), after[field].values.get(key)];
      if (a !== b) changes.push(`${field} ${key}: ${a ?? 'absent'} -> ${b ?? 'absent'}`);
    }
  }
  return changes.length > 0 ? changes.join(', ') : 'no value changed';
}

// ---- generators -------------------------------------------------------------------------------

const keyOf = (field: MetadataField) => fc.constantFrom(...KEYS[field]);
const valueOf = (field: MetadataField) => fc.constantFrom(...VALUES[field]);
const pairs = (field: MetadataField) => fc.dictionary(keyOf(field), valueOf(field), { noNullPrototype: true });
const eitherField = <T>(build: (field: MetadataField) => fc.Arbitrary<T>) =>
  fc.oneof(build('labels'), build('annotations'));

const config: fc.Arbitrary<Config> = fc.record({
  labels: pairs('labels'),
  annotations: pairs('annotations'),
  conflicts: fc.constantFrom<ConflictPolicy>('force', 'skip'),
  protect: fc.subarray([...KEYS.labels]),
});

/** Often nothing: a create with nothing but a name has empty managedFields, the rarest path otherwise. */
const requested = (field: MetadataField) => fc.oneof(fc.constant({}), pairs(field));
const create: fc.Arbitrary<Op> = fc.record({
  op: fc.constant('create' as const),
  creator: fc.constantFrom(...CREATORS),
  labels: requested('labels'),
  annotations: requested('annotations'),
  spec: fc.boolean(),
  admission: fc.oneof(fc.constant(true), fc.boolean()),
  sameSecond: fc.boolean(),
});

/** A marker someone else writes (a forgery, or a copy): entries of the pools' keys and values. */
const forgedMarker = (field: MetadataField) =>
  fc.array(fc.tuple(fc.boolean(), keyOf(field), valueOf(field)), { maxLength: 2 }).map((entries) =>
    entries.map(([forced, key, value]) => `${forced ? '!' : ''}${key}=${escape(field, value)}`).join(',')
  );

const op: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: create, weight: 1 },
  {
    arbitrary: fc.record({
      op: fc.constant('apply' as const),
      manager: fc.constantFrom(...APPLIERS),
      labels: pairs('labels'),
      annotations: pairs('annotations'),
      force: fc.boolean(),
    }),
    weight: 3,
  },
  {
    arbitrary: eitherField((field) =>
      fc.record(
        {
          op: fc.constant('update' as const),
          manager: fc.constantFrom(...UPDATERS),
          field: fc.constant(field),
          key: keyOf(field),
          value: valueOf(field),
        },
        { requiredKeys: ['op', 'manager', 'field', 'key'] },
      )
    ),
    weight: 3,
  },
  {
    arbitrary: eitherField((field) =>
      fc.record({
        op: fc.constant('update' as const),
        manager: fc.constantFrom(...UPDATERS),
        field: fc.constant('annotations' as const),
        key: fc.constant(MARKER[field]),
        value: forgedMarker(field),
      })
    ),
    weight: 1,
  },
  {
    arbitrary: eitherField((field) =>
      fc.record({
        op: fc.constant('want' as const),
        field: fc.constant(field),
        key: keyOf(field),
        value: valueOf(field),
      })
    ),
    weight: 3,
  },
  {
    arbitrary: eitherField((field) =>
      fc.record({ op: fc.constant('drop' as const), field: fc.constant(field), key: keyOf(field) })
    ),
    weight: 3,
  },
  {
    arbitrary: fc.record({
      op: fc.constant('conflicts' as const),
      conflicts: fc.constantFrom<ConflictPolicy>('force', 'skip'),
    }),
    weight: 1,
  },
  {
    arbitrary: fc.record({ op: fc.constant('protect' as const), key: keyOf('labels'), on: fc.boolean() }),
    weight: 1,
  },
);

/** A config, then a create and up to 11 more operations. */
const scenario = fc.tuple(config, create, fc.array(op, { maxLength: 11 }));

/** Runs per property: bounded for the unit tests; `PLANNER_RUNS=20000` searches deeper. */
const NUM_RUNS = Number(process.env['PLANNER_RUNS'] ?? 500);

async function holds(check: Check): Promise<void> {
  await fc.assert(
    fc.asyncProperty(scenario, ([initial, first, rest]) => run(initial, [first, ...rest], check)),
    { numRuns: NUM_RUNS },
  );
}

// ---- the properties ---------------------------------------------------------------------------

test('1. a wanted key carries its wanted value after a reconcile, unless labeller may not take it (skip)', () =>
  holds(1));

test("2. a key of labeller's that the config dropped is gone after a reconcile, unless another manager owns it", () =>
  holds(2));

test("3. a key that is not labeller's, and that it may not take, keeps its value and its owners", () => holds(3));

test('4. a second reconcile over the result sends no write', () => holds(4));

// ---- the findings of the first runs, as fixed sequences --------------------------------------

const bare = (over: Partial<Extract<Op, { op: 'create' }>> = {}): Op => ({
  op: 'create',
  creator: 'kubectl-create',
  labels: {},
  annotations: {},
  spec: true,
  admission: false,
  sameSecond: false,
  ...over,
});
const settings = (over: Partial<Config>): Config => ({
  labels: {},
  annotations: {},
  conflicts: 'force',
  protect: [],
  ...over,
});
const FINDINGS: readonly { readonly name: string; readonly config: Config; readonly ops: readonly Op[] }[] = [
  {
    name: 'skip: a protected key shared with helm, its value changed, is taken',
    config: settings({ labels: { team: 'a' }, conflicts: 'skip', protect: ['team'] }),
    ops: [
      bare(),
      { op: 'apply', manager: 'helm', labels: { team: 'a' }, annotations: {}, force: false },
      { op: 'want', field: 'labels', key: 'team', value: 'b' },
    ],
  },
  {
    name: 'skip: a key shared with helm, its value changed, is left to helm, and the rest is written',
    config: settings({ labels: { team: 'a', tier: 'b' }, conflicts: 'skip' }),
    ops: [
      bare(),
      { op: 'apply', manager: 'helm', labels: { team: 'a' }, annotations: {}, force: false },
      { op: 'want', field: 'labels', key: 'team', value: 'b' },
      { op: 'drop', field: 'labels', key: 'tier' },
      { op: 'want', field: 'annotations', key: 'note', value: 'x' },
    ],
  },
  {
    name: 'skip: a key shared with before-first-apply alone, its value changed, is taken',
    config: settings({ labels: { [CONTROLLER_ONLY]: 'a', tier: 'a' }, conflicts: 'skip' }),
    ops: [bare({ spec: false, admission: true }), { op: 'want', field: 'labels', key: 'tier', value: 'b' }],
  },
  {
    name: 'a dropped key shared with before-first-apply alone goes in one write',
    config: settings({ labels: { [CONTROLLER_ONLY]: 'a' }, annotations: { note: 'x' } }),
    ops: [bare({ spec: false, admission: true }), { op: 'drop', field: 'annotations', key: 'note' }],
  },
  {
    name: 'a dropped key shared with before-first-apply alone goes, its marker rewritten by a tenant',
    config: settings({ labels: { [CONTROLLER_ONLY]: 'a' }, annotations: { note: 'x' } }),
    ops: [
      bare({ spec: false, admission: true }),
      { op: 'update', manager: 'kubectl-label', field: 'annotations', key: MARKER.annotations, value: '' },
      { op: 'drop', field: 'annotations', key: 'note' },
    ],
  },
  {
    name: "a key a policy forced goes when dropped, though labeller applied within the creation's second",
    config: settings({ labels: { [CONTROLLER_ONLY]: 'a', team: 'a' } }),
    ops: [
      bare({ labels: { team: 'mine' }, admission: true, sameSecond: true }),
      { op: 'drop', field: 'labels', key: 'team' },
    ],
  },
];

for (const { name, config, ops } of FINDINGS) {
  test(`finding: ${name}`, async () => {
    for (const check of [1, 2, 3, 4] as const) await run(config, ops, check);
  });
}

// ---- the simulator itself, against what the API server is known to do --------------------------

test('simulator: apply conflicts, shares, forces, prunes; before-first-apply; untracked updates', () => {
  const server = new ApiServer();
  // A function, so that assertions on one read do not narrow the next.
  const owners = () => server.object!.entries.map((e) => `${e.manager}/${e.operation}: ${[...e.labels].join(' ')}`);
  server.create('kubectl-create', { labels: {}, annotations: {} }, false);
  // Updates before any apply leave no trace in managedFields.
  server.update('kubectl-label', 'labels', 'team', 'a');
  assert.deepEqual(owners(), []);
  // The first apply hands what is there to the placeholder; the same value is shared.
  server.apply('helm', { labels: { team: 'a', tier: 'x' }, annotations: {} }, false, false);
  assert.deepEqual(owners(), [`${BEFORE_FIRST_APPLY}/Update: team`, 'helm/Apply: team tier']);
  assert.throws(
    () => server.apply(LABELLER, { labels: { team: 'b' }, annotations: {} }, false, false),
    (error: unknown) =>
      error instanceof Conflict && error.owners.map((o) => o.manager).join() === `${BEFORE_FIRST_APPLY},helm`,
  );
  server.apply(LABELLER, { labels: { team: 'b' }, annotations: {} }, true, false);
  assert.deepEqual(owners(), ['helm/Apply: tier', `${LABELLER}/Apply: team`]);
  // Dropped by its only owner: removed; an Update takes a key from its applier.
  server.apply('helm', { labels: {}, annotations: {} }, false, false);
  assert.deepEqual([...server.object!.labels], [['team', 'b']]);
  server.update('kubectl-label', 'labels', 'team', 'c');
  assert.deepEqual(owners(), ['kubectl-label/Update: team']);
  // A JSON Patch is guarded by its tests and fails as a whole.
  const version = String(server.object!.version);
  assert.throws(() => server.patch(LABELLER, [{ op: 'remove', path: '/metadata/labels/nope' }], false), Invalid);
  server.patch(LABELLER, [{ op: 'test', path: '/metadata/resourceVersion', value: version }, {
    op: 'remove',
    path: '/metadata/labels/team',
  }], false);
  assert.deepEqual([server.object!.labels.size, owners()], [0, []]);
});

test('simulator: admission sets keys after managedFields were computed, and marks them', () => {
  const server = new ApiServer();
  const policy: Config = {
    labels: { team: 'a', tier: 'b' },
    annotations: { note: 'y,z=1%' },
    conflicts: 'skip',
    protect: ['tier'],
  };
  server.create('kubectl-create', { labels: { team: 'mine', tier: 'mine' }, annotations: {} }, true, policy);
  const object = server.object!;
  assert.deepEqual(Object.fromEntries(object.labels), { team: 'mine', tier: 'b' });
  assert.deepEqual(Object.fromEntries(object.annotations), {
    note: 'y,z=1%',
    [MARKER.labels]: '!tier=b',
    [MARKER.annotations]: 'note=y%2Cz%3D1%25',
  });
  assert.deepEqual(object.entries.map((e) => [e.manager, [...e.labels], [...e.annotations]]), [[
    'kubectl-create',
    ['team', 'tier'],
    [],
  ]]);
  const model = view(object);
  assert.deepEqual([[...model.labels.labellers], [...model.annotations.labellers]], [['tier'], ['note']]);
  assert.deepEqual([...model.labels.others.keys()], ['team'], "the creator's claim on a forced key is nominal");
});
