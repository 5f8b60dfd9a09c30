// Templates as CEL, for the admission policies: what a template renders for an object being
// created, with the controller's semantics. Every variable is an optional string; one that is
// absent makes the whole template absent (optMap/optFlatMap), unless `| default` gives it a
// value; text around variables is concatenated. What CEL at admission cannot see (owners and
// roots, the uid, files, URLs, documents in a ConfigMap key, fields of an entry) is said, as
// `why`, so that the rule is left to the controller.
//
// Two things of the API server's CEL shape what is written here (kube-apiserver 1.37, cel-go
// 0.29): a map or list literal must hold values of one static type, and policy variables are of
// type dyn, so every value a literal holds is made a string with string(); and a map literal's
// optional entry (`?"key": value`) whose value is a dyn variable makes the API server's
// validation panic, so such values go through optMap first.
import type { SourceSpec } from '../config/sources.ts';
import { relationName, type Template, type TemplatePart, type Variable } from '../config/template.ts';
import { NAME_MAX_LENGTH, NAME_PATTERN } from '../apimachinery/labelsyntax.ts';
import type { ApiResource } from '../apimachinery/resource.ts';
import { apiVersion } from '../apimachinery/resource.ts';

/** A CEL string literal: JSON's escapes are CEL's too. */
export function celString(text: string): string {
  return JSON.stringify(text);
}

/** What a template is rendered for. */
export interface CelScope {
  /** The resource when it is known (a kind named in the config); undefined: any kind (every-kind entry), read from the request. */
  readonly resource: ApiResource | undefined;
  readonly sources: ReadonlyMap<string, SourceSpec>;
}

/** A template as CEL: an optional string, and the source it reads (through the policy's params), if any. */
export type TemplateCel =
  | { readonly cel: string; readonly source: string | undefined }
  | { readonly why: string };

/** A piece of CEL: a string, or an optional string. */
interface Cel {
  readonly expr: string;
  readonly optional: boolean;
}

type Translated = Cel | { readonly why: string };

/** `template` as a CEL optional string, or why admission cannot render it as the controller does. */
export function templateCel(template: Template, scope: CelScope): TemplateCel {
  const sources = new Set<string>();
  const parts: Cel[] = [];
  for (const part of template.parts) {
    const cel = partCel(part, scope, sources);
    if ('why' in cel) return cel;
    parts.push(cel);
  }
  if (sources.size > 1) {
    return { why: `it reads sources ${[...sources].join(' and ')}, and an admission policy reads one (its params)` };
  }
  return { cel: compose(parts), source: [...sources][0] };
}

/** A label value, empty or not, as a pattern. */
const LABEL_VALUE = `^(${NAME_PATTERN.source.slice(1, -1)})?$`;

/**
 * CEL: whether the string `value` is a valid label value (the API server refuses the object
 * otherwise). matches() comes first: it makes the checker take `value` for a string where its
 * type is not known yet, which size() would take for bytes.
 */
export function validLabelValue(value: string): string {
  return `${value}.matches(${celString(LABEL_VALUE)}) && size(${value}) <= ${NAME_MAX_LENGTH}`;
}

/** The parts concatenated: present when every optional part is. */
function compose(parts: readonly Cel[]): string {
  const [only] = parts;
  if (parts.length === 1 && only!.optional) return only!.expr;
  // string(): the checker takes the sum of two values of unknown type (dyn) for bytes, and refuses
  // it; a sum with a string literal in it would pass, one of two variables alone would not.
  const body = parts.map((part, i) => (part.optional ? `string(v${i})` : part.expr)).join(' + ') || '""';
  const optionals = parts.flatMap((part, i) => (part.optional ? [{ expr: part.expr, name: `v${i}` }] : []));
  // The innermost maps to the value; each one outside it flat-maps to the optional within.
  return optionals.reduceRight(
    (inner, { expr, name }, i) =>
      i === optionals.length - 1 ? `${expr}.optMap(${name}, ${inner})` : `${expr}.optFlatMap(${name}, ${inner})`,
    optionals.length === 0 ? `optional.of(${body})` : body,
  );
}

function partCel(part: TemplatePart, scope: CelScope, sources: Set<string>): Translated {
  if (part.type === 'text') return { expr: celString(part.text), optional: false };
  const value = part.type === 'variable' ? variableCel(part.variable, scope) : lookupCel(part, scope, sources);
  if ('why' in value || part.fallback === undefined || !value.optional) return value;
  return { expr: `${value.expr}.orValue(${celString(part.fallback)})`, optional: false };
}

