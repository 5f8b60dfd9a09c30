#!/usr/bin/env node
// The `labeller` command on Node: Node ≥ 22.18 runs the TypeScript sources directly (type
// stripping; the code uses only erasable syntax), so no compiler, cache or writable disk is needed.

const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 19)) {
  process.stderr.write(`labeller: needs Node 22.19 or newer, this is ${process.version}. After \`npm install\`, \`npx labeller\` runs on the Node 24 it installs.\n`);
  process.exit(2);
}
await import('../src/cli.ts');
