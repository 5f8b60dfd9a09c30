// Reads an API server's answer whole, as text or as bytes.
import { Buffer } from 'node:buffer';
import type { IncomingMessage } from 'node:http';

/**
 * The whole body of `response` as text; rejects when the connection drops before its end.
 * Decoded chunk by chunk, not joined as one Buffer: a list page is hundreds of kilobytes, and a
 * freed Buffer that size stays resident in malloc's heap (V8 returns a large string's pages).
 */
export function readBody(response: IncomingMessage): Promise<string> {
  response.setEncoding('utf8');
  return read<string>(response, (chunks) => (chunks.length === 1 ? chunks[0]! : chunks.join('')));
}

/**
 * The whole body of a small answer (a write's) as bytes, undecoded: its reader decodes only the
 * part it reads, and no string decoder is made for it.
 */
export function readBytes(response: IncomingMessage): Promise<Buffer> {
  return read<Buffer>(response, (chunks) => (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
}

/**
 * Collects the body's chunks and joins them at its end. Nothing of the body stays reachable from
 * the response once it is read: a kept-alive socket holds the request that opened it, and with it
 * this response, for as long as it is open (node:https's TLS session listener), so a listener left
 * on it would keep the whole first body of every pooled connection (a list page each) alive.
 */
function read<T>(response: IncomingMessage, join: (chunks: T[]) => T): Promise<T> {
  return new Promise((resolve, reject) => {
    let chunks: T[] = [];
    const take = (chunk: T): void => void chunks.push(chunk);
    const done = (): void => {
      response.removeListener('data', take);
      response.removeListener('end', end);
      response.removeListener('error', fail);
      response.removeListener('close', closed);
      chunks = [];
    };
    const end = (): void => {
      const body = join(chunks);
      done();
      resolve(body);
    };
    const fail = (error: Error): void => {
      done();
      reject(error);
    };
    const closed = (): void => {
      if (!response.complete) fail(new Error('the connection closed before the whole answer arrived'));
    };
    response.on('data', take);
    response.on('end', end);
    response.on('error', fail);
    response.on('close', closed);
  });
}
