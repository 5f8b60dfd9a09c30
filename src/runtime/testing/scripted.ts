// A scripted resource API for the unit tests of the watcher and the controller: it plays given
// list pages and watch streams in order and records what it was asked.
import type {
  ApplyOptions,
  JsonPatchOperation,
  ListOptions,
  PatchOptions,
  ResourceApi,
  WatchOptions,
} from '../../kube/api.ts';
import { Buffer } from 'node:buffer';
import { ApiError } from '../../apimachinery/errors.ts';
import { WriteAnswer, type Written } from '../../apimachinery/writeanswer.ts';
import type {
  MetadataApplyConfiguration,
  PartialObjectMetadata,
  PartialObjectMetadataList,
  WatchEvent,
} from '../../apimachinery/objects.ts';
import type { Projection } from '../store.ts';
import type { ListWatch } from '../watcher.ts';

/** The tests' projection: an object's metadata. */
export const metadataOf: Projection<PartialObjectMetadata['metadata']> = Object.assign(
  (object: PartialObjectMetadata) => object.metadata,
  { version: (meta: PartialObjectMetadata['metadata']) => meta.resourceVersion },
);

export function pod(name: string, resourceVersion = '1'): PartialObjectMetadata {
  return { apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'ns', uid: `uid-${name}`, resourceVersion } };
}

export function page(
  resourceVersion: string,
  items: PartialObjectMetadata[],
  next?: string,
): PartialObjectMetadataList {
  return {
    apiVersion: 'meta.k8s.io/v1',
    kind: 'PartialObjectMetadataList',
    metadata: { resourceVersion, ...(next ? { continue: next } : {}) },
    items,
  };
}

export const bookmark = (resourceVersion: string): WatchEvent => ({
  type: 'BOOKMARK',
  object: { metadata: { resourceVersion } },
});
/** The bookmark that ends a streaming list's initial objects. */
export const initialEventsEnd = (resourceVersion: string): WatchEvent => ({
  type: 'BOOKMARK',
  object: { metadata: { resourceVersion, annotations: { 'k8s.io/initial-events-end': 'true' } } },
});
/** What a server without streaming lists answers a watch with `sendInitialEvents`. */
export const streamingRefused = (): ApiError =>
  new ApiError('GET', '/api/v1/pods', 422, {
    reason: 'Invalid',
    message: 'sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled',
  });
export const expiredEvent: WatchEvent = {
  type: 'ERROR',
  object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version' },
};
export const expired = (): ApiError =>
  new ApiError('GET', '/api/v1/pods', 410, { code: 410, reason: 'Expired', message: 'too old resource version' });

/** One scripted list call: a page, a failure, or a page the test hands over later. */
export type ListStep = PartialObjectMetadataList | Error | Promise<PartialObjectMetadataList>;

/** One scripted watch: refused with `refused`, or open with its events, then a clean end, `end` thrown, or held open until `until` settles. */
export interface WatchStep {
  readonly refused?: Error;
  readonly events?: readonly WatchEvent[];
  readonly end?: Error;
  /** Keeps the watch open after its events until this settles (events it resolves with follow). */
  readonly until?: Promise<readonly WatchEvent[]>;
}

/** Rejects once `signal` aborts, as the real API calls do; what a call past the end of the script does. */
function untilAborted(signal: AbortSignal | undefined): Promise<never> {
  return new Promise((_, reject) => {
    if (signal?.aborted) reject(signal.reason);
    signal?.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

/** A resource API that plays a script of lists and watches, records the options of every call, and answers applies with what was applied. */
export class ScriptedApi implements ListWatch, ResourceApi {
  readonly lists: ListOptions[] = [];
  readonly watches: WatchOptions[] = [];
  readonly applies: { readonly body: MetadataApplyConfiguration; readonly options: ApplyOptions }[] = [];
  readonly patches: {
    readonly name: string;
    readonly namespace: string;
    readonly operations: readonly JsonPatchOperation[];
    readonly options: PatchOptions;
  }[] = [];
  readonly #lists: ListStep[];
  readonly #watches: WatchStep[];
  readonly streamingLists: boolean;

  /** `streamingLists`: the watcher lists with streaming lists first (watch steps of their own). */
  constructor(lists: ListStep[], watches: WatchStep[] = [], options: { streamingLists?: boolean } = {}) {
    this.#lists = [...lists];
    this.#watches = [...watches];
    this.streamingLists = options.streamingLists ?? false;
  }

  async apply(body: MetadataApplyConfiguration, options: ApplyOptions): Promise<Written> {
    this.applies.push({ body, options });
    const { name, namespace, labels, annotations } = body.metadata;
    return answer({
      apiVersion: body.apiVersion,
      kind: body.kind,
      metadata: {
        name,
        ...(namespace ? { namespace } : {}),
        uid: body.metadata.uid ?? '',
        resourceVersion: '1',
        ...(labels ? { labels } : {}),
        ...(annotations ? { annotations } : {}),
      },
    });
  }

  /** Records the patch; answers an object of that name with no labels or annotations. */
  async patch(
    name: string,
    namespace: string,
    operations: readonly JsonPatchOperation[],
    options: PatchOptions,
  ): Promise<Written> {
    this.patches.push({ name, namespace, operations, options });
    return answer({ apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace, uid: '', resourceVersion: '2' } });
  }

  async list(options: ListOptions = {}): Promise<PartialObjectMetadataList> {
    this.lists.push(options);
    const step = this.#lists.shift();
    if (step === undefined) return untilAborted(options.signal);
    if (step instanceof Error) throw step;
    return Promise.race([step, untilAborted(options.signal)]);
  }

  /** Each event comes as a chunk of its own. */
  async watch(options: WatchOptions): Promise<AsyncIterable<readonly WatchEvent[]>> {
    this.watches.push(options);
    const step = this.#watches.shift();
    if (step === undefined) return untilAborted(options.signal);
    if (step.refused) throw step.refused;
    return (async function* () {
      for (const event of step.events ?? []) yield [event];
      if (step.until) {
        for (const event of await Promise.race([step.until, untilAborted(options.signal)])) yield [event];
      }
      if (step.end) throw step.end;
    })();
  }
}

/** `object` as the API server's answer to a write: its bytes, read as the client reads them. */
export function answer(object: PartialObjectMetadata): Written {
  return new WriteAnswer(Buffer.from(JSON.stringify(object)));
}
