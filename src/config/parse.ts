/**
 * Reading kinds.yaml: the file's document validated field by field into a FileConfig, before
 * flags and defaults apply (overlay.ts). Each mistake is a ConfigError naming the field.
 *
 *   labels:                        # optional: labels for every kind, constants or templates ("{{name}}")
 *     app.kubernetes.io/managed-by: labeller
 *   annotations:                   # optional: annotations for every kind, with the same templates
 *     example.com/runbook: "https://runbooks.example.com/{{namespace}}"
 *   conflicts: force               # optional: force | skip a label another manager owns; default force
 *   allowProtectedPrefixes: false  # optional: let {{labels.x}}/{{annotations.x}} fill kubernetes.io and k8s.io keys
 *   ownerKinds: [rollouts.argoproj.io]  # optional: owner kinds that owner and root templates follow beyond the workload chain
 *   sources: {teams: {configMap: …}}     # optional: sources of truth templates look values up in (sources.ts)
 *   references: {backup: {of: …, field: …, to: …}}  # optional: related objects named by a field, beside the built-in node, claim… (references.ts)
 *   coverage: {maxLabels: 50}      # optional: `status` warns when objects carry more labels (a cost tool's import limit)
 *   protect: deny                  # optional: keys only labeller may set, enforced by the API server (protect.ts)
 *   fights: {yieldTo: [argocd-controller]}  # optional: field managers labeller backs off from (labelling/fights.ts)
 *   generation: 7                  # optional: grows with each change; a shard group's newest config wins (the chart writes it)
 *   kinds:                         # required unless --kinds is given: at least one entry
 *     - resource: deployments      # required: kubectl-style (deploy, Deployment, deployments.apps, Deployment.v1.apps)
 *       namespaces: [default]      # optional: namespace names; absent = all namespaces
 *       selector: "app in (web)"   # optional: label selector
 *       labels: {tier: backend}    # optional: merged over the global labels; null drops a global label
 *       annotations: {…}           # optional: merged over the global annotations, as labels are
 *       conflicts: skip            # optional: overrides the global policy
 *       protect: warn              # optional: overrides the global protection; false: none
 *     - resource: "*"              # every kind discovery reports with list, watch and patch (everykind.ts)
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
import { loadAll, YAMLException } from 'js-yaml';
import { isDns1123Label } from '../apimachinery/names.ts';
import type { Selector } from '../apimachinery/selector.ts';
import { parseSelector, SelectorError } from '../apimachinery/selector.ts';
import { validateAnnotationKey, validateLabelKey, validateLabelValue } from '../apimachinery/labelsyntax.ts';
import { EVERY_KIND_FIELDS, type EveryKindFields, parseEveryKindFields } from './everykind.ts';
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
  resourceProblem,
} from './fields.ts';
import {
  type ConflictPolicy,
  type CoverageSettings,
  EVERY_KIND,
  type FightSettings,
  type MetadataField,
} from './model.ts';
import { parseProtect, type ProtectEntry, type ProtectSettings } from './protect.ts';
import { BUILTIN_REFERENCES, parseReferences, type ReferenceSpec } from './references.ts';
import { parseSources, type SourceSpec } from './sources.ts';
import { compileTemplate, type Template, TemplateError } from './template.ts';

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
  /** The built-in references and the file's own, by name. */
  readonly references: ReadonlyMap<string, ReferenceSpec>;
  readonly coverage: CoverageSettings | undefined;
  readonly protect: ProtectSettings | undefined;
  readonly fights: FightSettings | undefined;
  /** Which of two configs is the newer (the chart writes the release's revision); not part of the fingerprint. */
  readonly generation: number | undefined;
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
  /** null: none (`protect: false`), whatever the file's global protection. */
  readonly protect: ProtectEntry | null | undefined;
}

const CONFLICT_POLICIES: readonly ConflictPolicy[] = ['force', 'skip'];

const FILE_FIELDS = [
  'labels',
  'annotations',
  'conflicts',
  'kinds',
  'allowProtectedPrefixes',
  'ownerKinds',
  'sources',
  'references',
  'coverage',
  'protect',
  'fights',
  'generation',
];
/** Label prefixes reserved for Kubernetes, which admission (NodeRestriction, policies) guards. */

const PROTECTED_DOMAINS = ['kubernetes.io', 'k8s.io'];

