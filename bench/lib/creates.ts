// Creates timed one by one as a client sees them (--admission, bench/lib/admission.ts): objects of
// the bench's shape (objects.ts) POSTed once each, with no apply after, since what a create carries
// is the question; `concurrency` in flight. Each keeps its latency (request sent → response read),
// the labels its create response carried (what the object had from its first moment) and its
// Audit-Id (the API server's response header), by which the audit log tells when the server
// completed it: the audit event of a create leaves out a name the server generates.
import { readBody } from '../../src/kube/body.ts';
import type { KubeClient } from '../../src/kube/client.ts';
import { collection, type KindSpec, objectBody, pool } from './objects.ts';

/** One create: the `i`th object of the bench's shape in `namespace`, named, or with a name the server generates. */
export interface PlannedCreate {
  readonly namespace: string;
  readonly i: number;
  /** `name` for a named create, else the generateName prefix. */
  readonly name: string;
  readonly generateName: boolean;
}

export interface TimedCreate {
  readonly namespace: string;
  /** The object's name, as the response gave it. */
  readonly name: string;
  readonly generateName: boolean;
  readonly auditId: string;
  /** Request sent → response read. */
  readonly ms: number;
  /** The labels the create response carried. */
  readonly labels: Readonly<Record<string, string>>;
}

const ACCEPT = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json';

/** Creates `plan` as objects of `kind`, `concurrency` requests in flight; the first failure rejects. */
export async function timedCreates(
  admin: KubeClient,
  kind: KindSpec,
  plan: readonly PlannedCreate[],
  concurrency: number,
  signal: AbortSignal,
): Promise<TimedCreate[]> {
  const created: TimedCreate[] = new Array(plan.length);
  await pool(plan, concurrency, async (p, index) => {
    const body = objectBody(kind, p.name, p.i);
    const sent = p.generateName
      ? { ...body, metadata: { ...body.metadata, name: undefined, generateName: p.name } }
      : body;
    const started = performance.now();
    const response = await admin.request('POST', collection(kind, p.namespace), {
      headers: { 'content-type': 'application/json', accept: ACCEPT },
      body: JSON.stringify(sent),
      signal,
    });
    const text = await readBody(response);
    const ms = performance.now() - started;
    const { metadata } = JSON.parse(text) as { metadata: { name: string; labels?: Record<string, string> } };
    created[index] = {
      namespace: p.namespace,
      name: metadata.name,
      generateName: p.generateName,
      auditId: String(response.headers['audit-id'] ?? ''),
      ms,
      labels: metadata.labels ?? {},
    };
  }, signal);
  return created;
}
