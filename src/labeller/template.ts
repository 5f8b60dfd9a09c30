/**
 * Label value templates such as "{{name}}", "team-{{ namespace }}",
 * "{{labels.app}}" or "{{annotations.example.com/owner}}". They compile once,
 * at config load, so a typo fails at startup rather than on every object.
 * Rendering does not validate: only the rendered value can be checked, with
 * validateLabelValue, by the caller.
 */
import type { Labels } from './labels.ts';
import { validateLabelKey } from './labels.ts';
import { suggest } from '../suggest.ts';

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
}

export interface Template {
  readonly source: string;
  /** The value when the source has no "{{", so it can be validated at load time; undefined otherwise. */
  readonly constantValue: string | undefined;
  /** The annotation keys it reads, so the cache keeps just those of each object. */
  readonly annotations: readonly string[];
  /** True when it copies the object's labels or annotations: values whoever writes the object chose. */
  readonly readsObjectMetadata: boolean;
  render(context: TemplateContext): string;
}

export class TemplateError extends Error {
  override readonly name = 'TemplateError';
}

const FIELD_VARIABLES = ['name', 'namespace', 'kind', 'resource', 'group', 'apiVersion', 'uid'] as const;
const MAP_VARIABLES = ['labels', 'annotations'] as const;
const ALLOWED = [...FIELD_VARIABLES, ...MAP_VARIABLES.map((map) => `${map}.<key>`)].join(', ');

type Part = (context: TemplateContext) => string;

export function compileTemplate(source: string): Template {
  if (!source.includes('{{')) return { source, constantValue: source, annotations: [], readsObjectMetadata: false, render: () => source };
  const annotations: string[] = [];
  const maps = new Set<string>();
  const parts = parse(source, annotations, maps);
  return {
    source,
    constantValue: undefined,
    annotations,
    readsObjectMetadata: maps.size > 0,
    render: (context) => parts.map((part) => part(context)).join(''),
  };
}

/** The template's parts; annotation keys it reads are added to `annotations`, the maps it reads (labels, annotations) to `maps`. */
function parse(source: string, annotations: string[], maps: Set<string>): Part[] {
  const parts: Part[] = [];
  let position = 0;
  for (let open = source.indexOf('{{'); open !== -1; open = source.indexOf('{{', position)) {
    const close = source.indexOf('}}', open + 2);
    if (close === -1) {
      throw new TemplateError(`template ${JSON.stringify(source)}: "{{" is not closed: add "}}" after the variable`);
    }
    const literal = source.slice(position, open);
    if (literal !== '') parts.push(() => literal);
    const name = source.slice(open + 2, close).trim();
    parts.push(variable(source, name));
    if (name.startsWith('annotations.')) annotations.push(name.slice('annotations.'.length));
    for (const map of MAP_VARIABLES) if (name.startsWith(`${map}.`)) maps.add(map);
    position = close + 2;
  }
  const tail = source.slice(position);
  if (tail !== '') parts.push(() => tail);
  return parts;
}

function variable(source: string, name: string): Part {
  const fail = (problem: string) => new TemplateError(`template ${JSON.stringify(source)}: ${problem}`);
  const field = FIELD_VARIABLES.find((candidate) => candidate === name);
  if (field !== undefined) return (context) => context[field];

  const dot = name.indexOf('.');
  const head = dot === -1 ? name : name.slice(0, dot);
  const map = MAP_VARIABLES.find((candidate) => candidate === head);
  if (map === undefined) {
    const match = dot === -1 ? suggest(name, FIELD_VARIABLES) : suggest(head, MAP_VARIABLES);
    const hint = match === undefined ? '' : ` (did you mean "${match}${name.slice(head.length)}"?)`;
    const shown = name === '' ? 'empty variable "{{}}"' : `unknown variable ${JSON.stringify(name)}`;
    throw fail(`${shown}${hint}; use one of ${ALLOWED}`);
  }

  const key = dot === -1 ? '' : name.slice(dot + 1);
  if (key === '') throw fail(`"${map}" needs a key, e.g. "{{${map}.app}}"`);
  // Annotation keys follow the label key syntax too, so a key that fails it could never match.
  const keyProblem = validateLabelKey(key);
  if (keyProblem !== undefined) throw fail(`variable ${JSON.stringify(name)}: ${keyProblem}`);
  // A missing label or annotation renders as "", like an unset field.
  return (context) => (Object.hasOwn(context[map], key) ? (context[map][key] ?? '') : '');
}
