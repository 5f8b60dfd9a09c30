// The API server's audit log (JSON lines, one per request stage: ResponseStarted for watches,
// ResponseComplete for every request), read as it grows: what the tests and the bench count
// requests with.
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';

export interface AuditEvent {
  readonly auditID: string;
  readonly stage: string;
  readonly verb: string;
  readonly userAgent?: string;
  readonly user?: { readonly username?: string };
  readonly requestURI: string;
  readonly objectRef?: { readonly resource?: string; readonly namespace?: string; readonly name?: string };
  readonly responseStatus?: { readonly code?: number; readonly message?: string };
  readonly requestReceivedTimestamp?: string;
  readonly stageTimestamp?: string;
}

/** Read at most this much at once: a 50k-object bench writes several hundred MB. */
const CHUNK = 16 * 1024 * 1024;

/** The events of the log at `path` as it grows; each read() answers those written since the previous one. */
export class AuditLog {
  readonly #path: string;
  readonly #prefix: string | undefined;
  /** Lines without it are skipped unparsed. */
  readonly #needle: string | undefined;
  #offset: number;
  /** Keeps a character split between two reads whole. */
  readonly #decoder = new StringDecoder('utf8');
  #partial = '';

  /**
   * `from: 'now'` starts at the log's current end, else at its beginning; with `userAgentPrefix`,
   * only the requests of user agents starting with it.
   */
  constructor(path: string, options: { readonly from?: 'start' | 'now'; readonly userAgentPrefix?: string } = {}) {
    this.#path = path;
    this.#prefix = options.userAgentPrefix;
    this.#needle = options.userAgentPrefix === undefined ? undefined : `"userAgent":"${options.userAgentPrefix}`;
    this.#offset = options.from === 'now' ? sizeOf(path) : 0;
  }

