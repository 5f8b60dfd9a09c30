import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Discovery } from '../kube/discovery.ts';
import { DiscoveryCache } from '../kube/discoverycache.ts';
import { BUILTINS, WIDGETS } from '../kube/testing/resources.ts';
import { createLogger } from '../util/log.ts';
import { pruneConfig } from './prune.ts';

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
