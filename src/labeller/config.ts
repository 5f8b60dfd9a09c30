/**
 * The labeller configuration: kinds.yaml, overlaid with command-line flags.
 *
 *   labels:                        # optional: labels for every kind, constants or templates ("{{name}}")
 *     app.kubernetes.io/managed-by: labeller
 *   annotations:                   # optional: annotations for every kind, with the same templates
 *     example.com/runbook: "https://runbooks.example.com/{{namespace}}"
 *   conflicts: force               # optional: force | skip a label another manager owns; default force
 *   allowProtectedPrefixes: false  # optional: let {{labels.x}}/{{annotations.x}} fill kubernetes.io and k8s.io keys
 *   ownerKinds: [rollouts.argoproj.io]  # optional: owner kinds that owner and root templates follow beyond the workload chain
 *   sources: {teams: {configMap: …}}     # optional: sources of truth templates look values up in (sourcesconfig.ts)
 *   kinds:                         # required unless --kinds is given: at least one entry
 *     - resource: deployments      # required: kubectl-style (deploy, Deployment, deployments.apps, Deployment.v1.apps)
 *       namespaces: [default]      # optional: namespace names; absent = all namespaces
 *       selector: "app in (web)"   # optional: label selector
 *       labels: {tier: backend}    # optional: merged over the global labels; null drops a global label
 *       annotations: {…}           # optional: merged over the global annotations, as labels are
 *       conflicts: skip            # optional: overrides the global policy
 *     - resource: "*"              # every kind discovery reports with list, watch and patch (everykindconfig.ts)
 *       scope: namespaced          # only here: namespaced (default) | cluster | all
 *       exclude: [secrets]         # only here: kinds left out, besides the default exclusions
 *
 * Precedence: flags override the file's global settings, which override the
 * defaults; a kind's own settings win over both because they are more specific.
 * --kinds replaces the file's kinds, keeping the file's settings for the kinds
 * it names (matched by the exact resource string, so `--kinds '*'` keeps the file's "*" entry).
 * A kind listed explicitly replaces the every-kind entry for its resource.
 *
 * Over 300 lines: the schema, its validation and the messages that point at the field to fix
 * are one document, read together.
 */
import { Buffer } from 'node:buffer';
import { loadAll, YAMLException } from 'js-yaml';
import { isDns1123Label } from '../kube/names.ts';
import type { Selector } from '../kube/selector.ts';
import { parseSelector, SelectorError } from '../kube/selector.ts';
import { validateAnnotationKey, validateLabelKey, validateLabelValue } from './labels.ts';
import type { Template } from './template.ts';
import { compileTemplate, TemplateError } from './template.ts';
import type { SourceSpec } from './sources.ts';
import { parseSources } from './sourcesconfig.ts';
import {
  EVERY_KIND,
  EVERY_KIND_FIELDS,
  type EveryKindConfig,
  everyKindConfig,
  type EveryKindFields,
  parseEveryKindFields,
} from './everykindconfig.ts';
import {
  ConfigError,
  describe,
  expectList,
  expectMapping,
  expectString,
  fail,
  isAbsent,
  keyPath,
  rejectUnknownFields,
} from './configfields.ts';

/** What to do when another field manager owns a label: take it over (force) or leave it (skip). */
export type ConflictPolicy = 'force' | 'skip';

/** The two maps of an object's metadata labeller writes keys of. */
export type MetadataField = 'labels' | 'annotations';

/** The API server's limit on the total size of an object's annotations, keys and values (apimachinery's TotalAnnotationSizeLimitB). */
export const ANNOTATIONS_MAX_BYTES = 256 * 1024;

export interface KindConfig {
  /** Where the entry came from, for messages: 'kinds.yaml: kinds[0]' or '--kinds "secrets"'. */
  readonly where: string;
  /** As the user wrote it; discovery resolves it to an API resource. */
  readonly resource: string;
  /** Empty means all namespaces. */
  readonly namespaces: readonly string[];
  readonly selector: Selector | undefined;
  /** The effective labels: the global ones merged with the kind's own. */
  readonly labels: ReadonlyMap<string, Template>;
  /** The effective annotations, merged as labels are. */
  readonly annotations: ReadonlyMap<string, Template>;
  readonly conflicts: ConflictPolicy;
}

