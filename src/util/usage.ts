// The failures a user fixes by changing how labeller is run (a flag, the config file, the
// kubeconfig, the kinds named): exit status 2, as for every command-line tool. Each layer
// derives its own from this one, so the entry point decides the exit status by one check.
export class UsageError extends Error {
  override readonly name: string = 'UsageError';
}
