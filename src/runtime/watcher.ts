// The list+watch loop for one resource, as a stream of events (kube-rs's watcher): a list, then a
// watch with bookmarks that resumes from the newest resourceVersion, a relist when that version
// has expired (410), and jittered backoff on errors. As client-go's reflector and pager: a list
// whose continue token expires falls back to one full list, and a watch that ends within a second
// without an event is an error, backed off. It never ends on its own.
//
// The list is a streaming one where the API supports it (client-go's WatchList, kube-rs's
// streaming_lists): a watch that first sends every object as ADDED, then a bookmark annotated
// `k8s.io/initial-events-end`, and goes on as a watch. The API server serves it from its watch
// cache, one object at a time, instead of pages of up to 100 objects from etcd or the cache; a
// server without it (the WatchList feature gate off, as on 1.30–1.31 and 1.33) refuses the
// parameters and gets paginated lists from then on. A streaming list that fails is followed by
// one paginated list, as client-go's reflector falls back.
//
// A shard selector that widens while it watches (widening.ts) needs no relist: the watch ends at
// the version it reached, the objects the wider selector adds are listed (from the watch cache, at
// a version not older; a streaming list where the server has them), and the watch resumes from
// where it ended with the wider selector. The
// events it replays up to the list's version are already in the list for what it adds, and are
// skipped for those objects only (resourceVersions compare: apimachinery/resourceversion.ts), so no object
// goes back to an older state and nothing is missed. Where versions do not compare, or the watch's
// version has expired (410), it relists.
import { ApiError } from '../apimachinery/errors.ts';
import type { ListOptions, WatchOptions } from '../kube/api.ts';
import type { PartialObjectMetadata, PartialObjectMetadataList, WatchEvent } from '../apimachinery/objects.ts';
import { Backoff } from '../util/backoff.ts';
import { compareResourceVersions } from '../apimachinery/resourceversion.ts';
import { sleep } from '../util/sleep.ts';
import type { Added } from './partition.ts';
import type { Widening } from './widening.ts';

/** What the watcher needs of a resource API (MetadataApi provides it). */
export interface ListWatch {
  list(options: ListOptions): Promise<PartialObjectMetadataList>;
  /** Resolves once the server has answered, with the watch's events, those that came together in a batch. */
  watch(options: WatchOptions): Promise<AsyncIterable<readonly WatchEvent[]>>;
  /** Whether to list with a streaming list first (see above); paginated lists otherwise. */
  readonly streamingLists?: boolean | undefined;
  /** Whether the server filters by `shardSelector`; absent: it is never sent. */
  honoursShardSelector?(selector: string, signal: AbortSignal): Promise<boolean>;
}

/** The annotation of the bookmark that ends a streaming list's initial objects. */
export const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';

export type WatcherEvent =
  /**
   * A (re)list starts: the store buffers what follows until `initDone`. `merge`: a list of what a
   * widened selector adds, which adds to the cache rather than replacing it.
   */
  | { readonly type: 'init'; readonly merge?: boolean }
  | { readonly type: 'initApply'; readonly object: PartialObjectMetadata }
  /** The list is complete: the buffered objects are now the whole truth. */
  | { readonly type: 'initDone' }
  | { readonly type: 'apply'; readonly object: PartialObjectMetadata }
  | { readonly type: 'delete'; readonly object: PartialObjectMetadata }
  /** A watch is open (the server answered): changes arrive as they happen from here on. */
  | { readonly type: 'watching' }
  /** Something failed; the watcher retries by itself after `retryInMs`. */
  | { readonly type: 'error'; readonly error: Error; readonly retryInMs: number };

export interface WatcherOptions {
  readonly labelSelector?: string | undefined;
  /** E.g. `metadata.name=shop`: what RBAC rules limited by resourceNames allow to list and watch. */
  readonly fieldSelector?: string | undefined;
  /**
   * The server-side shard selector (KEP-5866) of each list and watch, asked anew for each: a
   * partition that shrank narrows the next watch without a relist.
   */
  readonly shardSelector?: (() => string | undefined) | undefined;
  /** Set when `shardSelector` may widen while it watches: lists what it adds, no relist (see above). */
  readonly widening?: Widening | undefined;
  /**
   * Page size of lists (default 100; client-go and kube-rs use 500). A page is parsed whole, and
   * 500 objects with their managedFields are megabytes of text and objects per kind listing at
   * once: at 10,000 objects over 3 kinds, 500 took the peak RSS about 10 MiB over the patching
   * that follows, 100 about 3, for 100 list requests instead of 22.
   */
  readonly pageSize?: number;
  /** Server-side watch timeout; the server ends the watch cleanly and we resume (kube-rs: 290 s). */
  readonly watchTimeoutSeconds?: number;
  /** Client-side: a watch silent for this long is dead (default: the server timeout plus the smaller of itself and 30 s). */
  readonly idleMs?: number;
  readonly backoff?: Backoff;
  /** Whether to try a streaming list first (default: what the API says, `ListWatch.streamingLists`). */
  readonly streamingLists?: boolean | undefined;
  readonly signal: AbortSignal;
}