/** Every template a kind renders, labels' and annotations'. */
export function templatesOf(kind: Pick<KindConfig, MetadataField>): Template[] {
  return [...kind.labels.values(), ...kind.annotations.values()];
}

export interface Config {
  /** The kinds listed by name (may be empty when everyKind is set). */
  readonly kinds: readonly KindConfig[];
  /** The `resource: "*"` entry: every kind discovery serves, besides those listed by name. */
  readonly everyKind?: EveryKindConfig | undefined;
  /**
   * Owner kinds (kubectl-style names) that owner.* and root.* follow besides the built-in
   * workload chain; an ownerReference to any other kind is not followed.
   */
  readonly ownerKinds: readonly string[];
  /** The sources of truth templates look values up in, by name. */
  readonly sources: ReadonlyMap<string, SourceSpec>;
}

/** A validated config file, before flags and defaults apply. */
export interface FileConfig {
  readonly labels: ReadonlyMap<string, Template>;
  readonly annotations: ReadonlyMap<string, Template>;
  readonly conflicts: ConflictPolicy | undefined;
  /** Undefined when the file lists no kinds, leaving them to --kinds. */
  readonly kinds: readonly KindEntry[] | undefined;
  /** Whether the object's labels and annotations may be copied into kubernetes.io and k8s.io keys. */
  readonly allowProtectedPrefixes: boolean;
  readonly ownerKinds: readonly string[];
  readonly sources: ReadonlyMap<string, SourceSpec>;
}

/** A kind as listed in the file or in --kinds, before global settings and defaults apply. */
export interface KindEntry extends EveryKindFields {
  /** Where the entry came from, for messages: 'kinds.yaml: kinds[0]' or '--kinds "secrets"'. */
  readonly where: string;
  readonly resource: string;
  readonly namespaces: readonly string[] | undefined;
  readonly selector: Selector | undefined;
  /** A null template drops the global label with that key. */
  readonly labels: ReadonlyMap<string, Template | null>;
  readonly annotations: ReadonlyMap<string, Template | null>;
  readonly conflicts: ConflictPolicy | undefined;
}

/** Everything the command line knows; the flags are undefined when not given. */
export interface ConfigInput {
  readonly file?: { readonly text: string; readonly source: string } | undefined;
  /** --kinds: replaces the file's kinds. */
  readonly kinds?: readonly string[] | undefined;
  /** --exclude-kinds: added to the every-kind entry's exclude. */
  readonly excludeKinds?: readonly string[] | undefined;
  /** --label key=value (see parseLabelFlag): overrides the file's global labels. */
  readonly labels?: Readonly<Record<string, string>> | undefined;
  /** --annotation key=value: overrides the file's global annotations. */
  readonly annotations?: Readonly<Record<string, string>> | undefined;
  /** --namespace: for kinds without namespaces of their own. */
  readonly namespaces?: readonly string[] | undefined;
  /** --selector: for kinds without a selector of their own. */
  readonly selector?: string | undefined;
  /** --conflicts: overrides the file's global policy. */
  readonly conflicts?: ConflictPolicy | undefined;
  /** False for `labeller prune`, which needs the kinds but no labels. */
  readonly requireLabels?: boolean | undefined;
}

const CONFLICT_POLICIES: readonly ConflictPolicy[] = ['force', 'skip'];
const DEFAULT_CONFLICT_POLICY: ConflictPolicy = 'force';
const FILE_FIELDS = ['labels', 'annotations', 'conflicts', 'kinds', 'allowProtectedPrefixes', 'ownerKinds', 'sources'];
/** Label prefixes reserved for Kubernetes, which admission (NodeRestriction, policies) guards. */
const PROTECTED_DOMAINS = ['kubernetes.io', 'k8s.io'];
const KIND_FIELDS = ['resource', 'namespaces', 'selector', 'labels', 'annotations', 'conflicts'];
// Syntax only: whether the name exists is for discovery to say.
const RESOURCE_PATTERN = /^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?$/;

