/**
 * Label value templates such as "{{name}}", "team-{{ namespace }}", "{{labels.app}}",
 * "{{namespace.labels.team}}", "{{root.name}}", "{{owner.labels.tier | default \"none\"}}", a field
 * of the object outside its metadata, "{{spec.storageClassName}}",
 * "{{spec.nodeSelector[\"topology.kubernetes.io/zone\"]}}", "{{spec.ports[0].protocol}}", or a
 * lookup in a source of truth by a key that is itself a variable,
 * "{{teams[namespace.labels.team].costCenter}}" (see sources.ts).
 * They compile once, at config load, so a typo fails at startup rather than on every object.
 * Rendering does not validate: only the rendered value can be checked, with
 * validateLabelValue, by the caller.
 *
 * A variable whose value is absent (a label or annotation the object does not carry, a
 * namespace, owner or root that does not exist, a field that is not set or is no string, number
 * or boolean) makes the whole template absent: the label is not set, and removed if labeller
 * owned it. `| default "<value>"` gives such a variable a value
 * instead ("" for an explicit empty label).
 */
import type { Labels } from '../apimachinery/labelsyntax.ts';
import { validateLabelKey } from '../apimachinery/labelsyntax.ts';
import { suggest } from '../util/suggest.ts';

/** A related object as templates see it (the namespace, the controller owner, the root of the chain). */
export interface RelatedObject {
  readonly kind: string;
  /** Undefined for a reverse reference's objects of several names. */
  readonly name: string | undefined;
  /**
   * For a reference: the field that named it and its value (forward: the labelled object's); for
   * a reverse one, the related objects' field naming the labelled object, and their names.
   */
  readonly via?: { readonly path: string; readonly value: string; readonly reverse?: boolean } | undefined;
  readonly labels: Labels;
  readonly annotations: Readonly<Record<string, string>>;
}

/** A related object templates read: the namespace, the controller owner, the root of the chain, or a reference by name (references.ts). */
export type Relation = 'namespace' | 'owner' | 'root' | ReferenceRelation;

/** A reference as a relation: `ref:node` for `{{node.…}}`. */
export type ReferenceRelation = `ref:${string}`;

/** The relation of the reference named `name`. */
export const referenceRelation = (name: string): ReferenceRelation => `ref:${name}`;

/** The reference a relation is, by name; undefined for the namespace, owner and root. */
export function referenceName(relation: Relation): string | undefined {
  return relation.startsWith('ref:') ? relation.slice(4) : undefined;
}

/** A relation as templates write it: `namespace`, `owner`, `root`, or the reference's name. */
export const relationName = (relation: Relation): string => referenceName(relation) ?? relation;

/** What a template can refer to about the object being labelled. */
export interface TemplateContext {
  readonly name: string;
  /** Empty for cluster-scoped objects. */
  readonly namespace: string;
  readonly kind: string;
  /** The plural resource name, e.g. "deployments". */
  readonly resource: string;
  /** Empty for the core group. */
  readonly group: string;
  readonly apiVersion: string;
  readonly uid: string;
  readonly labels: Labels;
  readonly annotations: Readonly<Record<string, string>>;
  /** Related objects, undefined where absent; only the relations the templates read need be given. */
  readonly related?: Readonly<Partial<Record<Relation, RelatedObject>>> | undefined;
  /** A field of the object outside its metadata, by its path (`spec.storageClassName`); undefined when not set. */
  readonly field?: ((path: string) => string | undefined) | undefined;
  /** Looks `key` up in source `source`: the entry, or its `field`; undefined when there is none. */
  readonly lookup?: ((source: string, key: string, field: string | undefined) => string | undefined) | undefined;
}

/** A lookup in a source of truth that a template makes. */
export interface Lookup {
  readonly source: string;
  /** The field of the entry it reads; undefined: the entry is a value. */
  readonly field: string | undefined;
}

