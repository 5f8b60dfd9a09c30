#!/usr/bin/env node
// The `labeller` command on Node: Node ≥ 22.18 runs the TypeScript sources directly (type
// stripping; the code uses only erasable syntax), so no compiler, cache or writable disk is needed.

// First thing: until the shutdown coordinator takes over, a termination signal simply ends the
// process with status 0 (nothing has started that needs draining). src/cli.ts picks this up.
const early = () => process.exit(0);
process.on('SIGTERM', early);
process.on('SIGINT', early);
globalThis[Symbol.for('labeller.earlySignalHandler')] = early;

const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 19)) {
  process.stderr.write(`labeller: needs Node 22.19 or newer, this is ${process.version}. After \`npm install\`, \`npx labeller\` runs on the Node 24 it installs.\n`);
  process.exit(2);
}
await import('../src/cli.ts');
