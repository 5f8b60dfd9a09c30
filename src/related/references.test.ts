import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BUILTIN_REFERENCES, type ReverseReference } from '../config/references.ts';
import { referenceRelation } from '../config/template.ts';
import { projector } from '../labelling/object.ts';
import { labelledObject as object } from '../labelling/testing/objects.ts';
import { Store } from '../runtime/store.ts';
import { type Consumer, RelatedUnreadable, reverseRequeues } from './read.ts';
import { agreed, References, reverseKey, reverseKeys } from './references.ts';
import { UnreadableKinds } from './unreadable.ts';
import { BUILTINS, resource } from '../apimachinery/testing/resources.ts';
import type { ApiResource } from '../apimachinery/resource.ts';
import type { Discovery } from '../kube/discovery.ts';
import { DiscoveryCache } from '../kube/discoverycache.ts';
import { createLogger } from '../util/log.ts';

const mountedBy = BUILTIN_REFERENCES.get('mountedBy') as ReverseReference;
const scaler = BUILTIN_REFERENCES.get('scaler') as ReverseReference;
const CLAIMS = 'spec.volumes[*].persistentVolumeClaim.claimName';
const pod = (name: string, claims: readonly string[], labels: Record<string, string> = {}) =>
  object(name, { labels, fields: { [CLAIMS]: claims.join('\n') } });

test('the objects a pod names by its volumes, and an HPA by its scale target, item for item with the kind it names', () => {
  assert.deepEqual(reverseKeys(mountedBy, pod('web-1', ['data', 'logs'])), ['shop/data', 'shop/logs']);
  assert.deepEqual(reverseKeys(mountedBy, object('bare')), []);
  const hpa = object('web', {
    fields: { 'spec.scaleTargetRef.name': 'web', 'spec.scaleTargetRef.kind': 'Deployment' },
  });
  assert.deepEqual(reverseKeys(scaler, hpa), ['Deployment:shop/web']);
  assert.equal(reverseKey(scaler, 'Deployment', object('web')), 'Deployment:shop/web');
  assert.equal(reverseKey(mountedBy, 'PersistentVolumeClaim', object('data')), 'shop/data');
});

test('several objects naming one: a label is read where they all agree, the name where there is one', () => {
  const one = agreed('Pod', [pod('web-1', ['data'], { app: 'web', tier: 'a' })], CLAIMS);
  assert.equal(one.name, 'web-1');
  assert.deepEqual(one.labels, { app: 'web', tier: 'a' });
  const two = agreed('Pod', [
    pod('web-1', ['data'], { app: 'web', tier: 'a' }),
    pod('web-2', ['data'], { app: 'web', tier: 'b' }),
  ], CLAIMS);
  assert.equal(two.name, undefined, 'two names: none');
  assert.deepEqual(two.labels, { app: 'web' }, 'tier disagrees: absent');
  assert.deepEqual(two.via, { path: CLAIMS, value: 'web-1, web-2', reverse: true });
});

test("a pod's change requeues the claims it names or named: all of them when a label read changed, else those gained or lost", () => {
  const relation = referenceRelation('mountedBy');
  // Upserts and deletes carry their objects: the store is not read.
  const store = new Store(projector({ fieldManager: 'labeller' }));
  const queued: string[] = [];
  const consumer: Consumer = {
    kind: 'PersistentVolumeClaim',
    reads: new Map([[relation, [{ relation, field: 'labels', key: 'app' }]]]),
    stores: [],
    target: { enqueue: (key: string) => queued.push(key) },
  };
  const requeued = (before: ReturnType<typeof pod> | undefined, after: ReturnType<typeof pod> | undefined) => {
    queued.length = 0;
    const change = after
      ? { type: 'upsert' as const, key: 'shop/web-1', object: after, previous: before }
      : { type: 'delete' as const, key: 'shop/web-1', previous: before! };
    for (
      const [target, key] of reverseRequeues(change, store, relation, [consumer], (o) => reverseKeys(mountedBy, o))
    ) {
      target.enqueue(key);
    }
    return [...queued].sort();
  };
  assert.deepEqual(requeued(undefined, pod('web-1', ['data'], { app: 'web' })), ['shop/data'], 'created');
  assert.deepEqual(
    requeued(pod('web-1', ['data'], { app: 'web' }), pod('web-1', ['data'], { app: 'web', other: 'x' })),
    [],
    'a label nothing reads',
  );
  assert.deepEqual(
    requeued(pod('web-1', ['data'], { app: 'web' }), pod('web-1', ['data', 'logs'], { app: 'web' })),
    ['shop/logs'],
    'a claim gained',
  );
  assert.deepEqual(
    requeued(pod('web-1', ['data', 'logs'], { app: 'web' }), pod('web-1', ['data', 'logs'], { app: 'api' })),
    ['shop/data', 'shop/logs'],
    'the label read changed',
  );
  assert.deepEqual(requeued(pod('web-1', ['data'], { app: 'web' }), undefined), ['shop/data'], 'deleted');
});

test("where a reference's related objects are cached: a node, and a PV's claim in any namespace, whole on every shard member; a pod's ServiceAccount where the pod is; a PVC's pods watched whole", async () => {
  const log = createLogger({ level: 'error', format: 'json', write: () => {} });
  const resources = [
    ...BUILTINS,
    resource('', 'persistentvolumes', 'PersistentVolume', { namespaced: false, shortNames: ['pv'] }),
    resource('', 'persistentvolumeclaims', 'PersistentVolumeClaim', { shortNames: ['pvc'] }),
    resource('', 'serviceaccounts', 'ServiceAccount', { shortNames: ['sa'] }),
  ];
  const discovery = new DiscoveryCache(async (): Promise<Discovery> => ({ resources, failedGroups: [] }), log, {
    server: 'https://cluster',
    context: 'test',
  });
  await discovery.load(new AbortController().signal);
  const references = new References(BUILTIN_REFERENCES, discovery, new UnreadableKinds(log, undefined));
  references.resolve();
  const [pods, pvs, pvcs] = ['pods', 'persistentvolumes', 'persistentvolumeclaims'].map((name) =>
    resources.find((r) => r.resource === name)!
  );
  const where = (name: string, labelled: ApiResource, namespace: string, namespaced: boolean) => {
    const { id, namespace: at, unsplit, fields } = references.cache(
      referenceRelation(name),
      labelled,
      namespace,
      namespaced,
    );
    return { id, at, unsplit, whole: fields.length > 0 };
  };
  assert.deepEqual(where('node', pods!, 'shop', true), {
    id: 'nodes by reference',
    at: '',
    unsplit: false,
    whole: false,
  });
  assert.deepEqual(where('claim', pvs!, '', false), {
    id: 'persistentvolumeclaims by reference from any namespace',
    at: '',
    unsplit: true,
    whole: false,
  });
  assert.deepEqual(where('serviceAccount', pods!, 'shop', true), {
    id: 'serviceaccounts/shop by reference',
    at: 'shop',
    unsplit: false,
    whole: false,
  });
  assert.deepEqual(where('mountedBy', pvcs!, '', false), {
    id: 'pods naming by mountedBy',
    at: '',
    unsplit: false,
    whole: true,
  });
  // Not served (no HPAs here): unreadable, its labels held.
  assert.throws(() => where('scaler', pods!, '', false), RelatedUnreadable);
});
