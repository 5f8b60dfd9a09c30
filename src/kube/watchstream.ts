// Reads a watch response: one JSON event per line, with a client-side idle timeout.
// Cancelling the body reader (not aborting the fetch) is what ends a stalled stream on Deno.
import { WatchIdleError } from './errors.ts';

export class WatchDecodeError extends Error {
  override readonly name = 'WatchDecodeError';
}

/**
 * Yields each event of a newline-delimited JSON stream. Throws WatchIdleError when nothing
 * arrives for `idleMs`; ends quietly when `signal` aborts or the server closes the stream.
 */
export async function* readWatchStream<T>(
  body: ReadableStream<Uint8Array>,
  options: { readonly idleMs: number; readonly signal?: AbortSignal | undefined; readonly path: string },
): AsyncGenerator<T> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let idle = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const cancel = (): void => {
    reader.cancel().catch(() => {});
  };
  const arm = (): void => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      idle = true;
      cancel();
    }, options.idleMs);
  };
  options.signal?.addEventListener('abort', cancel, { once: true });
  let buffer = '';
  try {
    arm();
    for (;;) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch (error) {
        if (idle) throw new WatchIdleError(options.path, options.idleMs);
        if (options.signal?.aborted) return;
        throw error;
      }
      if (chunk.done) {
        if (idle) throw new WatchIdleError(options.path, options.idleMs);
        return;
      }
      arm();
      buffer += decoder.decode(chunk.value, { stream: true });
      let newline: number;
      while ((newline = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, newline).trim();
        buffer = buffer.slice(newline + 1);
        if (line) yield parse<T>(line, options.path);
      }
    }
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', cancel);
    cancel();
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