const KIND_FIELDS = ['resource', 'namespaces', 'selector', 'labels', 'annotations', 'conflicts', 'protect'];
// Syntax only: whether the name exists is for discovery to say.

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
      references: BUILTIN_REFERENCES,
      coverage: undefined,
      protect: undefined,
      fights: undefined,
      generation: undefined,
    };
  }
  const fields = expectMapping(document, source, 'a mapping with "labels:" and "kinds:"');
  rejectUnknownFields(fields, FILE_FIELDS, source);
  const allowProtectedPrefixes = parseBoolean(fields.allowProtectedPrefixes, `${source}: allowProtectedPrefixes`) ??
    false;
  const sources = parseSources(fields.sources, `${source}: sources`);
  const references = parseReferences(fields.references, `${source}: references`);
  const rules: Rules = {
    sources: new Set(sources.keys()),
    references: new Set(references.keys()),
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
    references,
    coverage: parseCoverage(fields.coverage, `${source}: coverage`),
    protect: parseProtect(fields.protect, `${source}: protect`, false),
    fights: parseFights(fields.fights, `${source}: fights`),
    generation: parseGeneration(fields.generation, `${source}: generation`),
  };
}

function parseGeneration(value: unknown, where: string): number | undefined {
  if (isAbsent(value)) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw fail(
      where,
      `must be a whole number that grows with each change of the config (the chart writes the release's revision), got ${
        describe(value)
      }`,
    );
  }
  return value;
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

function parseCoverage(value: unknown, where: string): CoverageSettings | undefined {
  if (isAbsent(value)) return undefined;
  const fields = expectMapping(value, where, 'a mapping such as "maxLabels: 50"');
  rejectUnknownFields(fields, ['maxLabels'], where);
  const { maxLabels } = fields;
  if (isAbsent(maxLabels)) return undefined;
  if (typeof maxLabels !== 'number' || !Number.isInteger(maxLabels) || maxLabels < 1) {
    throw fail(
      `${where}.maxLabels`,
      `must be a whole number of labels, e.g. 50 (AWS split cost allocation imports 50), got ${describe(maxLabels)}`,
    );
  }
  return { maxLabels };
}

function parseFights(value: unknown, where: string): FightSettings | undefined {
  if (isAbsent(value)) return undefined;
  const fields = expectMapping(value, where, 'a mapping such as "yieldTo: [argocd-controller]"');
  rejectUnknownFields(fields, ['yieldTo'], where);
  if (isAbsent(fields.yieldTo)) return undefined;
  const path = `${where}.yieldTo`;
  // Empty is allowed: labeller then yields to nobody.
  const items = expectList(fields.yieldTo, path, 'a list of field managers, e.g. [argocd-controller]');
  return { yieldTo: items.map((item, index) => expectString(item, `${path}[${index}]`)) };
}

function parseKind(value: unknown, where: string, rules: Rules): KindEntry {
  const fields = expectMapping(value, where, 'a mapping such as "resource: deployments"');
  const resource = isAbsent(fields.resource) ? '' : expectString(fields.resource, `${where}.resource`);
  const { scope, exclude } = parseEveryKindFields(fields, resource, where);
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
    protect: parseProtect(fields.protect, `${where}.protect`, true),
    scope,
    exclude,
  };
}

/** Whether templates may copy an object's labels and annotations into protected keys, and where to say so. */
export interface Rules {
  /** The sources lookups may name. */
  readonly sources: ReadonlySet<string>;
  /** The references templates may read. */
  readonly references: ReadonlySet<string>;
  readonly allowProtected: boolean;
  /** Where allowProtectedPrefixes goes, for the message: "at the top of kinds.yaml". */
  readonly optIn: string;
}

export function compileEntry(field: MetadataField, key: string, value: string, where: string, rules: Rules): Template {
  const keyProblem = field === 'labels' ? validateLabelKey(key) : validateAnnotationKey(key);
  if (keyProblem !== undefined) throw fail(where, keyProblem);
  const template = within(
    where,
    () => compileTemplate(value, { sources: rules.sources, references: rules.references }),
  );
  // labeller writes with its own rights (and force): copying a value the object's writer chose
  // into a key admission keeps from that writer (NodeRestriction's node-restriction.kubernetes.io/,
  // ValidatingAdmissionPolicies) would launder it past those rules.
  const domain = protectedDomain(key);
  if (template.readsObjectMetadata && domain !== undefined && !rules.allowProtected) {
    throw fail(
      where,
      `${
        JSON.stringify(value)
      } copies the object's labels, annotations or fields into a key under ${domain}, which admission may forbid the object's writers to set; ` +
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
  return { ...template, where };
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

export function namespaceList(names: readonly unknown[], whereOf: (index: number) => string): string[] {
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
export function within<T>(where: string, parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    if (error instanceof SelectorError || error instanceof TemplateError) throw fail(where, error.message);
    throw error;
  }
}

export const singular = (field: MetadataField) => field === 'labels' ? 'label' : 'annotation';
