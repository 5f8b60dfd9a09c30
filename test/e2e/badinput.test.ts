// Bad input gets a message that names the problem and the fix, and the right exit status; a
// kind that fails at run time (403) leaves the other kinds working.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { execFile } from 'node:child_process';
import { tmpdir } from 'node:os';
import { type AddressInfo, createServer } from 'node:net';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import {
  create,
  createCrd,
  createNamespace,
  eventually,
  labelsOf,
  serviceAccountKubeconfig,
  skip,
  writeKubeconfig,
} from './cluster.ts';
import { fatalMessage, Labeller, runLabeller } from '../process/labeller.ts';
import { denoPath } from '../process/runtime.ts';

const dir = mkdtempSync(join(tmpdir(), 'labeller-e2e-bad-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('bad input', { skip }, () => {
  const cases: [
    what: string,
    args: string[] | (() => Promise<string[]> | string[]),
    status: number,
    message: RegExp,
  ][] = [
    [
      'unknown kind',
      ['--kinds', 'deploymnts', '--label', 'a=b'],
      2,
      /unknown resource "deploymnts": not served by the API server\. Did you mean "deployments"\?/,
    ],
    [
      'invalid label key',
      ['--kinds', 'deploy', '--label', 'bad key=x'],
      2,
      /--label "bad key=x": name part must consist of alphanumeric characters/,
    ],
    [
      'invalid label value',
      ['--kinds', 'deploy', '--label', 'a=-x-'],
      2,
      /a value must .*alphanumeric|must start and end with an alphanumeric/,
    ],
    [
      'no kinds',
      ['--label', 'a=b'],
      2,
      /no kinds configured: pass --kinds deployments,services or --config kinds\.yaml/,
    ],
    [
      'unknown flag',
      ['--kinds', 'deploy', '--label', 'a=b', '--server-side'],
      2,
      /Unknown argument: server-side\. Run labeller --help/,
    ],
    [
      'missing config file',
      ['--config', '/nonexistent/kinds.yaml'],
      2,
      /\/nonexistent\/kinds\.yaml: cannot read the config file \(ENOENT\)/,
    ],
    [
      'malformed YAML',
      () => {
        const file = join(dir, 'bad.yaml');
        writeFileSync(file, 'kinds:\n  - resource: deploy\n   labels: {a: b}\n');
        return ['--config', file];
      },
      2,
      /bad\.yaml:3:4: YAML syntax error: bad indentation/,
    ],
    [
      'a config field with a typo',
      () => {
        const file = join(dir, 'typo.yaml');
        writeFileSync(file, 'labels: {a: b}\nkinds:\n  - resource: deploy\n    namespace: [x]\n');
        return ['--config', file];
      },
      2,
      /typo\.yaml: kinds\[0\]: unknown field "namespace" \(did you mean "namespaces"\?\)/,
    ],
    [
      'ambiguous kind',
      async () => {
        const ns = await createNamespace('ambiguous');
        await createCrd(`a-${ns}.example.com`, `gadgets${ns.replaceAll('-', '')}`, 'Gadget');
        await createCrd(`b-${ns}.example.com`, `gadgets${ns.replaceAll('-', '')}`, 'Gadget');
        return ['--kinds', `gadgets${ns.replaceAll('-', '')}`, '--label', 'a=b'];
      },
      2,
      /resource "gadgets\w+" is ambiguous: gadgets\w+\.a-[\w-]+\.example\.com, gadgets\w+\.b-[\w-]+\.example\.com\. Qualify it with its group/,
    ],
    [
      'two names of one resource',
      () => {
        const file = join(dir, 'aliases.yaml');
        writeFileSync(
          file,
          'kinds:\n  - resource: deployments\n    labels: {a: x}\n  - resource: deploy\n    labels: {b: y}\n',
        );
        return ['--config', file];
      },
      2,
      /aliases\.yaml: kinds\[0\] \("deployments"\) and kinds\[1\] \("deploy"\) are both deployments\.apps in every namespace: under one field manager they would remove each other's labels\. Merge them into one entry/,
    ],
    [
      'unreachable API server',
      async () => [
        '--kinds',
        'deploy',
        '--label',
        'a=b',
        '--kubeconfig',
        writeKubeconfig({ server: `https://127.0.0.1:${await closedPort()}` }),
      ],
      1,
      /cannot reach the API server at https:\/\/127\.0\.0\.1:\d+: .*ECONNREFUSED.*Check that it is up and that --kubeconfig\/--context point at it/,
    ],
  ];
  for (const [what, args, status, message] of cases) {
    test(`${what}: exit ${status} and a message that says what to do`, async () => {
      const exit = await runLabeller(typeof args === 'function' ? await args() : args);
      assert.equal(exit.code, status, exit.stderr);
      assert.match(exit.fatal ?? '', message, exit.stderr);
      assert.doesNotMatch(exit.stderr, /^\s+at /m, 'no stack trace');
    });
  }

  test('no kubeconfig, a pod without a token, rejected credentials: one line that names the fix, exit 2', async () => {
    const home = mkdtempSync(join(tmpdir(), 'labeller-e2e-home-'));
    after(() => rmSync(home, { recursive: true, force: true }));
    const alone = { KUBECONFIG: '', HOME: home, KUBERNETES_SERVICE_HOST: '', KUBERNETES_SERVICE_PORT: '' };
    const cases: [what: string, env: Record<string, string>, kubeconfig: string, message: RegExp][] = [
      [
        'no kubeconfig and not in a cluster',
        alone,
        '',
        /^no kubeconfig \(\$KUBECONFIG is unset and ~\/\.kube\/config does not exist\) and not inside a cluster .*Pass --kubeconfig/,
      ],
      [
        'a pod without a token',
        { ...alone, KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' },
        '',
        /^running in a pod without a service-account token \(\/var\/run\/secrets\/kubernetes\.io\/serviceaccount\/token is missing\): set automountServiceAccountToken: true/,
      ],
      [
        'rejected (expired) credentials',
        {},
        writeKubeconfig({ token: 'expired-or-revoked' }),
        /^the API server at https:\/\/\S+ rejected the credentials of context "\S+" \(401 Unauthorized\): they have expired or were revoked\. Log in again or refresh the kubeconfig, or pick another --context$/,
      ],
    ];
    for (const [what, env, kubeconfig, message] of cases) {
      const exit = await runLabeller(['--kinds', 'cm', '--label', 'a=b'], { kubeconfig, env });
      assert.equal(exit.code, 2, `${what}: ${exit.stderr}`);
      assert.match(exit.fatal ?? '', message, what);
      assert.doesNotMatch(exit.stderr, /^\s+at /m, `${what}: no stack trace`);
    }
  });

  test('a forbidden kind is reported and retried while the other kinds are labelled', async () => {
    const ns = await createNamespace('forbidden');
    await create(`/api/v1/namespaces/${ns}/configmaps`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'cm' },
    });
    // The identity may label config maps but not secrets.
    const kubeconfig = await serviceAccountKubeconfig(ns, 'labeller', [{
      apiGroups: [''],
      resources: ['configmaps'],
      verbs: ['get', 'list', 'watch', 'patch'],
    }]);
    const labeller = new Labeller(['--kinds', 'configmaps,secrets', '--label', 'team=platform', '--namespace', ns], {
      kubeconfig,
    });
    try {
      const failure = await labeller.waitForLog((l) => l.msg === 'watch failed; retrying' && l.kind === 'Secret');
      assert.match(String(failure['error']), /403 Forbidden: .*secrets.*grant this identity list\/watch\/patch/);
      await eventually(
        async () => (await labelsOf(`/api/v1/namespaces/${ns}/configmaps/cm`))['team'] === 'platform',
        'the config map to be labelled',
      );
      // Retried with backoff, not given up.
      await labeller.waitForLog((l) => l.msg === 'watch failed; retrying' && l.kind === 'Secret' && l !== failure);
      assert.ok(labeller.running, 'still running');
    } finally {
      assert.equal((await labeller.stop()).code, 0);
    }
  });
});