function lookupCel(
  part: Extract<TemplatePart, { type: 'lookup' }>,
  scope: CelScope,
  sources: Set<string>,
): Translated {
  const { origin } = scope.sources.get(part.source)!;
  const source = `source ${part.source}`;
  if (origin.type === 'file') return { why: `${source} is a file, which admission cannot read` };
  if (origin.type === 'url') return { why: `${source} is a URL, which admission cannot read` };
  if (origin.key !== undefined) {
    return { why: `${source} is a document in key ${origin.key} of its ConfigMap, which CEL cannot parse` };
  }
  if (part.field !== undefined) {
    return { why: `it reads field ${part.field} of an entry, and a ConfigMap's data has values only` };
  }
  const key = variableCel(part.key, scope);
  if ('why' in key) return key;
  sources.add(part.source);
  // The binding lets the policy run without its ConfigMap (parameterNotFoundAction: Allow): then params is null.
  const entry = (k: string) => `(params != null ? params.?data[?${k}] : optional.none())`;
  return { expr: key.optional ? `${key.expr}.optFlatMap(k, ${entry('k')})` : entry(key.expr), optional: true };
}

function variableCel(variable: Variable, scope: CelScope): Translated {
  const { resource } = scope;
  if (variable.type === 'map') {
    return { expr: `object.metadata.?${variable.map}[?${celString(variable.key)}]`, optional: true };
  }
  if (variable.type === 'object') {
    // The object as the request carries it; a string, int or bool field's text, as the controller renders it.
    // A name is selected (escaped as Kubernetes' CEL escapes field names); a map key (with dots,
    // slashes) is indexed.
    const path = variable.field.steps.map((step) => {
      // compileTemplate refuses [*]: a template renders one value ([*] is for references' fields).
      if (step === null) throw new Error(`[*] in template field ${variable.field.path}`);
      return typeof step === 'number'
        ? `[?${step}]`
        : /^[A-Za-z_][A-Za-z0-9_]*$/.test(step)
        ? `.?${celFieldName(step)}`
        : `[?${celString(step)}]`;
    }).join('');
    return {
      expr:
        `object${path}.optFlatMap(f, type(f) == string ? optional.of(f) : type(f) == int || type(f) == bool ? optional.of(string(f)) : optional.none())`,
      optional: true,
    };
  }
  if (variable.type === 'related') {
    const { relation, field, key } = variable.read;
    if (relation !== 'namespace') {
      // A reference's object (a pod's node) is named by a field set after the create, if at all,
      // and CEL can read no other object: the controller sets the key.
      return { why: `it reads the object's ${relationName(relation)}, which admission does not see` };
    }
    // Null for cluster-scoped objects, which have no namespace: absent, as for the controller.
    return {
      expr: `(namespaceObject != null ? namespaceObject.metadata.?${field}[?${
        celString(key ?? '')
      }] : optional.none())`,
      optional: true,
    };
  }
  switch (variable.field) {
    case 'name':
      // Absent when the API server generates the name (generateName): it does so after admission.
      return { expr: 'object.metadata.?name', optional: true };
    case 'namespace':
      // request.namespace is unset for cluster-scoped objects, and a Namespace's own name for a
      // Namespace: the controller renders "" for both. namespaceObject is null exactly for them.
      return {
        expr: resource
          ? (resource.namespaced ? 'request.namespace' : '""')
          : '(namespaceObject != null ? request.namespace : "")',
        optional: false,
      };
    case 'uid':
      return { why: 'the API server gives the uid after admission' };
    case 'kind':
      return { expr: resource ? celString(resource.kind) : 'request.kind.kind', optional: false };
    case 'resource':
      return { expr: resource ? celString(resource.resource) : 'request.resource.resource', optional: false };
    case 'group':
      return { expr: resource ? celString(resource.group) : 'request.resource.group', optional: false };
    case 'apiVersion':
      // The controller writes the version it watches, the preferred one, which a request in another version does not tell.
      return resource
        ? { expr: celString(apiVersion(resource)), optional: false }
        : { why: 'for kinds not named, the version the controller reads is not known at admission' };
  }
}

/** CEL's reserved words, which Kubernetes' CEL escapes as `__word__` when they name a field. */
const CEL_RESERVED = new Set([
  'as',
  'break',
  'const',
  'continue',
  'else',
  'false',
  'for',
  'function',
  'if',
  'import',
  'in',
  'let',
  'loop',
  'package',
  'namespace',
  'null',
  'return',
  'true',
  'var',
  'void',
  'while',
]);

/** A field's name as Kubernetes' CEL selects it: `__` as `__underscores__`, a reserved word as `__word__`. */
function celFieldName(name: string): string {
  const escaped = name.replaceAll('__', '__underscores__');
  return CEL_RESERVED.has(escaped) ? `__${escaped}__` : escaped;
}