export interface CompileOptions {
  /** The sources lookups may name (kinds.yaml's `sources`). */
  readonly sources?: ReadonlySet<string> | undefined;
  /** The references templates may read, by name (references.ts: the built-in ones and kinds.yaml's). */
  readonly references?: ReadonlySet<string> | undefined;
}

/** A field of a related object that a template reads: what decides whether a change to it matters. */
export interface RelatedRead {
  readonly relation: Relation;
  readonly field: 'kind' | 'name' | 'labels' | 'annotations';
  /** The label or annotation key, for `labels` and `annotations`. */
  readonly key?: string;
}

export interface Template {
  readonly source: string;
  /** Where its entry was written ('kinds.yaml: kinds[0].labels.team', '--label'), for `labeller explain`. */
  readonly where?: string | undefined;
  /** The value when the source has no "{{", so it can be validated at load time; undefined otherwise. */
  readonly constantValue: string | undefined;
  /** The annotation keys it reads of the object itself, so the cache keeps just those of each object. */
  readonly annotations: readonly string[];
  /** The fields it reads of the object outside its metadata: its cache keeps just those (whole objects are watched). */
  readonly fields: readonly ObjectField[];
  /** What it reads of related objects. */
  readonly related: readonly RelatedRead[];
  /** The lookups it makes in sources of truth. */
  readonly lookups: readonly Lookup[];
  /**
   * True when it copies labels or annotations, of the object or a related one: values whoever
   * writes that object chose.
   */
  readonly readsObjectMetadata: boolean;
  /** What it is made of, in order: what render() evaluates, and what admission/ translates to CEL. */
  readonly parts: readonly TemplatePart[];
  /** The value, or undefined when a variable it reads is absent (and has no default). */
  render(context: TemplateContext): string | undefined;
}

/** A field of the object itself: `{{name}}`, `{{kind}}`… */
export type FieldVariable = (typeof FIELD_VARIABLES)[number];

/** The object's labels or annotations. */
export type MapVariable = (typeof MAP_VARIABLES)[number];

/** A field of the object outside its metadata, by its path. */
export interface ObjectField {
  /** As written, normalised: `spec.nodeSelector["topology.kubernetes.io/zone"]`, `spec.ports[0].protocol`. */
  readonly path: string;
  /** Its steps from the object: names of fields and map keys, list indexes, and null for every item of a list (`[*]`, references only). */
  readonly steps: readonly (string | number | null)[];
}

/** What one variable reads: a field of the object, one of its labels or annotations, a field outside its metadata, or a related object's. */
export type Variable =
  | { readonly type: 'field'; readonly field: FieldVariable }
  | { readonly type: 'map'; readonly map: MapVariable; readonly key: string }
  | { readonly type: 'object'; readonly field: ObjectField }
  | { readonly type: 'related'; readonly read: RelatedRead };

/**
 * A piece of a template: text kept as written, a variable, or a lookup in a source by the key a
 * variable gives; the last two with the value `| default` gives them when absent.
 */
export type TemplatePart =
  | { readonly type: 'text'; readonly text: string }
  | { readonly type: 'variable'; readonly variable: Variable; readonly fallback: string | undefined }
  | {
    readonly type: 'lookup';
    readonly source: string;
    readonly key: Variable;
    /** The field of the entry it reads; undefined: the entry is a value. */
    readonly field: string | undefined;
    readonly fallback: string | undefined;
  };

export class TemplateError extends Error {
  override readonly name = 'TemplateError';
}

const FIELD_VARIABLES = ['name', 'namespace', 'kind', 'resource', 'group', 'apiVersion', 'uid'] as const;
/** The parts of an object outside its metadata that templates may read (the API's conventions). */
const OBJECT_PARTS = ['spec', 'status'] as const;
const MAP_VARIABLES = ['labels', 'annotations'] as const;
const RELATIONS = ['namespace', 'owner', 'root'] as const satisfies readonly Relation[];
/** Fields of a related object; a namespace's kind and name say nothing `{{namespace}}` does not. */
const RELATED_FIELDS: Readonly<Record<'namespace' | 'owner' | 'root', readonly ('kind' | 'name')[]>> = {
  namespace: [],
  owner: ['kind', 'name'],
  root: ['kind', 'name'],
};

