#!/usr/bin/env node
// The `labeller` command on Node. An installed package and the image run the build in dist/
// (plain JavaScript: Node strips no types under node_modules). A clone has src/ and runs the
// TypeScript sources (type stripping, Node ≥ 22.18), so an edit takes effect without a build and
// a stale dist/ never runs in its place. This file must still parse on old Node, to say so.
import { existsSync } from 'node:fs';

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
await import(fromSources ? sources.href : new URL('../dist/cli.js', import.meta.url).href);