/** Splits a --label flag at its first "=". */
export const parseLabelFlag = keyValueFlag('label', 'tier=backend');
/** Splits an --annotation flag at its first "=". */
export const parseAnnotationFlag = keyValueFlag('annotation', 'example.com/owner=team-a');

function keyValueFlag(name: string, example: string): (flag: string) => readonly [key: string, value: string] {
  return (flag) => {
    const separator = flag.indexOf('=');
    if (separator < 1) {
      throw new ConfigError(`--${name} ${JSON.stringify(flag)}: expected key=value, e.g. --${name} ${example}`);
    }
    return [flag.slice(0, separator), flag.slice(separator + 1)];
  };
}

export function buildConfig(input: ConfigInput): Config {
  const file = input.file === undefined ? undefined : parseConfig(input.file.text, input.file.source);
  const remedy = (field: string) =>
    input.file === undefined ? '--config kinds.yaml' : `add "${field}:" to ${input.file.source}`;

  const rules: Rules = {
    sources: new Set(file?.sources.keys()),
    allowProtected: file?.allowProtectedPrefixes ?? false,
    optIn: 'in the --config file',
  };
  const flagged = (field: MetadataField, fromFile: ReadonlyMap<string, Template> | undefined) => {
    const merged = new Map(fromFile);
    const flag = field === 'labels' ? 'label' : 'annotation';
    for (const [key, value] of Object.entries(input[field] ?? {})) {
      merged.set(key, compileEntry(field, key, value, `--${flag} ${JSON.stringify(`${key}=${value}`)}`, rules));
    }
    return merged;
  };
  const global = { labels: flagged('labels', file?.labels), annotations: flagged('annotations', file?.annotations) };
  const namespaces = input.namespaces === undefined ? [] : namespaceList(input.namespaces, () => '--namespace');
  const selectorFlag = input.selector;
  const selector = selectorFlag === undefined ? undefined : within('--selector', () => parseSelector(selectorFlag));
  const conflicts = input.conflicts ?? file?.conflicts ?? DEFAULT_CONFLICT_POLICY;

  const entries = input.kinds === undefined ? (file?.kinds ?? []) : kindsFromFlag(input.kinds, file?.kinds ?? []);
  if (entries.length === 0) {
    throw new ConfigError(`no kinds configured: pass --kinds deployments,services or ${remedy('kinds')}`);
  }
  const merged = entries.map((entry) => ({
    entry,
    labels: mergeEntries(global.labels, entry, 'labels'),
    annotations: mergeEntries(global.annotations, entry, 'annotations'),
  }));
  const writes = ({ labels, annotations }: (typeof merged)[number]) => labels.size + annotations.size > 0;
  if (input.requireLabels !== false && !merged.some(writes)) {
    throw new ConfigError(
      `no labels configured: pass --label app.kubernetes.io/managed-by=labeller or ${remedy('labels')}`,
    );
  }
  const unlabelled = merged.find((kind) => !writes(kind));
  if (input.requireLabels !== false && unlabelled !== undefined) {
    throw fail(
      unlabelled.entry.where,
      'no labels or annotations to apply: give this kind labels of its own or keep a global one',
    );
  }
  for (const { entry, annotations } of merged) checkAnnotationsSize(annotations, entry.where);
  const kinds = merged.map(({ entry, labels, annotations }) => ({
    where: entry.where,
    resource: entry.resource,
    namespaces: entry.namespaces ?? namespaces,
    selector: entry.selector ?? selector,
    labels,
    annotations,
    conflicts: entry.conflicts ?? conflicts,
  }));
  const every = merged.findIndex(({ entry }) => entry.resource === EVERY_KIND);
  return {
    ownerKinds: file?.ownerKinds ?? [],
    sources: file?.sources ?? new Map(),
    kinds: kinds.filter((kind) => kind.resource !== EVERY_KIND),
    everyKind: everyKindConfig(
      every === -1 ? undefined : [merged[every]!.entry, kinds[every]!],
      input.excludeKinds,
      resourceProblem,
    ),
  };
}