/** The fields a relation's object has for templates: a reference's kind is the reference's own. */
const relatedFields = (relation: Relation): readonly ('kind' | 'name')[] =>
  referenceName(relation) === undefined ? RELATED_FIELDS[relation as keyof typeof RELATED_FIELDS] : ['name'];
const ALLOWED = [
  ...FIELD_VARIABLES,
  ...MAP_VARIABLES.map((map) => `${map}.<key>`),
  ...OBJECT_PARTS.map((part) => `${part}.<field>`),
  ...RELATIONS.flatMap((
    relation,
  ) => [
    ...RELATED_FIELDS[relation].map((field) => `${relation}.${field}`),
    ...MAP_VARIABLES.map((map) => `${relation}.${map}.<key>`),
  ]),
].join(', ');
/** Related variables up to their key, for suggestions: "owner.name", "namespace.labels". */
const RELATED_NAMES = RELATIONS.flatMap((r) => [...RELATED_FIELDS[r], ...MAP_VARIABLES].map((f) => `${r}.${f}`));

export function compileTemplate(source: string, options: CompileOptions = {}): Template {
  if (!source.includes('{{')) {
    return {
      source,
      constantValue: source,
      annotations: [],
      fields: [],
      related: [],
      lookups: [],
      readsObjectMetadata: false,
      parts: source === '' ? [] : [{ type: 'text', text: source }],
      render: () => source,
    };
  }
  const reads: Reads = {
    annotations: [],
    fields: [],
    related: [],
    lookups: [],
    sources: options.sources ?? new Set(),
    references: options.references ?? new Set(),
  };
  const parts = parse(source, reads);
  const { annotations, fields, related, lookups } = reads;
  const readsMaps = parts.some((part) =>
    (part.type === 'variable' && part.variable.type === 'map') || (part.type === 'lookup' && part.key.type === 'map')
  );
  return {
    source,
    constantValue: undefined,
    annotations,
    fields,
    related,
    lookups,
    // A source's values, and the object's fields, are written by others too: the protected-prefix rule applies to them.
    readsObjectMetadata: related.some((read) => read.field === 'labels' || read.field === 'annotations') ||
      readsMaps || lookups.length > 0 || fields.length > 0,
    parts,
    render: (context) => {
      let value = '';
      for (const part of parts) {
        const rendered = partValue(part, context);
        if (rendered === undefined) return undefined;
        value += rendered;
      }
      return value;
    },
  };
}

/** One part's value for `context`; undefined when absent. */
function partValue(part: TemplatePart, context: TemplateContext): string | undefined {
  if (part.type === 'text') return part.text;
  if (part.type === 'variable') return valueOf(part.variable, context) ?? part.fallback;
  const key = valueOf(part.key, context);
  return (key === undefined ? undefined : context.lookup?.(part.source, key, part.field)) ?? part.fallback;
}

function valueOf(variable: Variable, context: TemplateContext): string | undefined {
  if (variable.type === 'field') return context[variable.field];
  if (variable.type === 'map') return lookupKey(context[variable.map], variable.key);
  if (variable.type === 'object') return context.field?.(variable.field.path);
  const { relation, field, key } = variable.read;
  const object = context.related?.[relation];
  if (object === undefined) return undefined;
  return field === 'kind' || field === 'name' ? object[field] : lookupKey(object[field], key ?? '');
}

/** What a template reads, gathered as it is parsed; `sources`: the names lookups may use. */
interface Reads {
  readonly annotations: string[];
  readonly fields: ObjectField[];
  readonly related: RelatedRead[];
  readonly lookups: Lookup[];
  readonly sources: ReadonlySet<string>;
  readonly references: ReadonlySet<string>;
}

