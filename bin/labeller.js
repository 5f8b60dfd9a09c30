#!/usr/bin/env node
// The `labeller` command on Node: tsx loads the TypeScript sources (also from node_modules,
// where Node's own type stripping is off).
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 19)) {
  process.stderr.write(`labeller: needs Node 22.19 or newer, this is ${process.version}. After \`npm ci\`, \`npx labeller\` runs on the Node 24 it installs.\n`);
  process.exit(2);
}
const { register } = await import('tsx/esm/api');
register();
await import('../src/cli.ts');
