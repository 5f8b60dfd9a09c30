// labeller's version: stamped into the build by scripts/build.ts with the commit it was built
// from (the package, the image); in a clone, read from the package.json at the top of the
// sources, and the commit from git.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

declare const LABELLER_VERSION: string | undefined;
/** The build's commit (short); empty when the build had no git work tree to read it from. */
declare const LABELLER_COMMIT: string | undefined;

/** The package's version, e.g. 0.1.0. */
export function version(): string {
  if (typeof LABELLER_VERSION === 'string') return LABELLER_VERSION;
  return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string })
    .version;
}

/**
 * What `--version` prints: the version and where it was built from, `0.1.0 (abc1234)` for a
 * build, `0.1.0 (abc1234, source)` for a clone's sources, `(source)` alone without git.
 */
export async function versionLine(): Promise<string> {
  // One if/else, not an early return: esbuild then drops the source branch, and its import of
  // revision.ts, from the build.
  if (typeof LABELLER_COMMIT === 'string') return `${version()} (${LABELLER_COMMIT || 'commit unknown'})`;
  else {
    const { gitCommit, shortCommit } = await import('./revision.ts');
    const commit = gitCommit(fileURLToPath(new URL('../..', import.meta.url)));
    return `${version()} (${commit === undefined ? 'source' : `${shortCommit(commit)}, source`})`;
  }
}