/** Parses and validates a config file; `source` names it in messages. */
export function parseConfig(text: string, source: string): FileConfig {
  const document = loadDocument(text, source);
  if (isAbsent(document)) {
    return {
      labels: new Map(),
      annotations: new Map(),
      conflicts: undefined,
      kinds: undefined,
      allowProtectedPrefixes: false,
      ownerKinds: [],
      sources: new Map(),
    };
  }
  const fields = expectMapping(document, source, 'a mapping with "labels:" and "kinds:"');
  rejectUnknownFields(fields, FILE_FIELDS, source);
  const allowProtectedPrefixes = parseBoolean(fields.allowProtectedPrefixes, `${source}: allowProtectedPrefixes`) ??
    false;
  const sources = parseSources(fields.sources, `${source}: sources`);
  const rules: Rules = {
    sources: new Set(sources.keys()),
    allowProtected: allowProtectedPrefixes,
    optIn: `at the top of ${source}`,
  };
  const global = (field: MetadataField) => {
    const compiled = new Map<string, Template>();
    for (const [key, value, where] of metadataEntries(fields[field], `${source}: ${field}`, field)) {
      if (value === null) {
        throw fail(
          where,
          `null drops a global ${
            singular(field)
          }, so it belongs in a kind's ${field}: give a value here or remove the entry`,
        );
      }
      compiled.set(key, compileEntry(field, key, expectString(value, where), where, rules));
    }
    return compiled;
  };
  return {
    labels: global('labels'),
    annotations: global('annotations'),
    conflicts: parseConflicts(fields.conflicts, `${source}: conflicts`),
    kinds: parseKinds(fields.kinds, `${source}: kinds`, rules),
    allowProtectedPrefixes,
    ownerKinds: parseOwnerKinds(fields.ownerKinds, `${source}: ownerKinds`),
    sources,
  };
}

function loadDocument(text: string, source: string): unknown {
  let documents: unknown[];
  try {
    documents = loadAll(text);
  } catch (error) {
    if (!(error instanceof YAMLException)) throw error;
    const { mark } = error;
    const at = mark === undefined ? source : `${source}:${mark.line + 1}:${mark.column + 1}`;
    const snippet = mark?.snippet ? `\n${mark.snippet}` : '';
    throw new ConfigError(`${at}: YAML syntax error: ${error.reason}${snippet}`);
  }
  if (documents.length > 1) {
    throw new ConfigError(
      `${source}: expected one YAML document, found ${documents.length}: merge them and remove the "---" separators`,
    );
  }
  return documents[0];
}

function parseKinds(value: unknown, where: string, rules: Rules): KindEntry[] | undefined {
  if (value === undefined || value === null) return undefined;
  const items = expectList(value, where, 'a list of kinds, e.g. "- resource: deployments"');
  if (items.length === 0) throw fail(where, 'empty list: add an entry such as "- resource: deployments"');
  const indexOf = new Map<string, number>();
  return items.map((item, index) => {
    const kind = parseKind(item, `${where}[${index}]`, rules);
    const first = indexOf.get(kind.resource);
    if (first !== undefined) {
      throw fail(
        `${kind.where}.resource`,
        `${JSON.stringify(kind.resource)} is already configured at kinds[${first}]: merge the two entries`,
      );
    }
    indexOf.set(kind.resource, index);
    return kind;
  });
}

function parseOwnerKinds(value: unknown, where: string): string[] {
  if (isAbsent(value)) return [];
  const items = expectList(value, where, 'a list of kinds, e.g. [rollouts.argoproj.io]');
  const seen = new Set<string>();
  return items.map((item, index) => {
    const path = `${where}[${index}]`;
    const resource = expectString(item, path);
    const problem = resourceProblem(resource);
    if (problem !== undefined) throw fail(path, problem);
    if (seen.has(resource)) throw fail(path, `${JSON.stringify(resource)} is listed twice: list each kind once`);
    seen.add(resource);
    return resource;
  });
}

