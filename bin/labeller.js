#!/usr/bin/env node
// The `labeller` command on Node. An installed package and the image run the build in dist/
// (plain JavaScript: Node strips no types under node_modules). A clone has src/ and runs the
// TypeScript sources (type stripping, Node ≥ 22.18), so an edit takes effect without a build and
// a stale dist/ never runs in its place. This file must still parse on old Node, to say so.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const sources = new URL('../src/cli.ts', import.meta.url);
const fromSources = existsSync(sources);
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 19)) {
  const fix = fromSources
    ? 'After `npm install`, `npx labeller` runs on the Node 24 it installs.'
    : 'Install Node 22.19 or newer and run labeller with it.';
  process.stderr.write(`labeller: needs Node 22.19 or newer, this is ${process.version}. ${fix}\n`);
  process.exit(2);
}
// The image's memory settings (bench/README.md, "Peak RSS"), for whoever runs the command: V8's
// young generation at 1 MiB and tuned for size, one malloc arena. V8 takes these flags, and glibc
// the variable, only when the process starts, so it starts again with them, once: execve keeps
// the pid, so signals and the exit status are as before. MALLOC_ARENA_MAX set (by this, or by a
// user tuning it) skips it, and the user's own flags (NODE_OPTIONS, node's) win over these.
if (process.env.MALLOC_ARENA_MAX === undefined && typeof process.execve === 'function') {
  const given = `${process.env.NODE_OPTIONS ?? ''} ${process.execArgv.join(' ')}`;
  const lean = ['--max-semi-space-size=1', '--optimize-for-size'].filter((f) => !given.includes(f.split('=')[0]));
  const self = fileURLToPath(import.meta.url);
  process.execve(process.execPath, [process.execPath, ...lean, ...process.execArgv, self, ...process.argv.slice(2)], {
    ...process.env,
    MALLOC_ARENA_MAX: '1',
  });
}
// An installed package compiles the same bundle at every start (about 15 ms of CPU under the flags
// above): Node's compile cache keeps V8's code for it in the OS temp dir, keyed by content, so
// later starts take it from there. Not for the sources, which change with every edit. A cache
// that cannot be written (a read-only temp dir) is skipped by Node; NODE_DISABLE_COMPILE_CACHE=1
// turns it off, NODE_COMPILE_CACHE=DIR moves it.
if (!fromSources) (await import('node:module')).enableCompileCache?.();
await import(fromSources ? sources.href : new URL('../dist/cli.js', import.meta.url).href);
