// Load only what the work needs: @kubernetes/client-node (its generated API costs about 80 MiB
// and up to 2 s) is imported only for kubeconfigs with an auth provider or a proxy. A module
// hook in the labeller process reports every import of it on stderr.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { createNamespace, skip, writeKubeconfig } from './cluster.ts';
import { runLabeller } from '../process/labeller.ts';

const dir = mkdtempSync(join(tmpdir(), 'labeller-e2e-loading-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const hook = join(dir, 'hook.mjs');
writeFileSync(
  hook,
  `import { registerHooks } from 'node:module';
registerHooks({
  resolve(specifier, context, next) {
    if (specifier.startsWith('@kubernetes/client-node')) process.stderr.write('client-node imported\\n');
    return next(specifier, context);
  },
});
`,
);
const LOADED = 'client-node imported';

/** Runs the CLI with the hook; returns the exit and whether client-node was imported. */
async function run(
  args: readonly string[],
  kubeconfigPath?: string,
): Promise<{ code: number | null; stderr: string; loaded: boolean }> {
  const exit = await runLabeller(args, {
    env: { NODE_OPTIONS: `--import=${hook}` },
    ...(kubeconfigPath === undefined ? {} : { kubeconfig: kubeconfigPath }),
  });
  return { code: exit.code, stderr: exit.stderr, loaded: exit.stderr.includes(LOADED) };
}

describe('what labeller loads', { skip }, () => {
  test('--help, --version, usage and config errors never import client-node', async () => {
    const cases: [string[], number][] = [
      [['--help'], 0],
      [['--version'], 0],
      [['--kinds', 'cm', '--label', 'bad key=x'], 2],
      [['--kinds', 'cm', '--label', 'a=b', '--kubeconfig', join(dir, 'missing')], 2],
      [['--kinds', 'cm', '--label', 'a=b', '--context', 'nope'], 2],
    ];
    for (const [args, status] of cases) {
      const result = await run(args);
      assert.equal(result.code, status, `${args.join(' ')}: ${result.stderr}`);
      assert.equal(result.loaded, false, `${args.join(' ')} imported client-node`);
    }
  });

  test('a run with a token kubeconfig or a proxy-url never imports client-node; one with an auth provider does', async () => {
    const ns = await createNamespace('loading');
    const args = ['--kinds', 'configmaps', '--label', 'team=platform', '--namespace', ns, '--once'];
    const plain = await run(args);
    assert.equal(plain.code, 0, plain.stderr);
    assert.equal(plain.loaded, false);
    const edited = (edit: (config: KubeconfigJson) => void): string => {
      const path = writeKubeconfig({});
      const config = JSON.parse(readFileSync(path, 'utf8')) as KubeconfigJson;
      edit(config);
      writeFileSync(path, JSON.stringify(config));
      return path;
    };
    // A proxy-url goes through labeller's own tunnels (the proxy is not there: exit 1).
    const viaProxy = await run(
      args,
      edited((config) => config.clusters.forEach((c) => (c.cluster['proxy-url'] = 'http://127.0.0.1:1'))),
    );
    assert.equal(viaProxy.code, 1, viaProxy.stderr);
    assert.equal(viaProxy.loaded, false, viaProxy.stderr);
    // The positive control: the hook does see the import, for an auth provider.
    const withProvider = await run(
      args,
      edited((config) =>
        config.users.forEach((u) => (u.user = { 'auth-provider': { name: 'oidc', config: { 'id-token': 'x' } } }))
      ),
    );
    assert.equal(withProvider.loaded, true, withProvider.stderr);
  });
});

interface KubeconfigJson {
  clusters: { cluster: Record<string, unknown> }[];
  users: { user: Record<string, unknown> }[];
}
