// A source in a file (a mounted Secret or ConfigMap, or any path), followed as the config file
// is: a mounted volume's symlink swap is seen, and a slow re-read catches what a watch misses.
import { watchFile } from '../runtime/filewatch.ts';
import { aborted } from '../util/aborted.ts';
import { readText } from '../util/readtext.ts';
import { attempt, type Loader, parseContent } from './loader.ts';

export function fileLoader(path: string): Loader {
  return async (report, signal, once) => {
    const first = await readText(path).catch((
      error: unknown,
    ) => (error instanceof Error ? error : new Error(String(error))));
    report(first instanceof Error ? cannotRead(path, first) : attempt(() => parseContent(first)));
    if (once) return;
    watchFile(path, first instanceof Error ? '' : first, (content) => {
      report(content instanceof Error ? cannotRead(path, content) : attempt(() => parseContent(content)));
    }, { signal });
    await aborted(signal);
  };
}

function cannotRead(path: string, error: Error): Error {
  const code = (error as NodeJS.ErrnoException).code;
  return new Error(`${path}: cannot read the file (${code ?? error.message})`);
}
