// The `sources:` of kinds.yaml: each named, of one of three types.
//
//   sources:
//     teams:
//       configMap: { namespace: platform, name: teams, key: teams.yaml }   # key: optional
//     owners:
//       file: /etc/labeller/sources/owners.yaml
//     catalog:
//       url: https://catalog.example.com/teams.json
//       interval: 5m               # optional: how often it is polled (default 5m)
//       timeout: 10s               # optional: for the whole answer, body included (default 10s)
//       caFile: /etc/catalog/ca.crt          # optional: trust roots, read at each poll
//       bearerTokenFile: /etc/catalog/token  # optional: read at each poll, never logged
//       maxBytes: 1048576          # optional: a larger body is refused (default 1 MiB)
//       allowHTTP: false           # optional: plain http:// only when asked for
//     any:
//       required: true             # optional: /readyz waits for its first load
//       allowMassRemoval: true     # optional: take content that is empty or drops most keys at once
//                                  # (by default refused as an outage: the last good content stays)
//       acceptSmallerAfter: 10m    # optional: content that drops most keys, unchanged this long, is
//                                  # taken (default 10m; 0s: never): a catalogue that shrank stays so
import { isDns1123Label } from '../apimachinery/names.ts';
import { durationProblem, parseDuration } from '../util/duration.ts';
import { redactUrl } from '../util/url.ts';
import { expectMapping, expectString, fail, isAbsent, rejectUnknownFields } from './fields.ts';

/** Where a source's content comes from. */
export type SourceOrigin =
  | {
    readonly type: 'configMap';
    readonly namespace: string;
    readonly name: string;
    /** One key of the ConfigMap's data holding YAML or JSON; without it, the data itself is the map. */
    readonly key: string | undefined;
  }
  | { readonly type: 'file'; readonly path: string }
  | ({ readonly type: 'url' } & HttpOrigin);

/** An HTTPS endpoint polled for a source's content. */
export interface HttpOrigin {
  readonly url: string;
  readonly intervalMs: number;
  readonly timeoutMs: number;
  /** PEM trust roots for the endpoint, read again at each poll (rotated certificates). */
  readonly caFile: string | undefined;
  /** A bearer token, read again at each poll; never logged. */
  readonly bearerTokenFile: string | undefined;
  readonly maxBytes: number;
}

export interface SourceSpec {
  readonly name: string;
  readonly origin: SourceOrigin;
  /** Readiness waits for its first load (default: only a note in /readyz). */
  readonly required: boolean;
  /**
   * Content with no entries, or that drops more than half of the keys at once, is taken (the
   * default refuses it as an outage and keeps the last good content).
   */
  readonly allowMassRemoval: boolean;
  /**
   * Content that drops most keys at once (not empty content), refused as an outage, is taken once
   * it has stayed the same this long: a catalogue that really shrank, while labeller ran or while
   * it was down, is not refused for ever. 0: never.
   */
  readonly acceptSmallerAfterMs: number;
}

/** How long content that drops most keys must stay the same before it is taken, by default. */
export const ACCEPT_SMALLER_AFTER_MS = 10 * 60_000;

const TYPES = ['configMap', 'file', 'url'] as const;
const SOURCE_FIELDS = [
  ...TYPES,
  'required',
  'allowMassRemoval',
  'acceptSmallerAfter',
  'interval',
  'timeout',
  'caFile',
  'bearerTokenFile',
  'maxBytes',
  'allowHTTP',
];
const URL_ONLY = ['interval', 'timeout', 'caFile', 'bearerTokenFile', 'maxBytes', 'allowHTTP'];
const NAME = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** The sources by name; empty when there are none. */
export function parseSources(value: unknown, where: string): ReadonlyMap<string, SourceSpec> {
  const sources = new Map<string, SourceSpec>();
  if (isAbsent(value)) return sources;
  const fields = expectMapping(value, where, 'a mapping of source names to sources, e.g. "teams: {configMap: {…}}"');
  for (const [name, spec] of Object.entries(fields)) {
    const path = `${where}.${name}`;
    if (!NAME.test(name)) {
      throw fail(path, 'a source name is lowercase letters, digits and "-", starting with a letter (e.g. "teams")');
    }
    sources.set(name, parseSource(name, spec, path));
  }
  return sources;
}

