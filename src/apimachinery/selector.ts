/**
 * Label selectors in the API's string form: "app", "!app", "app=web",
 * "app==web", "app!=web", "tier in (a, b)", "tier notin (a,b)", joined by
 * commas. The API server does the real filtering; matches() lets a controller
 * double-check objects it already holds, and toLabelSelector() gives the structured form the API
 * takes where a selector is an object (an admission policy's objectSelector).
 */
import type { Labels } from './labelsyntax.ts';
import { validateLabelKey, validateLabelValue } from './labelsyntax.ts';

export interface Selector {
  /** Whether the labels satisfy every requirement; an empty selector matches everything. */
  matches(labels: Labels): boolean;
  /** The canonical form for the labelSelector query parameter: requirements sorted by key, set values sorted. */
  toString(): string;
  /** The same requirements as a metav1.LabelSelector, in the canonical order. */
  toLabelSelector(): LabelSelector;
}

/** metav1.LabelSelector with expressions only: `app=web,app=api` is two requirements on one key, which matchLabels cannot hold. */
export interface LabelSelector {
  readonly matchExpressions: readonly {
    readonly key: string;
    readonly operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
    readonly values?: readonly string[];
  }[];
}

export class SelectorError extends Error {
  override readonly name = 'SelectorError';
}

type Requirement =
  | { readonly operator: 'exists' | '!exists'; readonly key: string }
  | { readonly operator: '=' | '!='; readonly key: string; readonly value: string }
  | { readonly operator: 'in' | 'notin'; readonly key: string; readonly values: readonly string[] };

const FORMS = 'write key, !key, key=value, key!=value, key in (v1,v2) or key notin (v1,v2)';

export function parseSelector(text: string): Selector {
  const requirements = splitTerms(text)
    .map(parseTerm)
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const canonical = requirements.map(format).join(',');
  return {
    matches: (labels) => requirements.every((requirement) => matches(requirement, labels)),
    toString: () => canonical,
    toLabelSelector: () => ({ matchExpressions: requirements.map(expression) }),
  };
}

/** Splits on the commas that separate terms, not those inside "(...)" value lists. */
function splitTerms(text: string): string[] {
  if (text.trim() === '') return [];
  const terms: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const char = text[i];
    if (char === '(') depth++;
    // A stray ")" is left in its term, where parseTerm reports it.
    else if (char === ')') depth = Math.max(0, depth - 1);
    else if (char === ',' && depth === 0) {
      terms.push(text.slice(start, i).trim());
      start = i + 1;
    }
  }
  terms.push(text.slice(start).trim());
  return terms;
}

function parseTerm(term: string): Requirement {
  if (term === '') throw new SelectorError(`empty term: remove the extra ","`);
  const fail = (problem: string) => new SelectorError(`term ${JSON.stringify(term)}: ${problem}`);
  const [, negated = '', key = '', rest = ''] = /^(!?)\s*([^\s!=<>(),]*)(.*)$/s.exec(term) ?? [];
  if (key === '') throw fail(`expected a label key; ${FORMS}`);
  const keyProblem = validateLabelKey(key);
  if (keyProblem !== undefined) throw fail(keyProblem);
  const checkValue = (value: string) => {
    const problem = validateLabelValue(value);
    if (problem !== undefined) throw fail(problem);
    return value;
  };
  const operation = rest.trim();

  if (negated !== '') {
    if (operation !== '') throw fail(`"!" takes a key alone, e.g. "!${key}"`);
    return { operator: '!exists', key };
  }
  if (operation === '') return { operator: 'exists', key };

  const equality = /^(==|=|!=)(.*)$/s.exec(operation);
  if (equality !== null) {
    const value = checkValue(equality[2]?.trim() ?? '');
    return { operator: equality[1] === '!=' ? '!=' : '=', key, value };
  }

  const set = /^(in|notin)(?=[\s(])\s*(.*)$/s.exec(operation);
  if (set !== null) {
    const operator = set[1] === 'in' ? 'in' : 'notin';
    const list = set[2] ?? '';
    const example = `e.g. "${key} ${operator} (a, b)"`;
    if (!list.startsWith('(')) throw fail(`"${operator}" needs a value list in parentheses, ${example}`);
    if (!list.endsWith(')')) throw fail(`missing ")" at the end of the value list, ${example}`);
    const inner = list.slice(1, -1);
    if (inner.trim() === '') throw fail(`"${operator}" needs at least one value, ${example}`);
    const values = [...new Set(inner.split(',').map((value) => checkValue(value.trim())))].sort();
    return { operator, key, values };
  }

  throw fail(`unsupported operator after "${key}"; ${FORMS}`);
}

function matches(requirement: Requirement, labels: Labels): boolean {
  // hasOwn, not labels[key]: a key such as "constructor" must not find Object.prototype.
  const value = Object.hasOwn(labels, requirement.key) ? labels[requirement.key] : undefined;
  switch (requirement.operator) {
    case 'exists':
      return value !== undefined;
    case '!exists':
      return value === undefined;
    case '=':
      return value === requirement.value;
    case '!=':
      return value !== requirement.value;
    case 'in':
      return value !== undefined && requirement.values.includes(value);
    case 'notin':
      return value === undefined || !requirement.values.includes(value);
  }
}

function format(requirement: Requirement): string {
  switch (requirement.operator) {
    case 'exists':
      return requirement.key;
    case '!exists':
      return `!${requirement.key}`;
    case '=':
    case '!=':
      return `${requirement.key}${requirement.operator}${requirement.value}`;
    case 'in':
    case 'notin':
      return `${requirement.key} ${requirement.operator} (${requirement.values.join(',')})`;
  }
}

/** A requirement as a LabelSelector expression: `!=` is NotIn, which matches objects without the key too, as `!=` does. */
function expression(requirement: Requirement): LabelSelector['matchExpressions'][number] {
  const { key } = requirement;
  switch (requirement.operator) {
    case 'exists':
      return { key, operator: 'Exists' };
    case '!exists':
      return { key, operator: 'DoesNotExist' };
    case '=':
      return { key, operator: 'In', values: [requirement.value] };
    case '!=':
      return { key, operator: 'NotIn', values: [requirement.value] };
    case 'in':
      return { key, operator: 'In', values: requirement.values };
    case 'notin':
      return { key, operator: 'NotIn', values: requirement.values };
  }
}
