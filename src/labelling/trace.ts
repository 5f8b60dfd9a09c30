// What a template read while rendering one key for one object: the object's own labels,
// annotations and fields outside its metadata, a related object's (its namespace, owner, root owner, an object a reference
// names, with the field that named it) and the sources' entries it
// looked up. Recorded by wrapping the template context, so whatever a template reads is seen,
// however it is written; only `labeller explain` renders this way, never the reconcile path.
import type { MetadataField } from '../config/model.ts';
import {
  type RelatedObject,
  type Relation,
  relationName,
  type Template,
  type TemplateContext,
} from '../config/template.ts';
import type { Unreadable } from './ports.ts';

/** One value a template read; `value` undefined: it was absent. */
export type Input =
  | { readonly from: 'object'; readonly map: MetadataField; readonly key: string; readonly value?: string }
  /** A field of the object outside its metadata, by its path. */
  | { readonly from: 'field'; readonly path: string; readonly value?: string }
  | {
    readonly from: Relation;
    /** Absent: the object has no such related object (no owner). */
    readonly object?: { readonly kind: string; readonly name: string | undefined };
    /** `labels.<key>`, `annotations.<key>`, `name` or `kind`; absent when there is no object. */
    readonly read?: string;
    readonly value?: string;
    /** For a reference: the field that named it, and its value (RelatedObject's via). */
    readonly via?: NonNullable<RelatedObject['via']>;
  }
  | {
    readonly from: 'source';
    readonly source: string;
    readonly key: string;
    readonly field?: string;
    readonly value?: string;
  };

/** One key rendered for an object: its value, or why it has none. */
export type Rendering =
  /** A source it reads has never loaded, or a related object it reads cannot be read (`reading` says which). */
  | { readonly state: 'held'; readonly why: Unreadable; readonly reading: string }
  /** A variable it reads has no value: the key is not wanted on this object. */
  | { readonly state: 'absent' }
  /** `problem`: why the rendered value cannot be written. */
  | { readonly state: 'invalid'; readonly problem: string }
  | { readonly state: 'rendered'; readonly value: string };

export interface KeyTrace {
  readonly field: MetadataField;
  readonly key: string;
  readonly template: Template;
  readonly inputs: readonly Input[];
  readonly rendering: Rendering;
}

/** `context`, recording in `inputs` each value a template reads of it. */
export function tracing(context: TemplateContext, inputs: Input[]): TemplateContext {
  const objects: Partial<Record<Relation, RelatedObject>> = {};
  for (const [relation, object] of Object.entries(context.related ?? {}) as [Relation, RelatedObject][]) {
    objects[relation] = relatedTracing(relation, object, inputs);
  }
  // A relation read that finds no object (an object without owners) is an input too.
  const related = new Proxy(objects, {
    get(target, relation, receiver) {
      const object: unknown = Reflect.get(target, relation, receiver);
      if (object === undefined && typeof relation === 'string') inputs.push({ from: relation as Relation });
      return object;
    },
  });
  const { lookup, field } = context;
  return {
    ...context,
    field: field && ((path) => {
      const value = field(path);
      inputs.push({ from: 'field', path, ...has(value) });
      return value;
    }),
    labels: mapTracing(
      context.labels,
      (key, value) => inputs.push({ from: 'object', map: 'labels', key, ...has(value) }),
    ),
    annotations: mapTracing(
      context.annotations,
      (key, value) => inputs.push({ from: 'object', map: 'annotations', key, ...has(value) }),
    ),
    related,
    lookup: lookup && ((source, key, field) => {
      const value = lookup(source, key, field);
      inputs.push({ from: 'source', source, key, ...(field === undefined ? {} : { field }), ...has(value) });
      return value;
    }),
  };
}

function relatedTracing(relation: Relation, object: RelatedObject, inputs: Input[]): RelatedObject {
  const { kind, name, via } = object;
  const push = (read: string, value: string | undefined) =>
    inputs.push({ from: relation, object: { kind, name }, read, ...has(value), ...(via ? { via } : {}) });
  return {
    get kind() {
      push('kind', kind);
      return kind;
    },
    get name() {
      push('name', name);
      return name;
    },
    labels: mapTracing(object.labels, (key, value) => push(`labels.${key}`, value)),
    annotations: mapTracing(object.annotations, (key, value) => push(`annotations.${key}`, value)),
  };
}

/**
 * A read-only map whose every read of a key is told to `read`: templates ask Object.hasOwn
 * first (an absent key is told then) and read the value only of a key it has.
 */
function mapTracing(
  map: Readonly<Record<string, string>>,
  read: (key: string, value: string | undefined) => void,
): Readonly<Record<string, string>> {
  return new Proxy(map, {
    getOwnPropertyDescriptor(target, key) {
      const descriptor = Reflect.getOwnPropertyDescriptor(target, key);
      if (descriptor === undefined && typeof key === 'string') read(key, undefined);
      return descriptor;
    },
    get(target, key, receiver) {
      const value: unknown = Reflect.get(target, key, receiver);
      if (typeof key === 'string' && Object.hasOwn(target, key)) read(key, String(value));
      return value;
    },
  });
}

const has = (value: string | undefined): { value?: string } => (value === undefined ? {} : { value });

/**
 * What a rendering found missing, one phrase per input without a value ("the object has no label
 * tier", "its namespace has no label team"), naming no related object, so many objects share it.
 */
export function absences(inputs: readonly Input[]): string[] {
  return [
    ...new Set(
      inputs.filter((input) => input.value === undefined).map((input) => {
        if (input.from === 'object') return `the object has no ${singular(input.map)} ${input.key}`;
        if (input.from === 'field') return `the object's ${input.path} is not set (or is no string, number or boolean)`;
        if (input.from === 'source') {
          return `source ${input.source} has no entry ${JSON.stringify(input.key)}${
            input.field === undefined ? '' : ` with ${input.field}`
          }`;
        }
        const relation = relationName(input.from);
        if (!input.object) return `the object has no ${relation}`;
        const [map = '', ...key] = (input.read ?? '').split('.');
        return map === 'labels' || map === 'annotations'
          ? `its ${relation} has no ${singular(map)} ${key.join('.')}`
          : `its ${relation} has no ${map}`;
      }),
    ),
  ];
}

const singular = (map: MetadataField): string => (map === 'labels' ? 'label' : 'annotation');
