// Reads an API server's answer whole, as text.
import type { IncomingMessage } from 'node:http';

/**
 * The whole body of `response` as text; rejects when the connection drops before its end.
 * Decoded chunk by chunk, not joined as one Buffer: a list page is hundreds of kilobytes, and a
 * freed Buffer that size stays resident in malloc's heap (V8 returns a large string's pages).
 * Nothing of the body stays reachable from the response once it is read: a kept-alive socket
 * holds the request that opened it, and with it this response, for as long as it is open
 * (node:https's TLS session listener), so a listener left on it would keep the whole first
 * body of every pooled connection (a list page each) alive.
 */
export function readBody(response: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let chunks: string[] = [];
    const take = (chunk: string): void => void chunks.push(chunk);
    const done = (): void => {
      response.removeListener('data', take);
      response.removeListener('end', end);
      response.removeListener('error', fail);
      response.removeListener('close', closed);
      chunks = [];
    };
    const end = (): void => {
      const text = chunks.length === 1 ? chunks[0]! : chunks.join('');
      done();
      resolve(text);
    };
    const fail = (error: Error): void => {
      done();
      reject(error);
    };
    const closed = (): void => {
      if (!response.complete) fail(new Error('the connection closed before the whole answer arrived'));
    };
    response.setEncoding('utf8');
    response.on('data', take);
    response.on('end', end);
    response.on('error', fail);
    response.on('close', closed);
  });
}
