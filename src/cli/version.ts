// labeller's version: stamped into the build by scripts/build.ts (the package, the image); in a
// clone, read from the package.json at the top of the sources.
import { readFileSync } from 'node:fs';

declare const LABELLER_VERSION: string | undefined;

export function version(): string {
  if (typeof LABELLER_VERSION === 'string') return LABELLER_VERSION;
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string })
    .version;
}