function parseKind(value: unknown, where: string, rules: Rules): KindEntry {
  const fields = expectMapping(value, where, 'a mapping such as "resource: deployments"');
  const resource = isAbsent(fields.resource) ? '' : expectString(fields.resource, `${where}.resource`);
  const { scope, exclude } = parseEveryKindFields(fields, resource, where, resourceProblem);
  rejectUnknownFields(fields, resource === EVERY_KIND ? [...KIND_FIELDS, ...EVERY_KIND_FIELDS] : KIND_FIELDS, where);
  const resourceError = resource === EVERY_KIND ? undefined : resourceProblem(resource);
  if (resourceError !== undefined) throw fail(`${where}.resource`, resourceError);

  let namespaces: string[] | undefined;
  if (!isAbsent(fields.namespaces)) {
    const path = `${where}.namespaces`;
    const items = expectList(fields.namespaces, path, 'a list of namespace names, e.g. [default]');
    if (items.length === 0) throw fail(path, 'empty list: list namespaces, or remove the field for all namespaces');
    namespaces = namespaceList(items, (index) => `${path}[${index}]`);
  }

  let selector: Selector | undefined;
  if (!isAbsent(fields.selector)) {
    const path = `${where}.selector`;
    const text = expectString(fields.selector, path);
    selector = within(path, () => parseSelector(text));
  }

  const own = (field: MetadataField) => {
    const compiled = new Map<string, Template | null>();
    for (const [key, value, path] of metadataEntries(fields[field], `${where}.${field}`, field)) {
      compiled.set(key, value === null ? null : compileEntry(field, key, expectString(value, path), path, rules));
    }
    return compiled;
  };

  return {
    where,
    resource,
    namespaces,
    selector,
    labels: own('labels'),
    annotations: own('annotations'),
    conflicts: parseConflicts(fields.conflicts, `${where}.conflicts`),
    scope,
    exclude,
  };
}

function kindsFromFlag(resources: readonly string[], fileKinds: readonly KindEntry[]): KindEntry[] {
  const seen = new Set<string>();
  return resources.map((resource) => {
    const problem = resource === EVERY_KIND ? undefined : resourceProblem(resource);
    if (problem !== undefined) throw fail('--kinds', problem);
    if (seen.has(resource)) throw fail('--kinds', `${JSON.stringify(resource)} is listed twice: list each kind once`);
    seen.add(resource);
    return (
      fileKinds.find((kind) => kind.resource === resource) ?? {
        where: `--kinds ${JSON.stringify(resource)}`,
        resource,
        namespaces: undefined,
        selector: undefined,
        labels: new Map(),
        annotations: new Map(),
        conflicts: undefined,
        scope: undefined,
        exclude: undefined,
      }
    );
  });
}

/** A kind's labels (or annotations): the global ones with the kind's own over them, less those it drops. */
function mergeEntries(
  global: ReadonlyMap<string, Template>,
  kind: KindEntry,
  field: MetadataField,
): Map<string, Template> {
  const merged = new Map(global);
  for (const [key, template] of kind[field]) {
    if (template !== null) {
      merged.set(key, template);
    } else if (!merged.delete(key)) {
      throw fail(
        keyPath(`${kind.where}.${field}`, key),
        `null drops a global ${singular(field)}, but there is no global ${singular(field)} ${
          JSON.stringify(key)
        }: remove this entry`,
      );
    }
  }
  return merged;
}

const singular = (field: MetadataField) => field === 'labels' ? 'label' : 'annotation';

/** Constant annotations that alone exceed what the API server takes on one object. */
function checkAnnotationsSize(annotations: ReadonlyMap<string, Template>, where: string): void {
  let bytes = 0;
  for (const [key, template] of annotations) bytes += byteLength(key) + byteLength(template.constantValue ?? '');
  if (bytes > ANNOTATIONS_MAX_BYTES) {
    throw fail(
      `${where}.annotations`,
      `the annotations come to ${bytes} bytes, more than the ${ANNOTATIONS_MAX_BYTES} bytes the API server allows on one object: shorten them`,
    );
  }
}

