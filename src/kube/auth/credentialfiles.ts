// Credentials kept in files that are replaced while we run: token files (the kubeconfig's
// `tokenFile`, the projected service-account token) and client certificate/key files.
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readText } from '../../util/readtext.ts';
import { KubeConfigError } from '../../apimachinery/errors.ts';
import { Refreshing } from './refreshing.ts';

/**
 * How often credential files are read again. client-go re-reads token files every minute and
 * certificate files every 5 minutes; a few small files every 10 s cost nothing, and a rotated
 * certificate is then in use within seconds even where the server answers 403, not 401.
 */
export const FILE_REREAD_MS = 10_000;

/**
 * `paths` read together and turned into a value by `parse`. While the contents stay the same
 * the same value is returned, so the client keeps its connection pool. A read or parse failure
 * after a good load keeps the last good value (a file caught half-written), as client-go does.
 */
export function fileSource<T>(
  paths: readonly string[],
  parse: (contents: readonly string[]) => T,
  now: () => number = Date.now,
): Refreshing<T> {
  let last: { contents: string; value: T } | undefined;
  return new Refreshing<T>(async (previous) => {
    const freshUntil = now() + FILE_REREAD_MS;
    try {
      const contents = await Promise.all(paths.map((path) => readText(path)));
      const key = contents.join('\0');
      if (last?.contents !== key) last = { contents: key, value: parse(contents) };
      return { value: last.value, freshUntil };
    } catch (error) {
      if (previous !== undefined) return { value: previous, freshUntil };
      throw error instanceof KubeConfigError ? error : new KubeConfigError(
        `cannot read ${paths.join(' and ')}: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
  }, now);
}

/** A bearer token file: its contents, trimmed (kubelet and editors add a newline). */
export function tokenFile(path: string, now?: () => number): Refreshing<string> {
  return fileSource([path], ([text = '']) => {
    const token = text.trim();
    if (!token) throw new KubeConfigError(`token file ${path} is empty`);
    return token;
  }, now);
}

export interface KeyPair {
  readonly cert: string;
  readonly key: string;
}

/** Checks that a PEM certificate and key belong together, so a half-rotated pair is never used. */
export function keyPair(cert: string, key: string, source: string): KeyPair {
  try {
    if (!new X509Certificate(cert).checkPrivateKey(createPrivateKey(key))) {
      throw new Error('the key does not belong to the certificate');
    }
  } catch (error) {
    throw new KubeConfigError(
      `client certificate ${source}: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  return { cert, key };
}

/** A client certificate and key in two files, read together. */
export function keyPairFiles(certPath: string, keyPath: string, now?: () => number): Refreshing<KeyPair> {
  return fileSource(
    [certPath, keyPath],
    ([cert = '', key = '']) => keyPair(cert, key, `${certPath} / ${keyPath}`),
    now,
  );
}