describe('npm run demo without Go or binaries', () => {
  test('one line saying what to install or set, exit 2, no stack trace', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'labeller-demo-cache-'));
    after(() => rmSync(empty, { recursive: true, force: true }));
    // The machine's PATH less Go, and a cache without binaries.
    const path = (process.env['PATH'] ?? '').split(':').filter((dir) => !existsSync(join(dir, 'go'))).join(':');
    const env = { ...process.env, PATH: path, LABELLER_CACHE_DIR: empty, KUBEBUILDER_ASSETS: '' };
    const cases: [Record<string, string | undefined>, RegExp][] = [
      [
        env,
        /^demo: cannot start the local control plane: no Go toolchain to build kube-apiserver and etcd; install Go, or set KUBEBUILDER_ASSETS to a folder with both binaries$/m,
      ],
      [
        { ...env, KUBEBUILDER_ASSETS: empty },
        /^demo: cannot start the local control plane: KUBEBUILDER_ASSETS=\S+ has no kube-apiserver; point it at a folder with kube-apiserver and etcd, or unset it to build them$/m,
      ],
    ];
    for (const [vars, message] of cases) {
      const exit = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const child = execFile(
          process.execPath,
          ['--import', 'tsx', 'test/demo.ts'],
          { env: vars },
          (error, _stdout, stderr) => resolve({ code: child.exitCode ?? (error ? 1 : 0), stderr }),
        );
      });
      assert.equal(exit.code, 2, exit.stderr);
      assert.match(exit.stderr, message);
      assert.doesNotMatch(exit.stderr, /^\s+at /m, 'no stack trace');
    }
  });
});

describe('Deno without permissions', () => {
  test('one line naming the permissions, exit 2, no stack trace', async () => {
    const exit = await runLabeller(['--version'], { command: [denoPath(), 'run', 'src/cli.ts'], raw: true });
    assert.equal(exit.code, 2, exit.stderr);
    assert.match(
      fatalMessage(exit.stderr) ?? '',
      /^Requires \w+ access to .*: Deno runs labeller only with these permissions: deno run --allow-env --allow-read --allow-net --allow-sys --allow-run src\/cli\.ts \(or -A\)$/,
    );
    assert.doesNotMatch(exit.stderr, /^\s+at /m);
  });
});