/** The size the API server counts: UTF-8 bytes. */
export function byteLength(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/** Whether templates may copy an object's labels and annotations into protected keys, and where to say so. */
interface Rules {
  /** The sources lookups may name. */
  readonly sources: ReadonlySet<string>;
  readonly allowProtected: boolean;
  /** Where allowProtectedPrefixes goes, for the message: "at the top of kinds.yaml". */
  readonly optIn: string;
}

function compileEntry(field: MetadataField, key: string, value: string, where: string, rules: Rules): Template {
  const keyProblem = field === 'labels' ? validateLabelKey(key) : validateAnnotationKey(key);
  if (keyProblem !== undefined) throw fail(where, keyProblem);
  const template = within(where, () => compileTemplate(value, { sources: rules.sources }));
  // labeller writes with its own rights (and force): copying a value the object's writer chose
  // into a key admission keeps from that writer (NodeRestriction's node-restriction.kubernetes.io/,
  // ValidatingAdmissionPolicies) would launder it past those rules.
  const domain = protectedDomain(key);
  if (template.readsObjectMetadata && domain !== undefined && !rules.allowProtected) {
    throw fail(
      where,
      `${
        JSON.stringify(value)
      } copies the object's labels or annotations into a key under ${domain}, which admission may forbid the object's writers to set; ` +
        `labeller would set it for them with its own rights. Use a constant or a key outside ${domain}, or set "allowProtectedPrefixes: true" ${rules.optIn} if whoever may write these objects may set this ${
          singular(field)
        } too`,
    );
  }
  // Templated label values can only be checked once rendered; constants are checked now. An
  // annotation's value may be any text.
  const valueProblem = field === 'labels' && template.constantValue !== undefined
    ? validateLabelValue(template.constantValue)
    : undefined;
  if (valueProblem !== undefined) throw fail(where, valueProblem);
  return template;
}

/** The reserved domain a label key's prefix is, or is a subdomain of; undefined when it has none. */
function protectedDomain(key: string): string | undefined {
  const slash = key.indexOf('/');
  if (slash === -1) return undefined;
  const prefix = key.slice(0, slash);
  return PROTECTED_DOMAINS.find((domain) => prefix === domain || prefix.endsWith(`.${domain}`));
}

function parseBoolean(value: unknown, where: string): boolean | undefined {
  if (isAbsent(value)) return undefined;
  if (typeof value !== 'boolean') throw fail(where, `must be true or false, got ${describe(value)}`);
  return value;
}

function parseConflicts(value: unknown, where: string): ConflictPolicy | undefined {
  if (isAbsent(value)) return undefined;
  const policy = CONFLICT_POLICIES.find((candidate) => candidate === value);
  if (policy === undefined) throw fail(where, `must be "force" or "skip", got ${describe(value)}`);
  return policy;
}

function namespaceList(names: readonly unknown[], whereOf: (index: number) => string): string[] {
  const seen = new Set<string>();
  return names.map((value, index) => {
    const where = whereOf(index);
    const name = expectString(value, where);
    if (!isDns1123Label(name)) {
      throw fail(
        where,
        `${
          JSON.stringify(name)
        } is not a valid namespace name: use a lowercase DNS-1123 label of at most 63 characters (e.g. "kube-system")`,
      );
    }
    if (seen.has(name)) throw fail(where, `${JSON.stringify(name)} is listed twice: list each namespace once`);
    seen.add(name);
    return name;
  });
}

function resourceProblem(resource: string): string | undefined {
  if (resource === '') return 'required, e.g. "deployments"';
  if (!RESOURCE_PATTERN.test(resource)) {
    return `${
      JSON.stringify(resource)
    } is not a kubectl-style resource name: write e.g. "deployments", "deployments.apps" or "Deployment.v1.apps"`;
  }
  return undefined;
}

function metadataEntries(
  value: unknown,
  where: string,
  field: MetadataField,
): Array<readonly [key: string, value: unknown, where: string]> {
  if (isAbsent(value)) return [];
  const entries = expectMapping(
    value,
    where,
    field === 'labels'
      ? 'a mapping of label keys to values, e.g. "tier: backend"'
      : 'a mapping of annotation keys to values, e.g. "example.com/owner: team-a"',
  );
  return Object.entries(entries).map(([key, entryValue]) => [key, entryValue, keyPath(where, key)] as const);
}

/** Runs a parser of a nested syntax, reporting its errors at `where`. */
function within<T>(where: string, parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    if (error instanceof SelectorError || error instanceof TemplateError) throw fail(where, error.message);
    throw error;
  }
}
