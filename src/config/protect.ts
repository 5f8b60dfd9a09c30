// Protection: keys only labeller may set. A controller can only correct a label after someone has
// changed it; the API server can refuse the change. With `protect`, labeller renders a
// ValidatingAdmissionPolicy per kind entry (admission/protection.ts) that refuses, warns about or
// audits any UPDATE that adds, changes or removes a protected key or labeller's marker, unless
// the request comes from labeller's own identity or one the config names (`allow`: a GitOps
// controller's ServiceAccount, say). Identities are who the API server authenticated; a field
// manager's name is chosen by the client and proves nothing. At CREATE the mutating policy
// forces a protected key's value whatever `conflicts` says, so a user cannot bring in another.
//
//   protect: deny                        # every key the config sets, in every entry
//   protect:
//     mode: warn                         # deny | warn | audit: the rollout path, audit first
//     keys: [team, example.com/cost-center]   # default: every key the config sets
//     allow: [system:serviceaccount:argocd:argocd-application-controller, group:platform-admins]
//   kinds:
//     - resource: pods
//       protect: audit                   # an entry's own mode (or mapping with keys); false: none
import { describe, expectList, expectMapping, expectString, fail, isAbsent, rejectUnknownFields } from './fields.ts';

/** What the API server does with a request that changes a protected key. */
export type ProtectMode = 'deny' | 'warn' | 'audit';

export const PROTECT_MODES: readonly ProtectMode[] = ['deny', 'warn', 'audit'];

/** Protection as written: a mode, and the keys (undefined: every key the entry sets). */
export interface ProtectEntry {
  readonly mode: ProtectMode;
  readonly keys: readonly string[] | undefined;
}

/** The file's top-level `protect`, with the identities that may change protected keys besides labeller. */
export interface ProtectSettings extends ProtectEntry {
  readonly allow: readonly string[];
}

/** An identity of `allow`: a user name, or `group:<name>`. */
export const GROUP_PREFIX = 'group:';

/**
 * Reads a `protect` field: a mode, a mapping, or (in an entry, `entry` true) false for none.
 * Undefined when absent; null for `false`.
 */
export function parseProtect(value: unknown, where: string, entry: false): ProtectSettings | undefined;
export function parseProtect(value: unknown, where: string, entry: true): ProtectEntry | null | undefined;
export function parseProtect(
  value: unknown,
  where: string,
  entry: boolean,
): ProtectSettings | ProtectEntry | null | undefined {
  if (isAbsent(value)) return undefined;
  if (value === false && entry) return null;
  const modes = `"deny", "warn" or "audit"${entry ? ', or false for none' : ''}`;
  if (typeof value === 'string') {
    return { mode: parseMode(value, where, modes), keys: undefined, ...(entry ? {} : { allow: [] }) };
  }
  const fields = expectMapping(value, where, `${modes}, or a mapping such as "{mode: deny, keys: [team]}"`);
  rejectUnknownFields(fields, entry ? ['mode', 'keys'] : ['mode', 'keys', 'allow'], where);
  if (isAbsent(fields.mode)) throw fail(`${where}.mode`, `required: ${modes}`);
  const mode = parseMode(fields.mode, `${where}.mode`, modes);
  const keys = isAbsent(fields.keys) ? undefined : stringList(fields.keys, `${where}.keys`, 'keys, e.g. [team]');
  if (entry) return { mode, keys };
  const allow = isAbsent(fields.allow) ? [] : stringList(
    fields.allow,
    `${where}.allow`,
    'identities, e.g. [system:serviceaccount:argocd:argocd-application-controller, group:platform-admins]',
  );
  return { mode, keys, allow };
}

/** --protect: a mode, or `off` for none (over the file's). */
export function parseProtectFlag(value: string): ProtectMode | 'off' {
  if (value === 'off') return 'off';
  return parseMode(value, '--protect', '"deny", "warn", "audit" or "off"');
}

function parseMode(value: unknown, where: string, expected: string): ProtectMode {
  const mode = PROTECT_MODES.find((candidate) => candidate === value);
  if (mode === undefined) throw fail(where, `must be ${expected}, got ${describe(value)}`);
  return mode;
}

function stringList(value: unknown, where: string, expected: string): string[] {
  const items = expectList(value, where, `a list of ${expected}`);
  if (items.length === 0) throw fail(where, `empty list: list ${expected}, or remove the field`);
  const seen = new Set<string>();
  return items.map((item, index) => {
    const text = expectString(item, `${where}[${index}]`);
    if (text === '' || text === GROUP_PREFIX) throw fail(`${where}[${index}]`, `empty: name one of ${expected}`);
    if (seen.has(text)) throw fail(`${where}[${index}]`, `${JSON.stringify(text)} is listed twice: list each once`);
    seen.add(text);
    return text;
  });
}