function parseSource(name: string, value: unknown, where: string): SourceSpec {
  const fields = expectMapping(value, where, 'a mapping with one of configMap, file or url');
  rejectUnknownFields(fields, SOURCE_FIELDS, where);
  const types = TYPES.filter((type) => !isAbsent(fields[type]));
  if (types.length !== 1) {
    throw fail(
      where,
      `give exactly one of configMap, file or url (found ${types.length === 0 ? 'none' : types.join(' and ')})`,
    );
  }
  const type = types[0]!;
  const misplaced = type === 'url' ? undefined : URL_ONLY.find((field) => !isAbsent(fields[field]));
  if (misplaced !== undefined) throw fail(`${where}.${misplaced}`, 'only a url source takes it: remove it');
  const flag = (field: string): boolean => {
    const value = fields[field];
    if (!isAbsent(value) && typeof value !== 'boolean') throw fail(`${where}.${field}`, 'must be true or false');
    return value === true;
  };
  return {
    name,
    origin: origin(type, fields, where),
    required: flag('required'),
    allowMassRemoval: flag('allowMassRemoval'),
    acceptSmallerAfterMs: isAbsent(fields['acceptSmallerAfter'])
      ? ACCEPT_SMALLER_AFTER_MS
      : duration(fields['acceptSmallerAfter'], `${where}.acceptSmallerAfter`, true),
  };
}

/** A duration field: Go-style, as long as a timer can wait; `zero`: 0s is allowed. */
function duration(value: unknown, where: string, zero = false): number {
  const text = expectString(value, where);
  const ms = parseDuration(text);
  if (ms === undefined || ms < 0 || (ms === 0 && !zero)) {
    throw fail(where, `${JSON.stringify(text)}: use e.g. 30s or 5m${zero ? ' (0s: never)' : ''}`);
  }
  const problem = durationProblem(ms);
  if (problem !== undefined) throw fail(where, `${JSON.stringify(text)} is ${problem}`);
  return ms;
}

function origin(type: (typeof TYPES)[number], fields: Record<string, unknown>, where: string): SourceOrigin {
  if (type === 'file') {
    const path = expectString(fields['file'], `${where}.file`);
    if (!path.startsWith('/')) throw fail(`${where}.file`, `${JSON.stringify(path)}: give an absolute path`);
    return { type, path };
  }
  if (type === 'configMap') {
    const at = `${where}.configMap`;
    const configMap = expectMapping(fields['configMap'], at, 'a mapping such as {namespace: platform, name: teams}');
    rejectUnknownFields(configMap, ['namespace', 'name', 'key'], at);
    const namespace = expectString(configMap['namespace'], `${at}.namespace`);
    const name = expectString(configMap['name'], `${at}.name`);
    if (!isDns1123Label(namespace)) {
      throw fail(`${at}.namespace`, `${JSON.stringify(namespace)} is not a namespace name`);
    }
    if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(name)) {
      throw fail(`${at}.name`, `${JSON.stringify(name)} is not a ConfigMap name`);
    }
    const key = isAbsent(configMap['key']) ? undefined : expectString(configMap['key'], `${at}.key`);
    return { type, namespace, name, key };
  }
  const url = expectString(fields['url'], `${where}.url`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw fail(
      `${where}.url`,
      `${JSON.stringify(redactUrl(url))} is not a URL: write e.g. https://catalog.example.com/teams.json`,
    );
  }
  const allowHTTP = fields['allowHTTP'] === true;
  if (parsed.protocol !== 'https:' && !(parsed.protocol === 'http:' && allowHTTP)) {
    throw fail(
      `${where}.url`,
      parsed.protocol === 'http:'
        ? 'plain http:// sends the content, and a token, in clear: use https://, or set "allowHTTP: true" to accept that'
        : 'use an https:// URL',
    );
  }
  if (parsed.username || parsed.password) {
    throw fail(`${where}.url`, 'no credentials in the URL (they would be logged): use bearerTokenFile');
  }
  const optional = (field: string, fallback: number): number =>
    isAbsent(fields[field]) ? fallback : duration(fields[field], `${where}.${field}`);
  const file = (field: string): string | undefined =>
    isAbsent(fields[field]) ? undefined : expectString(fields[field], `${where}.${field}`);
  const maxBytes = fields['maxBytes'] ?? 1024 * 1024;
  if (typeof maxBytes !== 'number' || !Number.isInteger(maxBytes) || maxBytes < 1) {
    throw fail(`${where}.maxBytes`, 'must be a whole number of bytes, e.g. 1048576');
  }
  return {
    type,
    url,
    intervalMs: optional('interval', 300_000),
    timeoutMs: optional('timeout', 10_000),
    caFile: file('caFile'),
    bearerTokenFile: file('bearerTokenFile'),
    maxBytes,
  };
}
