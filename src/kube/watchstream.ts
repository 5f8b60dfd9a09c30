// Reads a watch response: one JSON event per line, with a client-side idle timeout.
// Destroying the response (not only the request) is what ends a stalled stream on every runtime.
import { Buffer } from 'node:buffer';
import type { Readable } from 'node:stream';
import { WatchIdleError } from '../apimachinery/errors.ts';

const NEWLINE = 0x0a;

export class WatchDecodeError extends Error {
  override readonly name = 'WatchDecodeError';
}

/**
 * Yields the events of a newline-delimited JSON stream, those each chunk completes together (a
 * list's chunk brings a hundred: a generator's step each would be a promise and a microtask
 * each). Throws WatchIdleError when nothing arrives for `idleMs`, after `idle` (the client
 * replacing its connections); ends quietly when `signal` aborts or the server closes the stream.
 */
export async function* readWatchStream<T>(
  body: Readable,
  options: {
    readonly idleMs: number;
    readonly signal?: AbortSignal | undefined;
    readonly path: string;
    readonly idle?: (() => Promise<void>) | undefined;
  },
): AsyncGenerator<readonly T[]> {
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
  /** The start of a line whose end has not arrived, in the chunks it came in. */
  let rest: Buffer[] = [];
  try {
    arm(options.idleMs);
    try {
      // Bytes, not text: a line is decoded once, flat, from the chunk it is in. A string decoder
      // would decode every chunk (up to 64 KiB of a list's events) whole first, and searching that
      // text for newlines would copy it again. A newline byte is never part of a UTF-8 sequence.
      for await (const chunk of body as AsyncIterable<Buffer>) {
        heard = performance.now();
        let start = 0;
        let events: T[] | undefined;
        for (let newline = chunk.indexOf(NEWLINE); newline >= 0; newline = chunk.indexOf(NEWLINE, start)) {
          let line: string;
          if (rest.length === 0) line = chunk.toString('utf8', start, newline);
          else {
            rest.push(chunk.subarray(0, newline));
            line = Buffer.concat(rest).toString('utf8');
            rest = [];
          }
          start = newline + 1;
          const text = line.trim();
          if (!text) continue;
          let event: T;
          try {
            event = parse<T>(text, options.path);
          } catch (error) {
            // The events before it are whole: they go first.
            if (events) yield events;
            throw error;
          }
          (events ??= []).push(event);
        }
        if (start < chunk.length) rest.push(start === 0 ? chunk : chunk.subarray(start));
        if (events) yield events;
      }
    } catch (error) {
      if (error instanceof WatchDecodeError) throw error;
      if (!idle) {
        if (options.signal?.aborted) return;
        throw error;
      }
    }
    if (idle) {
      await options.idle?.();
      throw new WatchIdleError(options.path, options.idleMs);
    }
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