/** `source[key variable]` or `source[key variable].field`. */
const LOOKUP = /^([a-z][-a-z0-9]*)\[(.*)\](?:\.([^\]]*))?$/;

/** The template's parts; what they read is added to `reads`. */
function parse(source: string, reads: Reads): TemplatePart[] {
  const fail = (problem: string) => new TemplateError(`template ${JSON.stringify(source)}: ${problem}`);
  const parts: TemplatePart[] = [];
  let position = 0;
  for (let open = source.indexOf('{{'); open !== -1; open = source.indexOf('{{', position)) {
    const close = source.indexOf('}}', open + 2);
    if (close === -1) throw fail('"{{" is not closed: add "}}" after the variable');
    const literal = source.slice(position, open);
    if (literal !== '') parts.push({ type: 'text', text: literal });
    const [expression = '', ...pipes] = source.slice(open + 2, close).split('|');
    const name = expression.trim();
    const looked = LOOKUP.exec(name);
    const read = looked && !isObjectPart(name) ? lookupPart(looked, fail, reads) : variable(name, fail, reads);
    const fallback = defaultValue(pipes, name, fail);
    parts.push(read.type === 'lookup' ? { ...read, fallback } : { type: 'variable', variable: read, fallback });
    position = close + 2;
  }
  const tail = source.slice(position);
  if (tail !== '') parts.push({ type: 'text', text: tail });
  return parts;
}

/** The value of `| default "<value>"`, if given. */
function defaultValue(
  pipes: readonly string[],
  name: string,
  fail: (problem: string) => TemplateError,
): string | undefined {
  if (pipes.length === 0) return undefined;
  const usage = `write "{{${name} | default \\"<value>\\"}}" (one default, a double-quoted value)`;
  const match = pipes.length === 1 ? /^\s*default\s+("(?:[^"\\]|\\.)*")\s*$/.exec(pipes[0]!) : null;
  if (!match) throw fail(`unknown filter "|${pipes.join('|')}": ${usage}`);
  try {
    return JSON.parse(match[1]!) as string;
  } catch {
    throw fail(`bad default value ${match[1]}: ${usage}`);
  }
}

