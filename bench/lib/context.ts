// What every measurement of bench/run.ts works with: the control plane, an admin client, the audit
// log of labeller's requests, the API resources of the bench's kinds, the signal that ends the run
// (Ctrl-C) and the progress log.
import type { KubeClient } from '../../src/kube/client.ts';
import type { ApiResource } from '../../src/apimachinery/resource.ts';
import type { ControlPlane } from '../../test/controlplane/controlplane.ts';
import type { AuditRequests } from '../../test/cluster/audit.ts';
import type { Log } from './cli.ts';
import type { KindSpec } from './objects.ts';

export interface Bench {
  readonly controlPlane: ControlPlane;
  /** The bench's own client (user agent `labeller-bench`). */
  readonly admin: KubeClient;
  /** The requests of user agents `labeller/…`. */
  readonly audit: AuditRequests;
  /** The kinds labelled (--kinds) and their API resources. */
  readonly resources: ReadonlyMap<KindSpec, ApiResource>;
  readonly signal: AbortSignal;
  readonly log: Log;
}
