// The config in force from what the command line knows: kinds.yaml (parse.ts) overlaid with the
// flags. Flags override the file's global settings, which override the defaults; a kind's own
// settings win over both because they are more specific. --kinds replaces the file's kinds,
// keeping the file's settings for the kinds it names (matched by the exact resource string, so
// `--kinds '*'` keeps the file's "*" entry). A kind listed explicitly replaces the every-kind
// entry for its resource.
import { parseSelector } from '../apimachinery/selector.ts';
import { everyKindConfig } from './everykind.ts';
import { ConfigError, fail, keyPath, resourceProblem } from './fields.ts';
import {
  ANNOTATIONS_MAX_BYTES,
  byteLength,
  type Config,
  type ConflictPolicy,
  EVERY_KIND,
  type MetadataField,
  type Protection,
} from './model.ts';
import { BUILTIN_REFERENCES } from './references.ts';
import { compileEntry, type KindEntry, namespaceList, parseConfig, type Rules, singular, within } from './parse.ts';
import type { ProtectEntry, ProtectMode } from './protect.ts';
import type { Template } from './template.ts';

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
  /** --protect: overrides the file's global protection mode (its keys and allow stay); off: none. */
  readonly protect?: ProtectMode | 'off' | undefined;
  /** False for `labeller prune`, which needs the kinds but no labels. */
  readonly requireLabels?: boolean | undefined;
}

const DEFAULT_CONFLICT_POLICY: ConflictPolicy = 'force';

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

  const references = file?.references ?? BUILTIN_REFERENCES;
  const rules: Rules = {
    sources: new Set(file?.sources.keys()),
    references: new Set(references.keys()),
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
  const globalProtect = input.protect === 'off'
    ? undefined
    : input.protect === undefined
    ? file?.protect
    : { mode: input.protect, keys: file?.protect?.keys };
  const kinds = merged.map(({ entry, labels, annotations }) => {
    const protect = protection(entry, globalProtect, labels, annotations, input.protect === 'off');
    return {
      where: entry.where,
      resource: entry.resource,
      namespaces: entry.namespaces ?? namespaces,
      selector: entry.selector ?? selector,
      labels,
      annotations,
      conflicts: entry.conflicts ?? conflicts,
      ...(protect ? { protect } : {}),
      ...(file?.fights ? { fights: file.fights } : {}),
    };
  });
  const unset = globalProtect?.keys?.find((key) => !kinds.some(({ protect }) => protectsKey(protect, key)));
  if (unset !== undefined) {
    throw fail(
      `${input.file?.source ?? 'the config'}: protect.keys`,
      `${
        JSON.stringify(unset)
      } is no key the config sets (in an entry with protection): protect only what labeller writes`,
    );
  }
  const every = merged.findIndex(({ entry }) => entry.resource === EVERY_KIND);
  return {
    ownerKinds: file?.ownerKinds ?? [],
    sources: file?.sources ?? new Map(),
    references,
    ...(file?.generation !== undefined ? { generation: file.generation } : {}),
    coverage: file?.coverage,
    ...(globalProtect !== undefined || kinds.some((kind) => kind.protect)
      ? { protectAllow: file?.protect?.allow ?? [] }
      : {}),
    kinds: kinds.filter((kind) => kind.resource !== EVERY_KIND),
    everyKind: everyKindConfig(
      every === -1 ? undefined : [merged[every]!.entry, kinds[every]!],
      input.excludeKinds,
    ),
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
        protect: undefined,
        scope: undefined,
        exclude: undefined,
      }
    );
  });
}

/**
 * An entry's protection: its own (none for `protect: false`), else the global one; `off`
 * (--protect off) turns every entry's off. Its keys are those listed that the entry sets, or all
 * it sets; a key an entry lists that it does not set is a mistake.
 */
function protection(
  entry: KindEntry,
  global: ProtectEntry | undefined,
  labels: ReadonlyMap<string, Template>,
  annotations: ReadonlyMap<string, Template>,
  off: boolean,
): Protection | undefined {
  const own = entry.protect;
  const chosen = off || own === null ? undefined : own ?? global;
  if (chosen === undefined) return undefined;
  const unset = own?.keys?.find((key) => !labels.has(key) && !annotations.has(key));
  if (unset !== undefined) {
    throw fail(
      `${entry.where}.protect.keys`,
      `${JSON.stringify(unset)} is no label or annotation this entry sets: protect only what labeller writes`,
    );
  }
  const keys = chosen.keys === undefined ? undefined : new Set(chosen.keys);
  const of = (map: ReadonlyMap<string, Template>) => new Set([...map.keys()].filter((key) => !keys || keys.has(key)));
  return { mode: chosen.mode, labels: of(labels), annotations: of(annotations) };
}

function protectsKey(protect: Protection | undefined, key: string): boolean {
  return protect !== undefined && (protect.labels.has(key) || protect.annotations.has(key));
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
