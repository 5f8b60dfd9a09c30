// Incremental reader of the API server's audit log (JSON lines, one per request stage): keeps
// the requests of one user agent prefix, one record per request (audit ID), with its timing.
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';

export interface AuditRequest {
  readonly id: string;
  readonly verb: string;
  readonly userAgent: string;
  readonly resource: string;
  readonly namespace: string;
  readonly uri: string;
  /** Epoch ms when the server received the request. */
  readonly received: number;
  /** Epoch ms of the last stage seen (ResponseComplete for finished requests). */
  completed: number | undefined;
  code: number | undefined;
}

interface RawEvent {
  auditID: string;
  stage: string;
  verb: string;
  requestURI: string;
  userAgent?: string;
  objectRef?: { resource?: string; namespace?: string };
  responseStatus?: { code?: number };
  requestReceivedTimestamp: string;
  stageTimestamp: string;
}

const CHUNK = 16 * 1024 * 1024;

export class AuditLog {
  readonly #path: string;
  readonly #needle: string;
  readonly #prefix: string;
  #offset = 0;
  #partial = '';
  readonly #requests = new Map<string, AuditRequest>();

  /** Keeps requests whose user agent starts with `userAgentPrefix`. */
  constructor(path: string, userAgentPrefix: string) {
    this.#path = path;
    this.#prefix = userAgentPrefix;
    this.#needle = `"userAgent":"${userAgentPrefix}`;
  }

  /** Reads what the server wrote since the last call. */
  update(): void {
    const fd = openSync(this.#path, 'r');
    try {
      const size = fstatSync(fd).size;
      if (size < this.#offset) {
        throw new Error(
          `${this.#path} shrank from ${this.#offset} to ${size} bytes (rotated?): the requests counted from it would be wrong`,
        );
      }
      const buffer = Buffer.alloc(CHUNK);
      while (this.#offset < size) {
        const n = readSync(fd, buffer, 0, Math.min(CHUNK, size - this.#offset), this.#offset);
        if (n <= 0) break;
        this.#offset += n;
        const text = this.#partial + buffer.toString('utf8', 0, n);
        const lines = text.split('\n');
        this.#partial = lines.pop() ?? '';
        for (const line of lines) if (line.includes(this.#needle)) this.#add(JSON.parse(line) as RawEvent);
      }
    } finally {
      closeSync(fd);
    }
  }

  /** Requests received in [from, to] (epoch ms), after reading what is new. */
  requests(from = 0, to = Number.POSITIVE_INFINITY): AuditRequest[] {
    this.update();
    return [...this.#requests.values()].filter((r) => r.received >= from && r.received <= to);
  }

  #add(event: RawEvent): void {
    if (!(event.userAgent ?? '').startsWith(this.#prefix)) return;
    const stageAt = Date.parse(event.stageTimestamp);
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
      uri: event.requestURI,
      received: Date.parse(event.requestReceivedTimestamp),
      completed: event.stage === 'ResponseComplete' ? stageAt : undefined,
      code: event.responseStatus?.code,
    });
  }
}

/** Requests counted by verb, e.g. { get: 2, list: 3, watch: 3, patch: 300 }. */
export function byVerb(requests: readonly AuditRequest[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const r of requests) counts[r.verb] = (counts[r.verb] ?? 0) + 1;
  return Object.fromEntries(
    Object.entries(counts).sort(([a], [b]) => VERB_ORDER.indexOf(a) - VERB_ORDER.indexOf(b) || a.localeCompare(b)),
  );
}

const VERB_ORDER = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'];

export function formatVerbs(counts: Readonly<Record<string, number>>): string {
  const entries = Object.entries(counts);
  return entries.length ? entries.map(([verb, n]) => `${verb} ${n}`).join(' · ') : 'none';
}
