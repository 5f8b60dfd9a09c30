// Reads a watch response: one JSON event per line, with a client-side idle timeout.
// Destroying the response (not only the request) is what ends a stalled stream on every runtime.
import type { Readable } from 'node:stream';
import { WatchIdleError } from '../apimachinery/errors.ts';

export class WatchDecodeError extends Error {
  override readonly name = 'WatchDecodeError';
}

/**
 * Yields each event of a newline-delimited JSON stream. Throws WatchIdleError when nothing
 * arrives for `idleMs`; ends quietly when `signal` aborts or the server closes the stream.
 */
export async function* readWatchStream<T>(
  body: Readable,
  options: { readonly idleMs: number; readonly signal?: AbortSignal | undefined; readonly path: string },
): AsyncGenerator<T> {
  let idle = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  /** When the last chunk arrived. One timer checks it, rather than one reset per chunk (an event each in a burst). */
  let heard = performance.now();
  const stop = (): void => void body.destroy();
  const arm = (inMs: number): void => {
    timer = setTimeout(() => {
      const silentFor = performance.now() - heard;
      if (silentFor < options.idleMs) return arm(options.idleMs - silentFor);
      idle = true;
      stop();
    }, inMs);
  };
  options.signal?.addEventListener('abort', stop, { once: true });
  body.setEncoding('utf8');
  /** The start of a line whose end has not arrived. */
  let rest = '';
  try {
    arm(options.idleMs);
    try {
      for await (const chunk of body as AsyncIterable<string>) {
        heard = performance.now();
        // Lines are found in the chunk itself: joined to what came before, a chunk (up to 64 KiB
        // of a list's events) would be copied whole to be searched, once per chunk.
        let start = 0;
        for (let newline = chunk.indexOf('\n'); newline >= 0; newline = chunk.indexOf('\n', start)) {
          const line = (start === 0 && rest ? rest + chunk.slice(0, newline) : chunk.slice(start, newline)).trim();
          if (start === 0) rest = '';
          start = newline + 1;
          if (line) yield parse<T>(line, options.path);
        }
        rest = start === 0 ? rest + chunk : chunk.slice(start);
      }
    } catch (error) {
      if (error instanceof WatchDecodeError) throw error;
      if (idle) throw new WatchIdleError(options.path, options.idleMs);
      if (options.signal?.aborted) return;
      throw error;
    }
    if (idle) throw new WatchIdleError(options.path, options.idleMs);
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', stop);
    stop();
  }
}

function parse<T>(line: string, path: string): T {
  try {
    return JSON.parse(line) as T;
  } catch {
    // The client-node Watch drops such lines silently; a corrupt stream must be visible.
    throw new WatchDecodeError(`watch ${path}: unparsable event ${JSON.stringify(line.slice(0, 200))}`);
  }
}
