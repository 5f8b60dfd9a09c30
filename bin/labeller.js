#!/usr/bin/env node
// The `labeller` command on Node: tsx loads the TypeScript sources (also from node_modules,
// where Node's own type stripping is off).
import { register } from 'tsx/esm/api';

register();
await import('../src/cli.ts');
