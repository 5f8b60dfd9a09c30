// etcd's revision and compaction, through its HTTP/JSON gateway: what a test needs to make a
// watch's resourceVersion too old.
import { fetch } from 'undici';

/** etcd's current revision, through its HTTP/JSON gateway. */
export async function etcdRevision(etcd: string): Promise<number> {
  const response = await fetch(`${etcd}/v3/kv/range`, {
    method: 'POST',
    body: JSON.stringify({ key: Buffer.from('/').toString('base64') }),
  });
  const body = (await response.json()) as { header?: { revision?: string } };
  const revision = Number(body.header?.revision);
  if (!Number.isFinite(revision)) throw new Error(`no revision from etcd: ${JSON.stringify(body)}`);
  return revision;
}

/** Compacts etcd's history up to `revision` (physically), so older resourceVersions are gone. */
export async function compactEtcd(etcd: string, revision: number): Promise<void> {
  const response = await fetch(`${etcd}/v3/kv/compaction`, {
    method: 'POST',
    body: JSON.stringify({ revision: String(revision), physical: true }),
  });
  if (!response.ok) throw new Error(`etcd compaction failed: ${response.status} ${await response.text()}`);
  await response.text();
}
