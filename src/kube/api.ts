// Metadata-only access to one resource kind: list, watch and server-side apply of metadata,
// all projected to meta.k8s.io/v1 PartialObjectMetadata so no spec or data crosses the wire
// (unless asked for whole objects: a ConfigMap a label source reads).
import type { Buffer } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import { type KubeClient, queryString } from './client.ts';
import type {
  ApplyConfiguration,
  MetadataApplyConfiguration,
  PartialObjectMetadata,
  PartialObjectMetadataList,
  WatchEvent,
} from '../apimachinery/objects.ts';
import type { ApiResource } from '../apimachinery/resource.ts';
import { isConflict, isNotFound, WatchIdleError } from '../apimachinery/errors.ts';
import { WriteAnswer, type Written } from '../apimachinery/writeanswer.ts';
import { readWatchStream } from './watchstream.ts';

const ACCEPT_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json';
const ACCEPT_OBJECT = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json';

export interface ListOptions {
  readonly labelSelector?: string | undefined;
  readonly fieldSelector?: string | undefined;
  readonly limit?: number | undefined;
  readonly continue?: string | undefined;
  readonly resourceVersion?: string | undefined;
  readonly resourceVersionMatch?: 'NotOlderThan' | 'Exact' | undefined;
  /** KEP-5866: only the objects whose hash falls in the ranges it names (where the server honours it). */
  readonly shardSelector?: string | undefined;
  readonly signal?: AbortSignal | undefined;
}

export interface WatchOptions {
  readonly labelSelector?: string | undefined;
  readonly fieldSelector?: string | undefined;
  readonly shardSelector?: string | undefined;
  readonly resourceVersion?: string | undefined;
  /**
   * A streaming list: every object first, as ADDED events, then a BOOKMARK annotated
   * `k8s.io/initial-events-end`, from a version not older than `resourceVersion` (unset: the
   * newest, a consistent read), then the watch goes on.
   */
  readonly sendInitialEvents?: boolean | undefined;
  /** Server-side timeout; the server ends the watch cleanly after it. */
  readonly timeoutSeconds: number;
  /** Client-side: no byte for this long means the connection is dead. */
  readonly idleMs: number;
  readonly signal?: AbortSignal | undefined;
}

export interface ApplyOptions {
  readonly fieldManager: string;
  readonly force: boolean;
  readonly dryRun?: boolean | undefined;
  readonly signal?: AbortSignal | undefined;
}

/** A JSON Patch operation (RFC 6902) of the kinds labeller sends: a precondition, or a removal. */
export type JsonPatchOperation =
  | { readonly op: 'test'; readonly path: string; readonly value: string }
  | { readonly op: 'remove'; readonly path: string };

export interface PatchOptions {
  readonly fieldManager: string;
  readonly dryRun?: boolean | undefined;
  readonly signal?: AbortSignal | undefined;
}

/** Metadata-only access to one resource (in one namespace, or all): what a cache lists and watches, and labels are applied through. */
export interface ResourceApi {
  list(options?: ListOptions): Promise<PartialObjectMetadataList>;
  watch(options: WatchOptions): Promise<AsyncIterable<readonly WatchEvent[]>>;
  apply(body: MetadataApplyConfiguration, options: ApplyOptions): Promise<Written>;
  /** A JSON Patch of an object (`namespace` '' when cluster-scoped); answers with its metadata. */
  patch(
    name: string,
    namespace: string,
    operations: readonly JsonPatchOperation[],
    options: PatchOptions,
  ): Promise<Written>;
  /** Whether a cache is filled with a streaming list (watch `sendInitialEvents`) before paginated lists are tried. */
  readonly streamingLists?: boolean | undefined;
  /** Whether the server filters lists and watches by `shardSelector` (see MetadataApi). */
  honoursShardSelector?(selector: string, signal: AbortSignal): Promise<boolean>;
}

/**
 * Streaming lists unless KUBE_FEATURE_WatchListClient=false, the variable client-go reads for the
 * same choice (bench/README.md, "Streaming lists", has what they save).
 */
export function streamingLists(env: Readonly<Record<string, string | undefined>> = process.env): boolean {
  return env['KUBE_FEATURE_WatchListClient']?.toLowerCase() !== 'false';
}

/** The ResourceApi of a resource in a namespace ('' for all); `whole`: whole objects, not their metadata. */
export type ResourceApis = (resource: ApiResource, namespace: string, whole?: boolean) => ResourceApi;

