// Reading a config document's fields: each expectation that fails is a ConfigError naming the
// field (kinds.yaml: kinds[0].labels["team"]) and what to write instead.
import { suggest } from '../util/suggest.ts';
import { UsageError } from '../util/usage.ts';

export class ConfigError extends UsageError {
  override readonly name: string = 'ConfigError';
}

// An empty YAML value ("labels:" with nothing after it) loads as null: treat it as absent.
export function isAbsent(value: unknown): value is null | undefined {
  return value === undefined || value === null;
}

export function expectMapping(value: unknown, where: string, expected: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw fail(where, `expected ${expected}, got ${describe(value)}`);
  }
  return value as Record<string, unknown>;
}

export function expectList(value: unknown, where: string, expected: string): unknown[] {
  if (!Array.isArray(value)) throw fail(where, `expected ${expected}, got ${describe(value)}`);
  return value;
}

export function expectString(value: unknown, where: string): string {
  if (typeof value === 'string') return value;
  // YAML reads unquoted 3, true or 1.0 as numbers and booleans.
  const fix = typeof value === 'number' || typeof value === 'boolean' ? ': put it in quotes' : '';
  throw fail(where, `expected a string, got ${describe(value)}${fix}`);
}

export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  switch (typeof value) {
    case 'string':
      return `the string ${JSON.stringify(value)}`;
    case 'number':
    case 'boolean':
      return `the ${typeof value} ${String(value)}`;
    case 'object':
      return 'a mapping';
    default:
      return typeof value;
  }
}

export function keyPath(where: string, key: string): string {
  return `${where}[${JSON.stringify(key)}]`;
}

export function fail(where: string, problem: string): ConfigError {
  return new ConfigError(`${where}: ${problem}`);
}

export function rejectUnknownFields(fields: Record<string, unknown>, known: readonly string[], where: string): void {
  for (const field of Object.keys(fields)) {
    if (known.includes(field)) continue;
    const match = suggest(field, known);
    throw fail(
      where,
      match === undefined
        ? `unknown field ${JSON.stringify(field)}: use one of ${known.join(', ')}`
        : `unknown field ${JSON.stringify(field)} (did you mean ${JSON.stringify(match)}?)`,
    );
  }
}

const RESOURCE_PATTERN = /^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?$/;

/** What is wrong with a kubectl-style resource name as written, or undefined (whether it exists is for discovery to say). */
export function resourceProblem(resource: string): string | undefined {
  if (resource === '') return 'required, e.g. "deployments"';
  if (!RESOURCE_PATTERN.test(resource)) {
    return `${
      JSON.stringify(resource)
    } is not a kubectl-style resource name: write e.g. "deployments", "deployments.apps" or "Deployment.v1.apps"`;
  }
  return undefined;
}