/** A lookup in a source, by a key that a variable gives: absent when the key or the entry is. */
function lookupPart(
  match: RegExpExecArray,
  fail: (problem: string) => TemplateError,
  reads: Reads,
): Omit<Extract<TemplatePart, { type: 'lookup' }>, 'fallback'> {
  const [, source = '', keyName = '', field] = match;
  const key = keyName.trim();
  if (!reads.sources.has(source)) {
    const match = suggest(source, [...reads.sources]);
    const known = reads.sources.size > 0 ? `; sources are ${[...reads.sources].join(', ')}` : '';
    throw fail(
      `unknown source ${JSON.stringify(source)}${
        match ? ` (did you mean "${match}"?)` : ''
      }: define it under "sources:"${known}`,
    );
  }
  if (key === '') throw fail(`"${source}[]" needs a key, e.g. "{{${source}[namespace.labels.team]}}"`);
  if (LOOKUP.test(key)) throw fail(`"${source}[${key}]": a key is a variable, not another lookup`);
  if (field !== undefined && !/^[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?$/.test(field)) {
    throw fail(`"${source}[${key}].${field}": a field is a name such as "costCenter"`);
  }
  const keyOf = variable(key, fail, reads);
  reads.lookups.push({ source, field });
  return { type: 'lookup', source, key: keyOf, field };
}

function variable(name: string, fail: (problem: string) => TemplateError, reads: Reads): Variable {
  const { annotations, related } = reads;
  const field = FIELD_VARIABLES.find((candidate) => candidate === name);
  if (field !== undefined) return { type: 'field', field };
  if (isObjectPart(name)) {
    const field = objectField(name, fail);
    if (!reads.fields.some((known) => known.path === field.path)) reads.fields.push(field);
    return { type: 'object', field };
  }

  const [head = '', second = '', ...rest] = name.split('.');
  const relation = RELATIONS.find((candidate) => candidate === head) ??
    (reads.references.has(head) ? referenceRelation(head) : undefined);
  if (relation !== undefined) {
    const relatedField = relatedFields(relation).find((candidate) => candidate === second);
    if (relatedField !== undefined && rest.length === 0) {
      const read = { relation, field: relatedField };
      related.push(read);
      return { type: 'related', read };
    }
    if (relation === 'namespace' && rest.length === 0 && (second === 'name' || second === 'kind')) {
      throw fail(`unknown variable ${JSON.stringify(name)}: the namespace's name is "{{namespace}}"`);
    }
    const map = MAP_VARIABLES.find((candidate) => candidate === second);
    if (map === undefined) throw unknown(name, fail, reads.references);
    const read = { relation, field: map, key: mapKey(`${head}.${map}`, rest.join('.'), name, fail) };
    related.push(read);
    return { type: 'related', read };
  }
  const map = MAP_VARIABLES.find((candidate) => candidate === head);
  if (map === undefined) throw unknown(name, fail, reads.references);
  const key = mapKey(map, name.slice(map.length + 1), name, fail);
  if (map === 'annotations') annotations.push(key);
  return { type: 'map', map, key };
}

/** Whether `name` reads a field outside the object's metadata: `spec.…`, `status.…`. */
function isObjectPart(name: string): boolean {
  return OBJECT_PARTS.some((part) => name.startsWith(`${part}.`) || name.startsWith(`${part}[`));
}

/** One step of a field's path: `.name`, `["a map key"]`, `[0]`, or `[*]`. */
const STEP = /^(?:\.([A-Za-z_$][A-Za-z0-9_$]*)|\[("(?:[^"\\]|\\.)*")\]|\[(\d+)\]|(\[\*\]))/;

/**
 * A field's path outside the metadata, `spec.nodeName`, as steps; `each`: `[*]` may stand for
 * every item of a list (`spec.volumes[*].persistentVolumeClaim.claimName`). Throws TemplateError
 * naming what cannot be read.
 */
export function parseObjectField(path: string, each = false): ObjectField {
  if (!isObjectPart(path)) {
    throw new TemplateError(
      `${JSON.stringify(path)}: a field's path starts with ${OBJECT_PARTS.join(' or ')}, e.g. spec.nodeName`,
    );
  }
  return objectField(path, (problem) => new TemplateError(problem), each);
}

/** Whether `field` reads every item of a list: it has many values (readValues). */
export const readsEach = (field: ObjectField): boolean => field.steps.includes(null);

/** A field's path, `spec.nodeSelector["topology.kubernetes.io/zone"]`, as steps. */
function objectField(name: string, fail: (problem: string) => TemplateError, each = false): ObjectField {
  const part = OBJECT_PARTS.find((candidate) => name.startsWith(candidate))!;
  const steps: (string | number | null)[] = [part];
  let path: string = part;
  for (let rest = name.slice(part.length); rest !== '';) {
    const step = STEP.exec(rest);
    if (!step) {
      throw fail(
        `variable ${JSON.stringify(name)}: cannot read ${
          JSON.stringify(rest)
        }; a field's path is names after dots, a map key with dots or slashes in ["…"], a list index in [0], e.g. {{spec.nodeSelector["topology.kubernetes.io/zone"]}}`,
      );
    }
    const [whole, field, quoted, index, every] = step;
    if (every !== undefined) {
      if (!each) {
        throw fail(
          `variable ${
            JSON.stringify(name)
          }: [*] reads many values, and a template renders one: give an index, e.g. [0]`,
        );
      }
      steps.push(null);
      path += '[*]';
    } else if (field !== undefined) {
      steps.push(field);
      path += `.${field}`;
    } else if (quoted !== undefined) {
      const key = JSON.parse(quoted) as string;
      steps.push(key);
      path += `[${JSON.stringify(key)}]`;
    } else {
      steps.push(Number(index));
      path += `[${index}]`;
    }
    rest = rest.slice(whole.length);
  }
  return { path, steps };
}

/** The value at `field` of `object`: a string, number or boolean as text; undefined when not set or anything else. */
export function readField(object: unknown, field: ObjectField): string | undefined {
  let value: unknown = object;
  for (const step of field.steps) {
    if (step === null) return undefined;
    if (typeof step === 'number') {
      if (!Array.isArray(value)) return undefined;
      value = value[step];
    } else {
      if (typeof value !== 'object' || value === null || Array.isArray(value) || !Object.hasOwn(value, step)) {
        return undefined;
      }
      value = (value as Record<string, unknown>)[step];
    }
  }
  return typeof value === 'string'
    ? value
    : typeof value === 'number' || typeof value === 'boolean'
    ? String(value)
    : undefined;
}

/** The values at `field` of `object`, every item of a list where it reads `[*]`: those that are strings, numbers or booleans, as text. */
export function readValues(object: unknown, field: ObjectField): string[] {
  let values: unknown[] = [object];
  for (const step of field.steps) {
    values = values.flatMap((value): unknown[] => {
      if (step === null) return Array.isArray(value) ? value : [];
      if (typeof step === 'number') return Array.isArray(value) && step < value.length ? [value[step]] : [];
      if (typeof value !== 'object' || value === null || Array.isArray(value) || !Object.hasOwn(value, step)) return [];
      return [(value as Record<string, unknown>)[step]];
    });
  }
  return values.flatMap((value) =>
    typeof value === 'string' ? [value] : typeof value === 'number' || typeof value === 'boolean' ? [String(value)] : []
  );
}

/** A missing label or annotation is absent; inherited properties are not labels. */
function lookupKey(map: Readonly<Record<string, string>>, key: string): string | undefined {
  return Object.hasOwn(map, key) ? map[key] : undefined;
}

function mapKey(map: string, key: string, name: string, fail: (problem: string) => TemplateError): string {
  if (key === '') throw fail(`"${map}" needs a key, e.g. "{{${map}.app}}"`);
  // Annotation keys follow the label key syntax too, so a key that fails it could never match.
  const keyProblem = validateLabelKey(key);
  if (keyProblem !== undefined) throw fail(`variable ${JSON.stringify(name)}: ${keyProblem}`);
  return key;
}

function unknown(
  name: string,
  fail: (problem: string) => TemplateError,
  references: ReadonlySet<string>,
): TemplateError {
  const allowed = references.size === 0
    ? ALLOWED
    : `${ALLOWED}, <reference>.name, <reference>.labels.<key>, <reference>.annotations.<key> (references: ${
      [...references].join(', ')
    })`;
  if (name === '') return fail(`empty variable "{{}}"; use one of ${allowed}`);
  return fail(`unknown variable ${JSON.stringify(name)}${didYouMean(name, references)}; use one of ${allowed}`);
}

/** A likely typo's fix: "nmae" → "name", "ownr.labels.team" → "owner.labels.team", "label.app" → "labels.app". */
function didYouMean(name: string, references: ReadonlySet<string>): string {
  const parts = name.split('.');
  const [head = '', second] = parts;
  if (second === undefined) {
    const match = suggest(name, FIELD_VARIABLES);
    return match === undefined ? '' : ` (did you mean "${match}"?)`;
  }
  const twoSegments = `${head}.${second}`;
  const related = suggest(twoSegments, [
    ...RELATED_NAMES,
    ...[...references].flatMap((r) => ['name', ...MAP_VARIABLES].map((f) => `${r}.${f}`)),
  ]);
  if (related !== undefined) return ` (did you mean "${related}${name.slice(twoSegments.length)}"?)`;
  const map = suggest(head, MAP_VARIABLES);
  return map === undefined ? '' : ` (did you mean "${map}${name.slice(head.length)}"?)`;
}