  read(): AuditEvent[] {
    const events: AuditEvent[] = [];
    const fd = openSync(this.#path, 'r');
    try {
      const size = fstatSync(fd).size;
      if (size < this.#offset) {
        throw new Error(
          `${this.#path} shrank from ${this.#offset} to ${size} bytes (rotated?): its requests would be miscounted`,
        );
      }
      const buffer = Buffer.alloc(Math.min(CHUNK, size - this.#offset));
      while (this.#offset < size) {
        const n = readSync(fd, buffer, 0, Math.min(buffer.length, size - this.#offset), this.#offset);
        if (n <= 0) break;
        this.#offset += n;
        const lines = (this.#partial + this.#decoder.write(buffer.subarray(0, n))).split('\n');
        this.#partial = lines.pop() ?? '';
        for (const line of lines) {
          if (!line.startsWith('{') || (this.#needle !== undefined && !line.includes(this.#needle))) continue;
          const event = JSON.parse(line) as AuditEvent;
          if (this.#prefix === undefined || (event.userAgent ?? '').startsWith(this.#prefix)) events.push(event);
        }
      }
    } finally {
      closeSync(fd);
    }
    return events;
  }
}

function sizeOf(path: string): number {
  const fd = openSync(path, 'r');
  try {
    return fstatSync(fd).size;
  } finally {
    closeSync(fd);
  }
}

/** The events of the log at `path` so far that match `filter`. */
export function auditEvents(path: string, filter: (event: AuditEvent) => boolean = () => true): AuditEvent[] {
  return new AuditLog(path).read().filter(filter);
}

/**
 * The log as it grows: each call answers the events (matching `filter`) written since the
 * previous call, the first since now. Cheap where auditEvents() parses the whole log, which
 * stalls the calling process (and a fault proxy running in it) for seconds on a long run.
 */
export function auditTail(path: string, filter: (event: AuditEvent) => boolean = () => true): () => AuditEvent[] {
  const log = new AuditLog(path, { from: 'now' });
  return () => log.read().filter(filter);
}

/** Milliseconds since the epoch at which the API server received the request. */
export function receivedAt(event: AuditEvent): number {
  return Date.parse(event.requestReceivedTimestamp ?? event.stageTimestamp ?? '');
}

/** Requests by labeller itself (its user agent is `labeller/<version>`). */
export const byLabeller = (event: AuditEvent): boolean => (event.userAgent ?? '').startsWith('labeller/');

/**
 * Whether a request of `verb` to `uri` fills a cache with every object of a resource: a LIST, or
 * the WATCH of a streaming list (`sendInitialEvents=true`), which labeller sends in its place to
 * servers with WatchList.
 */
export const fillsCache = (verb: string, uri: string): boolean =>
  verb === 'list' || (verb === 'watch' && uri.includes('sendInitialEvents=true'));

/** The audit event of a request that fills a cache, once per request: a watch has another when it ends. */
export const fillStarted = (event: AuditEvent): boolean =>
  fillsCache(event.verb, event.requestURI) && (event.verb === 'list' || event.stage === 'ResponseStarted');

/** The cache fills among `events`, a line each (stage, status, URI, time): what a failed count shows. */
export const describeFills = (events: readonly AuditEvent[]): string =>
  events.filter((e) => fillsCache(e.verb, e.requestURI)).map((e) =>
    `${e.stageTimestamp ?? ''} ${e.stage} ${e.responseStatus?.code ?? ''} ${e.userAgent ?? ''} ${e.requestURI}`
  ).join('\n');

/** One request, however many stages the log has of it. */
export interface AuditRequest {
  readonly id: string;
  readonly verb: string;
  readonly userAgent: string;
  readonly resource: string;
  readonly namespace: string;
  /** The object's name; empty for a list, and for a create whose name the server generates. */
  readonly name: string;
  readonly uri: string;
  /** Epoch ms when the server received the request. */
  readonly received: number;
  /** Epoch ms of the last stage seen (ResponseComplete for finished requests). */
  completed: number | undefined;
  code: number | undefined;
}

/** The requests of one user agent prefix in the log, one record per request (audit ID), with its timing. */
export class AuditRequests {
  readonly #log: AuditLog;
  readonly #requests = new Map<string, AuditRequest>();

  constructor(path: string, userAgentPrefix: string) {
    this.#log = new AuditLog(path, { userAgentPrefix });
  }

  /** Requests received in [from, to] (epoch ms), after reading what is new. */
  requests(from = 0, to = Number.POSITIVE_INFINITY): AuditRequest[] {
    for (const event of this.#log.read()) this.#add(event);
    return [...this.#requests.values()].filter((r) => r.received >= from && r.received <= to);
  }

  #add(event: AuditEvent): void {
    const stageAt = Date.parse(event.stageTimestamp ?? '');
    const existing = this.#requests.get(event.auditID);
    if (existing) {
      existing.completed = stageAt;
      existing.code = event.responseStatus?.code ?? existing.code;
      return;
    }
    this.#requests.set(event.auditID, {
      id: event.auditID,
      verb: event.verb,
      userAgent: event.userAgent ?? '',
      resource: event.objectRef?.resource ?? '',
      namespace: event.objectRef?.namespace ?? '',
      name: event.objectRef?.name ?? '',
      uri: event.requestURI,
      received: receivedAt(event),
      completed: event.stage === 'ResponseComplete' ? stageAt : undefined,
      code: event.responseStatus?.code,
    });
  }
}

/** Requests counted by what `key` makes of each, e.g. `get leases 404`. */
export function countBy(requests: readonly AuditRequest[], key: (r: AuditRequest) => string): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of requests) {
    const k = key(r);
    counts[k] = (counts[k] ?? 0) + 1;
  }
  return counts;
}

/** Requests counted by verb, e.g. { get: 2, list: 3, watch: 3, patch: 300 }. */
export function byVerb(requests: readonly AuditRequest[]): Record<string, number> {
  const counts = countBy(requests, (r) => r.verb);
  return Object.fromEntries(
    Object.entries(counts).sort(([a], [b]) => VERB_ORDER.indexOf(a) - VERB_ORDER.indexOf(b) || a.localeCompare(b)),
  );
}

const VERB_ORDER = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'];

export function formatVerbs(counts: Readonly<Record<string, number>>): string {
  const entries = Object.entries(counts);
  return entries.length ? entries.map(([verb, n]) => `${verb} ${n}`).join(' · ') : 'none';
}
