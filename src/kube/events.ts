// Writing events.k8s.io/v1 Events: create a series' Event, then patch its series count. The
// Event lives in its object's namespace (`default` for cluster-scoped objects, as client-go does),
// is named `<object>.<hex time>` like client-go's, and is reported by one controller and instance.
import type { KubeClient } from './client.ts';
import { isForbidden } from '../apimachinery/errors.ts';
import { microTime } from '../util/microtime.ts';
import type { EventContent } from '../apimachinery/objects.ts';

/** Who reports: `reportingController` and `reportingInstance` (at most 128 characters each). */
export interface Reporter {
  readonly controller: string;
  readonly instance: string;
}

/** How often a series was seen (counts from 1; `series` is written from 2 on, as the API requires). */
export interface EventTimes {
  readonly count: number;
  readonly firstObservedMs: number;
  readonly lastObservedMs: number;
}

/** The identity may not write Events: names the grant, or the switch. */
export class EventsForbidden extends Error {
  override readonly name = 'EventsForbidden';
}

const NOTE_MAX = 1024;
const NAME_MAX = 253;

export class EventsApi {
  readonly #client: KubeClient;
  readonly #reporter: Reporter;

  constructor(client: KubeClient, reporter: Reporter) {
    this.#client = client;
    this.#reporter = reporter;
  }

  /** Creates the Event; answers its `namespace/name`. */
  async create(event: EventContent, times: EventTimes, signal: AbortSignal): Promise<string> {
    const namespace = event.regarding.namespace || 'default';
    // client-go's nanoseconds; ours are random below the millisecond, so two series of one object never share a name.
    const nanos = BigInt(times.firstObservedMs) * 1_000_000n + BigInt(Math.floor(Math.random() * 1_000_000));
    const suffix = `.${nanos.toString(16)}`;
    const name = `${event.regarding.name.slice(0, NAME_MAX - suffix.length)}${suffix}`;
    const { regarding } = event;
    const body = {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: { name, namespace },
      eventTime: microTime(times.firstObservedMs),
      ...(times.count > 1 ? { series: series(times) } : {}),
      reportingController: this.#reporter.controller,
      reportingInstance: this.#reporter.instance,
      action: event.action,
      reason: event.reason,
      type: event.type,
      note: truncate(event.note),
      regarding: {
        apiVersion: regarding.apiVersion,
        kind: regarding.kind,
        name: regarding.name,
        ...(regarding.namespace ? { namespace: regarding.namespace } : {}),
        ...(regarding.uid ? { uid: regarding.uid } : {}),
      },
    };
    await this.#send(
      'POST',
      `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/events`,
      body,
      'application/json',
      signal,
    );
    return `${namespace}/${name}`;
  }

  /** Writes the series of the Event `namespace/name` (a merge patch: nothing else changes). */
  async update(handle: string, times: EventTimes, signal: AbortSignal): Promise<void> {
    const [namespace = '', name = ''] = handle.split('/');
    const path = `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/events/${
      encodeURIComponent(name)
    }`;
    await this.#send('PATCH', path, { series: series(times) }, 'application/merge-patch+json', signal);
  }

  async #send(method: string, path: string, body: object, contentType: string, signal: AbortSignal): Promise<void> {
    try {
      await this.#client.json(method, path, {
        headers: { 'content-type': contentType },
        body: JSON.stringify(body),
        signal,
        timeoutMs: 10_000,
      });
    } catch (error) {
      if (isForbidden(error)) {
        throw new EventsForbidden(
          `${method} ${path}: 403 Forbidden: grant create and patch on events.k8s.io events (the chart does, with events.enabled), or pass --events=false`,
          { cause: error },
        );
      }
      throw error;
    }
  }
}

function series(times: EventTimes) {
  return { count: times.count, lastObservedTime: microTime(times.lastObservedMs) };
}

/** At most 1 KiB of UTF-8, as the API requires. */
function truncate(note: string): string {
  const bytes = new TextEncoder().encode(note);
  return bytes.length <= NOTE_MAX
    ? note
    : `${new TextDecoder().decode(bytes.subarray(0, NOTE_MAX - 3)).replace(/\uFFFD$/, '')}...`;
}
