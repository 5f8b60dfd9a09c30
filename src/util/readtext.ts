// A file's content as UTF-8 text, through fs.readFile's callback rather than node:fs/promises:
// that module brings readline, the REPL history and file watchers with it, 3 MiB of RSS in a
// process that otherwise never loads them.
import { readFile } from 'node:fs';

export function readText(path: string): Promise<string> {
  return new Promise((resolve, reject) =>
    readFile(path, 'utf8', (error, text) => (error ? reject(error) : resolve(text)))
  );
}
