// The commit a tree of labeller's sources is at, from git: stamped into the build by
// scripts/build.ts, and read at `--version` time when labeller runs from a clone's sources.
import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';

/**
 * The full commit of the git work tree whose top is `dir`; undefined without git, outside a work
 * tree, or when `dir` is only a folder inside another project's tree (sources vendored there).
 */
export function gitCommit(dir: string): string | undefined {
  try {
    const [top, commit] = execFileSync('git', ['rev-parse', '--show-toplevel', 'HEAD'], {
      cwd: dir,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim().split('\n');
    return top !== undefined && resolve(top) === resolve(dir) && /^[0-9a-f]{40,64}$/.test(commit ?? '')
      ? commit
      : undefined;
  } catch {
    // No git on PATH, not a work tree, or (Deno) no permission to run it: the version says so.
    return undefined;
  }
}

/** The short form `--version` prints, as `git log --oneline` does by default. */
export function shortCommit(commit: string): string {
  return commit.slice(0, 7);
}