/** ResourceApis over the API server `client` talks to. */
export const metadataApis = (client: KubeClient): ResourceApis => (resource, namespace, whole) =>
  new MetadataApi(client, resource, namespace, whole);

export class MetadataApi implements ResourceApi {
  readonly resource: ApiResource;
  /** Empty for all namespaces (or a cluster-scoped resource). */
  readonly namespace: string;
  readonly streamingLists = streamingLists();
  readonly #client: KubeClient;
  /** The collection's path per namespace, made once. */
  readonly #collections = new Map<string, string>();

  /** `whole`: lists and watches carry whole objects, not their metadata (a ConfigMap's data). */
  readonly #accept: { readonly list: string; readonly object: string };

  constructor(client: KubeClient, resource: ApiResource, namespace = '', whole = false) {
    this.#accept = whole
      ? { list: 'application/json', object: 'application/json' }
      : { list: ACCEPT_LIST, object: ACCEPT_OBJECT };
    this.#client = client;
    this.resource = resource;
    this.namespace = resource.namespaced ? namespace : '';
  }

  /** One page of a list. */
  async list(options: ListOptions = {}): Promise<PartialObjectMetadataList> {
    const list = await this.#client.json<PartialObjectMetadataList>('GET', this.path(), {
      headers: { accept: this.#accept.list },
      query: {
        labelSelector: options.labelSelector,
        fieldSelector: options.fieldSelector,
        limit: options.limit,
        continue: options.continue,
        resourceVersion: options.resourceVersion,
        resourceVersionMatch: options.resourceVersionMatch,
        shardSelector: options.shardSelector,
      },
      signal: options.signal,
    });
    // An empty metadata-only list comes back with `"items": null`.
    return list.items ? list : { ...list, items: [] };
  }

  /**
   * Whether the server honours `selector` (the ShardedListAndWatch gate on, from 1.36): a list of
   * one object echoes it in `shardInfo`. Asked as plain JSON, since the API server leaves
   * shardInfo out of the PartialObjectMetadataList it converts a list to. A server without the
   * gate ignores the parameter (or refuses it): the caller then filters the whole stream itself.
   */
  async honoursShardSelector(selector: string, signal: AbortSignal): Promise<boolean> {
    try {
      const list = await this.#client.json<{ metadata?: { shardInfo?: { selector?: string } } }>('GET', this.path(), {
        headers: { accept: 'application/json' },
        query: { limit: 1, shardSelector: selector },
        signal,
      });
      return list.metadata?.shardInfo?.selector !== undefined;
    } catch (error) {
      if (signal.aborted) throw error;
      return false;
    }
  }

  /**
   * Opens a watch: resolves once the server has answered, with the stream of its events, which
   * ends when the server closes it or `signal` aborts. A watch that stalls (no headers, or no
   * bytes, for `idleMs`) fails with WatchIdleError, after the client's connections are replaced.
   */
  async watch(options: WatchOptions): Promise<AsyncIterable<readonly WatchEvent[]>> {
    const path = this.path();
    const response = await this.#open(path, options).catch((error: unknown) => this.#failed(error));
    // The stream straight to the watcher: a generator around it would cost a promise per chunk.
    return readWatchStream<WatchEvent>(response, {
      idleMs: options.idleMs,
      signal: options.signal,
      path,
      idle: () => this.#client.resetConnections(),
    });
  }

  async #open(path: string, options: WatchOptions): Promise<IncomingMessage> {
    const headers = new AbortController();
    const timer = setTimeout(() => headers.abort(new WatchIdleError(path, options.idleMs)), options.idleMs);
    return this.#client.request('GET', path, {
      headers: { accept: this.#accept.object },
      query: {
        watch: true,
        allowWatchBookmarks: true,
        labelSelector: options.labelSelector,
        fieldSelector: options.fieldSelector,
        shardSelector: options.shardSelector,
        resourceVersion: options.resourceVersion,
        sendInitialEvents: options.sendInitialEvents || undefined,
        resourceVersionMatch: options.sendInitialEvents ? 'NotOlderThan' : undefined,
        timeoutSeconds: options.timeoutSeconds,
      },
      signal: options.signal ? AbortSignal.any([options.signal, headers.signal]) : headers.signal,
    }).finally(() => clearTimeout(timer));
  }

  /** Rethrows a watch failure; a silent watch first replaces the connections (the dead one may not be alone). */
  async #failed(error: unknown): Promise<never> {
    if (error instanceof WatchIdleError) await this.#client.resetConnections();
    throw error;
  }

  /**
   * Server-side apply of `body` under `fieldManager` (an object's labels and annotations, or a
   * whole object labeller owns: an admission policy); answers with the object's version, and its
   * metadata without managedFields, parsed when read (writeanswer.ts).
   */
  apply(body: MetadataApplyConfiguration | ApplyConfiguration, options: ApplyOptions): Promise<WriteAnswer> {
    const namespace = body.metadata.namespace ?? '';
    return this.#client.json<WriteAnswer>('PATCH', this.path(body.metadata.name, namespace), {
      headers: { accept: ACCEPT_OBJECT, 'content-type': 'application/apply-patch+yaml' },
      query: applyQuery(options),
      body: JSON.stringify(body),
      signal: options.signal,
      decode: readWriteAnswer,
    });
  }

  /**
   * A JSON Patch: what removes a key no field manager owns (one an admission policy set at
   * create), which server-side apply cannot.
   */
  patch(
    name: string,
    namespace: string,
    operations: readonly JsonPatchOperation[],
    options: PatchOptions,
  ): Promise<WriteAnswer> {
    return this.#client.json<WriteAnswer>('PATCH', this.path(name, namespace), {
      headers: { accept: ACCEPT_OBJECT, 'content-type': 'application/json-patch+json' },
      query: applyQuery({ fieldManager: options.fieldManager, force: false, dryRun: options.dryRun }),
      body: JSON.stringify(operations),
      signal: options.signal,
      decode: readWriteAnswer,
    });
  }

  /** The metadata of the object `name` (of a cluster-scoped resource, or in this API's namespace). */
  get(name: string, options: { readonly signal?: AbortSignal | undefined } = {}): Promise<PartialObjectMetadata> {
    return this.#client.json<PartialObjectMetadata>('GET', this.path(name), {
      headers: { accept: ACCEPT_OBJECT },
      signal: options.signal,
    });
  }

  /**
   * Deletes the object `name` (of a cluster-scoped resource, or in this API's namespace) if it is
   * still the one of `uid`: an object made again meanwhile stays. One gone already is no failure.
   */
  async delete(
    name: string,
    options: { readonly uid?: string | undefined; readonly signal?: AbortSignal | undefined },
  ): Promise<void> {
    const { uid, signal } = options;
    try {
      await this.#client.json('DELETE', this.path(name), {
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(uid ? { preconditions: { uid } } : {}),
        signal,
      });
    } catch (error) {
      // Gone already, or made again since (the uid precondition failed): nothing of it to delete.
      if (!isNotFound(error) && !isConflict(error)) throw error;
    }
  }

  /** The collection path, or an object's path when `name` is given. */
  path(name?: string, namespace = this.namespace): string {
    let collection = this.#collections.get(namespace ?? '');
    if (collection === undefined) {
      const r = this.resource;
      const base = r.group ? `/apis/${r.group}/${r.version}` : `/api/${r.version}`;
      const ns = r.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : '';
      collection = `${base}${ns}/${r.resource}`;
      // Namespaces come and go; a few thousand collections are little to keep, and made again when dropped.
      if (this.#collections.size >= MAX_COLLECTIONS) this.#collections.clear();
      this.#collections.set(namespace ?? '', collection);
    }
    return name === undefined ? collection : `${collection}/${encodeURIComponent(name)}`;
  }
}

/** Collection paths a resource's API keeps, past which it starts over. */
const MAX_COLLECTIONS = 4096;

/** Each field manager's write queries, made once: the same few go with every write. */
const writeQueries = new Map<string, string[]>();

/** The query of a write (`?fieldManager=…&force=true&dryRun=All`, as `options` has them). */
function applyQuery(options: Pick<ApplyOptions, 'fieldManager' | 'force' | 'dryRun'>): string {
  const { fieldManager, force, dryRun = false } = options;
  let made = writeQueries.get(fieldManager);
  if (made === undefined) writeQueries.set(fieldManager, made = []);
  const which = (force ? 1 : 0) + (dryRun ? 2 : 0);
  return made[which] ??= queryString({
    fieldManager,
    force: force || undefined,
    dryRun: dryRun ? 'All' : undefined,
  });
}

/** A write's answer, its metadata parsed only when read. */
function readWriteAnswer(bytes: Buffer): WriteAnswer {
  return new WriteAnswer(bytes);
}
