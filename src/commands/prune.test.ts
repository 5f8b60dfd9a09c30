import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Discovery } from '../kube/discovery.ts';
import { DiscoveryCache } from '../kube/discoverycache.ts';
import { BUILTINS, WIDGETS } from '../apimachinery/testing/resources.ts';
import type { Lease } from '../kube/lease.ts';
import { createLogger } from '../util/log.ts';
import { pruneConfig, shardGroupGone } from './prune.ts';

const log = createLogger({ level: 'error', format: 'json', write: () => {} });

test('prune --all-kinds: every listable, watchable and patchable kind, only namespaced ones (in those namespaces) when namespaces are given', async () => {
  const discovery = new DiscoveryCache(
    async (): Promise<Discovery> => ({ resources: [...BUILTINS, WIDGETS], failedGroups: [] }),
    log,
    { server: 'https://cluster', context: 'test' },
  );
  await discovery.load(new AbortController().signal);
  const everywhere = pruneConfig({ allKinds: true, namespaces: [] }, discovery, log);
  assert.equal(everywhere.kinds.length, BUILTINS.length + 1);
  assert.ok(everywhere.kinds.some((kind) => kind.resource === 'namespaces'));
  const namespaced = pruneConfig({ allKinds: true, namespaces: ['shop'] }, discovery, log);
  assert.deepEqual(
    namespaced.kinds.map((kind) => kind.resource).filter((r) =>
      ['namespaces', 'nodes', 'widgets.example.com'].includes(r)
    ),
    ['widgets.example.com'],
  );
  assert.ok(namespaced.kinds.every((kind) => kind.namespaces.join() === 'shop' && kind.labels.size === 0));
});

/** A shard group's member Leases in memory, changed by `script` as the fake clock passes each time. */
class Group {
  readonly leases = new Map<string, Lease>();
  readonly deleted: string[] = [];
  #version = 0;
  #now = 0;
  readonly clock = {
    now: () => this.#now,
    sleep: async (ms: number) => {
      this.#now += ms;
      this.script(this.#now);
    },
  };
  script: (now: number) => void = () => {};

  /** Writes member `name`'s Lease (a renewal), renewed `agoMs` ago by its renewTime. */
  renew(name: string, agoMs = 0): void {
    this.leases.set(name, {
      metadata: { name, namespace: 'ops', resourceVersion: String(++this.#version) },
      spec: { holderIdentity: name, leaseDurationSeconds: 4, renewTime: new Date(Date.now() - agoMs).toISOString() },
    });
  }

  async list(): Promise<readonly Lease[]> {
    return [...this.leases.values()];
  }

  async delete(lease: Lease): Promise<boolean> {
    const { name, resourceVersion } = lease.metadata;
    const current = this.leases.get(name);
    if (!current) return true;
    if (current.metadata.resourceVersion !== resourceVersion) return false;
    this.leases.delete(name);
    this.deleted.push(`${name}@${this.#now}`);
    return true;
  }
}

test('prune --shards auto waits until no member holds its Lease (deleted, or unchanged for its lease duration), then deletes those left', async () => {
  const group = new Group();
  group.renew('leaving');
  group.renew('stopping');
  group.renew('long-gone', 60_000);
  // `stopping` renews until 3 s (and may no longer after: its rights are gone); `leaving` deletes its Lease at 2 s.
  group.script = (now) => {
    if (now <= 3000) group.renew('stopping');
    if (now === 2000) group.leases.delete('leaving');
  };
  const options = { group: 'g', namespace: 'ops', retryPeriodMs: 1000, deleteLeft: true, log, clock: group.clock };
  assert.equal(await shardGroupGone(group, options, new AbortController().signal), true);
  // Seen renewed last at 3 s, held until 3 s + 4 s: deleted at the first look after, with the one long gone.
  assert.deepEqual(group.deleted, ['stopping@8000', 'long-gone@8000']);
  assert.equal(group.leases.size, 0);

  // A dry run deletes nothing; a Lease long gone holds nothing up.
  const dry = new Group();
  dry.renew('long-gone', 60_000);
  assert.equal(
    await shardGroupGone(dry, { ...options, deleteLeft: false, clock: dry.clock }, new AbortController().signal),
    true,
  );
  assert.equal(dry.leases.size, 1);

  // A member renewing for ever: false once the signal aborts.
  const live = new Group();
  live.renew('member');
  const stop = new AbortController();
  live.script = (now) => {
    live.renew('member');
    if (now >= 10_000) stop.abort();
  };
  assert.equal(await shardGroupGone(live, { ...options, clock: live.clock }, stop.signal), false);
  assert.deepEqual(live.deleted, []);
});
