import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { KindConfig } from '../config/model.ts';
import { namedNamespaces } from './host.ts';

const kind = (resource: string, namespaces: string[]): KindConfig => ({
  where: `kinds.yaml: ${resource}`,
  resource,
  namespaces,
  selector: undefined,
  labels: new Map(),
  annotations: new Map(),
  conflicts: 'force',
});

test('the shard layout takes the namespaces the config names, before any kind runs; none when an entry covers all', () => {
  assert.deepEqual(
    namedNamespaces({ kinds: [kind('configmaps', ['a', 'b']), kind('deployments', ['b', 'c'])] }),
    ['a', 'b', 'c'],
  );
  assert.equal(namedNamespaces({ kinds: [kind('configmaps', ['a']), kind('deployments', [])] }), undefined);
  assert.equal(
    namedNamespaces({
      kinds: [kind('configmaps', ['a'])],
      everyKind: { kind: kind('*', []), scope: 'namespaced', exclude: [] },
    }),
    undefined,
    'the every-kind entry counts',
  );
  assert.equal(namedNamespaces({ kinds: [] }), undefined);
});
