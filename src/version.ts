// labeller's version, from the package.json next to src/ (a clone) or dist/ (the package, the image).
import { readFileSync } from 'node:fs';

export function version(): string {
  return (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
}
