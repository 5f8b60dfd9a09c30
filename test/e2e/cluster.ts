// What every e2e test file needs, bound to the shared cluster of the test run (test/run.ts): an
// admin handle (test/cluster/cluster.ts's Cluster) closed when the file's tests end, namespaces of
// its own, ServiceAccounts, and the API server's audit log.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import type { KubeClient } from '../../src/kube/client.ts';
import { type AuditEvent, auditEvents as readAudit, auditTail as tailAudit } from '../cluster/audit.ts';
import { Cluster, copyKubeconfig, type KubeconfigChange, type PolicyRule } from '../cluster/cluster.ts';
import { eventually } from '../process/eventually.ts';
import { auditSkip, sharedAuditLog, sharedKubeconfig, skip } from '../cluster/testrun.ts';

export { type AuditEvent, auditSkip, eventually, type PolicyRule, skip };

let shared: Promise<Cluster> | undefined;
// Registered at the file's top level, so it runs once all of the file's tests have ended.
after(async () => (await shared)?.close());

function cluster(): Promise<Cluster> {
  shared ??= Cluster.connect(sharedKubeconfig());
  return shared;
}

export const kubeconfig = sharedKubeconfig;

/** A client with cluster-admin rights. */
export async function adminClient(): Promise<KubeClient> {
  return (await cluster()).client;
}

/** A fresh namespace for one test file; deleted when the file's tests end. */
export async function createNamespace(prefix: string): Promise<string> {
  return (await cluster()).namespace(prefix);
}

/** Creates an object (full, not metadata-only) with the admin client. */
export async function create<T = unknown>(path: string, body: object): Promise<T> {
  return (await cluster()).post<T>(path, body);
}

export async function labelsOf(path: string): Promise<Record<string, string>> {
  return (await cluster()).labelsOf(path);
}

/** A label change by another field manager (JSON merge patch; null removes a label). */
export async function patchLabels(
  path: string,
  labels: Record<string, string | null>,
  fieldManager?: string,
): Promise<void> {
  await (await cluster()).patchLabels(path, labels, fieldManager);
}

/** A namespaced CRD `<plural>.<group>` (v1), waited for until it is served. */
export async function createCrd(group: string, plural: string, kind: string): Promise<void> {
  await (await cluster()).createCrd(group, plural, kind);
}

/**
 * A kubeconfig for the ServiceAccount `name`, with a token from the TokenRequest API; with
 * `rules`, the ServiceAccount is created first, bound cluster-wide to exactly those (else it
 * exists, e.g. the chart's). `server` replaces the API server's address (e.g. a fault proxy's).
 */
export async function serviceAccountKubeconfig(
  namespace: string,
  name: string,
  rules?: readonly PolicyRule[],
  server?: string,
): Promise<string> {
  const admin = await cluster();
  return rules
    ? (await admin.serviceAccount(namespace, name, rules, server)).kubeconfig
    : admin.serviceAccountKubeconfig(namespace, name, server);
}

const dir = mkdtempSync(join(tmpdir(), 'labeller-e2e-'));
after(() => rmSync(dir, { recursive: true, force: true }));

let configs = 0;
/** A kinds.yaml with `yaml` in it, removed when the file's tests end. */
export function configFile(yaml: string): string {
  const path = join(dir, `kinds-${++configs}.yaml`);
  writeFileSync(path, yaml);
  return path;
}

/** A copy of the shared kubeconfig with another server address and/or identity. */
export function writeKubeconfig(change: KubeconfigChange): string {
  return copyKubeconfig(sharedKubeconfig(), dir, change);
}

/** The API server's audit events (one per completed request) that match `filter`. */
export function auditEvents(filter: (event: AuditEvent) => boolean): AuditEvent[] {
  return readAudit(sharedAuditLog(), filter);
}

/** The audit events matching `filter` written since the previous call (the first: since now). */
export function auditTail(filter: (event: AuditEvent) => boolean): () => AuditEvent[] {
  return tailAudit(sharedAuditLog(), filter);
}