/** A watch that ends cleanly sooner than this without an event is an error (client-go's "very short watch"). */
const VERY_SHORT_WATCH_MS = 1000;

/** Yields events until `signal` aborts. */
export async function* watcher(api: ListWatch, options: WatcherOptions): AsyncGenerator<WatcherEvent> {
  const { signal, labelSelector, fieldSelector } = options;
  const shard = (): { shardSelector?: string } => {
    const shardSelector = options.shardSelector?.();
    return shardSelector ? { shardSelector } : {};
  };
  const pageSize = options.pageSize ?? 100;
  const timeoutSeconds = options.watchTimeoutSeconds ?? 290;
  const idleMs = options.idleMs ?? (timeoutSeconds + Math.min(timeoutSeconds, 30)) * 1000;
  const backoff = options.backoff ?? new Backoff();
  /** Where the watch resumes; undefined = a list is needed. */
  let resourceVersion: string | undefined;
  /** The newest version we saw, so a relist can be served from the watch cache. */
  let lastSeen: string | undefined;
  /**
   * A 410 after a healthy watch relists at once, but only once until a watch is healthy again:
   * a server that answers every watch with 410 must not get LIST+WATCH in a tight loop.
   */
  let mayRelistAtOnce = true;
  /** Lists are streaming lists until the server refuses one. */
  let streaming = options.streamingLists ?? api.streamingLists ?? false;
  /**
   * The last streaming list failed: the next list is paginated (client-go's reflector falls back
   * so too: "making progress is better than deadlocking"). A streaming list waits at most 3 s for
   * the API server's watch cache to be fresh and then fails; a consistent paginated list falls
   * back to etcd instead.
   */
  let paginateOnce = false;
  /** Streaming lists ended in a row before their bookmark: twice is a server that ignores the parameters. */
  let cutOff = 0;

  const { widening } = options;
  /**
   * The widenings whose list the watch has not passed yet: events up to `until` of the objects
   * each `adds` are older than what its list put in the cache.
   */
  let catchUps: { readonly added: Added; readonly until: string }[] = [];
  /**
   * Lists what `added` adds at a version not older than `since` (the one the watch reached), and
   * answers the list's version; undefined when versions do not compare (a relist is needed).
   */
  async function* listAdded(added: Added, since: string): AsyncGenerator<WatcherEvent, string | undefined> {
    yield { type: 'init', merge: true };
    const selectors = {
      labelSelector,
      ...(fieldSelector ? { fieldSelector } : {}),
      ...(added.selector ? { shardSelector: added.selector } : {}),
      signal,
    };
    // A server that does not filter sends the whole stream: only what the widening adds is new.
    const adds = (object: PartialObjectMetadata) => added.adds(object.metadata);
    let version: string | undefined;
    if (streaming && !paginateOnce) {
      // One request rather than a page per 100 objects: a streaming list, left once its objects are in.
      const events = await api.watch({
        ...selectors,
        resourceVersion: since,
        sendInitialEvents: true,
        timeoutSeconds,
        idleMs,
      });
      read: for await (const batch of events) {
        for (const event of batch) {
          if (event.type === 'ERROR') throw new ApiError('WATCH', '', event.object.code ?? 500, event.object);
          if (event.type === 'ADDED' || event.type === 'MODIFIED') {
            if (adds(event.object)) yield { type: 'initApply', object: event.object };
          } else if (
            event.type === 'BOOKMARK' && event.object.metadata.annotations?.[INITIAL_EVENTS_END] === 'true'
          ) {
            version = event.object.metadata.resourceVersion;
            break read;
          }
        }
      }
      if (version === undefined) {
        throw new Error('the list of what the widened selector adds ended before its last object');
      }
    } else {
      let page: PartialObjectMetadataList | undefined;
      do {
        page = await api.list({
          ...selectors,
          ...(page ? {} : { resourceVersion: since, resourceVersionMatch: 'NotOlderThan' as const }),
          limit: pageSize,
          continue: page?.metadata.continue,
        });
        version ??= page.metadata.resourceVersion;
        for (const object of page.items) if (adds(object)) yield { type: 'initApply', object };
      } while (page.metadata.continue);
      paginateOnce = false;
    }
    if (compareResourceVersions(since, version) === undefined) return undefined;
    yield { type: 'initDone' };
    return version;
  }
  /** Whether `event`, replayed by a watch resumed after a widening, is older than what the cache holds of its object. */
  const replayed = (event: Exclude<WatchEvent, { type: 'ERROR' }>): boolean => {
    if (catchUps.length === 0) return false;
    const version = event.object.metadata.resourceVersion;
    catchUps = catchUps.filter((c) => compareResourceVersions(version, c.until) !== 1);
    if (event.type === 'BOOKMARK') return false;
    const { metadata } = event.object;
    return catchUps.some((c) => c.added.adds(metadata));
  };

  while (!signal.aborted) {
    /** A streaming list is under way: its initial objects come as ADDED events until the bookmark that ends them. */
    let listing = false;
    /** Ends the watch when the selector widens (not a streaming list's initial objects: they end first). */
    const cut = new AbortController();
    // A widening asked before a list is served by that list (its selector is asked as it starts).
    const widened = widening?.take();
    try {
      if (widened && resourceVersion !== undefined) {
        let until: string | undefined;
        try {
          until = yield* listAdded(widened, resourceVersion);
        } catch (error) {
          // Asked again, unless the version expired and a relist follows (it lists the wider selector);
          // in pages if a streaming list failed, as for a relist.
          if (!(error instanceof ApiError && error.expired)) widening?.request(widened);
          if (streaming) paginateOnce = true;
          throw error;
        }
        if (until === undefined) resourceVersion = undefined;
        else catchUps.push({ added: widened, until });
      }
      let events: AsyncIterable<readonly WatchEvent[]>;
      // A relist brings every object at one version: no list of a widening is ahead of it.
      if (resourceVersion === undefined) catchUps = [];
      if (resourceVersion === undefined && streaming && !paginateOnce) {
        yield { type: 'init' };
        try {
          // As a paginated relist: from the watch cache when we saw a version, else a consistent read.
          events = await api.watch({
            labelSelector,
            ...(fieldSelector ? { fieldSelector } : {}),
            ...shard(),
            resourceVersion: lastSeen,
            sendInitialEvents: true,
            timeoutSeconds,
            idleMs,
            signal: widening ? AbortSignal.any([signal, cut.signal]) : signal,
          });
        } catch (error) {
          // A server without streaming lists (the WatchList feature gate off) refuses the
          // parameters as invalid (422): paginated lists from now on, starting at once.
          if (!(error instanceof ApiError && (error.status === 422 || error.status === 400))) {
            paginateOnce = true;
            throw error;
          }
          streaming = false;
          continue;
        }
        listing = true;
      } else {
        if (resourceVersion === undefined) {
          yield { type: 'init' };
          const selectors = { labelSelector, ...(fieldSelector ? { fieldSelector } : {}), ...shard(), signal };
          // A relist after 410 first asks the watch cache for a version not older than the last one
          // we saw (a relist storm after upgrades hit client-go); later pages follow the continue token.
          const since = lastSeen === undefined
            ? {}
            : { resourceVersion: lastSeen, resourceVersionMatch: 'NotOlderThan' as const };
          let page: PartialObjectMetadataList | undefined;
          do {
            try {
              page = await api.list({
                ...selectors,
                ...(page ? {} : since),
                limit: pageSize,
                continue: page?.metadata.continue,
              });
            } catch (error) {
              // The continue token expired (the list took longer than etcd keeps versions): paging
              // again from the start could expire again, without end; one full list cannot.
              if (!(page !== undefined && error instanceof ApiError && error.expired)) throw error;
              yield { type: 'init' };
              page = await api.list({ ...selectors, ...since });
            }
            for (const object of page.items) yield { type: 'initApply', object };
          } while (page.metadata.continue);
          paginateOnce = false;
          resourceVersion = lastSeen = page.metadata.resourceVersion;
          // The generator's frame lives as long as the watch: holding the last page would keep up
          // to 500 full objects (managedFields and all) per controller alive.
          page = undefined;
          // No backoff reset here: a list that works says nothing of the watch after it (a server
          // answering every watch with 410 lists fine). A healthy watch resets it, below.
          yield { type: 'initDone' };
          // Widened while it listed: what the list's selector left out is listed before the watch.
          if (widening?.pending) continue;
        }
        events = await api.watch({
          labelSelector,
          ...(fieldSelector ? { fieldSelector } : {}),
          ...shard(),
          resourceVersion,
          timeoutSeconds,
          idleMs,
          signal: widening ? AbortSignal.any([signal, cut.signal]) : signal,
        });
        yield { type: 'watching' };
      }
      const opened = performance.now();
      // The backoff starts over only once the watch delivers: a server that answers and then
      // fails at once (410, an error event) must still be backed off from. Bookmarks count, and
      // the API server sends them to quiet watches too, so a watch that runs a while is healthy.
      let healthy = false;
      // A widening ends the watch at once when it is quiet; between events, after the event in hand.
      const widen = (): void => {
        if (!listing) cut.abort();
      };
      widening?.signal.addEventListener('abort', widen, { once: true });
      if (widening?.pending) widen();
      try {
        read: for await (const batch of events) {
          for (const event of batch) {
            if (event.type === 'ERROR') {
              throw new ApiError('WATCH', '', event.object.code ?? 500, event.object);
            }
            if (!healthy) {
              healthy = true;
              backoff.reset();
              mayRelistAtOnce = true;
            }
            if (listing) {
              // The objects' own versions, in no order: where to resume is the ending bookmark's.
              if (event.type === 'ADDED' || event.type === 'MODIFIED') {
                yield { type: 'initApply', object: event.object };
              } else if (
                event.type === 'BOOKMARK' && event.object.metadata.annotations?.[INITIAL_EVENTS_END] === 'true'
              ) {
                resourceVersion = lastSeen = event.object.metadata.resourceVersion;
                listing = false;
                cutOff = 0;
                yield { type: 'initDone' };
                yield { type: 'watching' };
                if (widening?.pending) break read;
              }
              continue;
            }
            resourceVersion = lastSeen = event.object.metadata.resourceVersion;
            if (replayed(event)) continue;
            if (event.type === 'ADDED' || event.type === 'MODIFIED') yield { type: 'apply', object: event.object };
            else if (event.type === 'DELETED') yield { type: 'delete', object: event.object };
            if (cut.signal.aborted) break read;
          }
        }
      } finally {
        widening?.signal.removeEventListener('abort', widen);
      }
      if (cut.signal.aborted || (widening?.pending && !listing)) continue;
      // Ended by the server before the bookmark that says every object is in: a connection cut
      // cleanly (a proxy, an API server stopping), a list longer than the watch's timeout, or a
      // server that ignores the parameters (it sends every object, then no such bookmark). One
      // paginated list follows; a second cut-off in a row means paginated lists from now on.
      if (listing) {
        if (++cutOff >= 2) {
          streaming = false;
          throw new Error('the streaming list ended before its last object twice running; paginated lists from now on');
        }
        throw new Error('the streaming list ended before its last object; listing again, in pages');
      }
      // A clean end (the server's timeout): resume from the newest version, no relist. But a watch
      // closed at once with nothing on it is a server (or a proxy) refusing in disguise.
      if (!healthy && performance.now() - opened < VERY_SHORT_WATCH_MS) {
        throw new Error(
          'very short watch: it ended within a second without delivering an event; reopening after a pause',
        );
      }
    } catch (error) {
      if (signal.aborted) return;
      // The watch was ended to widen (an API may reject the stream it cut).
      if (cut.signal.aborted) continue;
      const failure = error instanceof Error ? error : new Error(String(error));
      if (listing) paginateOnce = true;
      // An expired version after a healthy watch (etcd compacted, an API server restarted) is
      // no failure: relist at once, once per healthy watch. If the relist from the watch cache
      // expired too, list from etcd, after a backoff.
      const expired = failure instanceof ApiError && failure.expired;
      const atOnce = expired && resourceVersion !== undefined && mayRelistAtOnce;
      if (expired) {
        if (resourceVersion === undefined) lastSeen = undefined;
        resourceVersion = undefined;
      }
      if (atOnce) mayRelistAtOnce = false;
      const retryInMs = atOnce
        ? 0
        : Math.max(backoff.next(), failure instanceof ApiError ? (failure.retryAfterSeconds ?? 0) * 1000 : 0);
      yield { type: 'error', error: failure, retryInMs };
      if (retryInMs > 0) await sleep(retryInMs, signal);
    }
  }
}
