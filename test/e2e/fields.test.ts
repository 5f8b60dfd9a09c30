// Templates reading the object's own fields outside its metadata (issue 48, item 1), against the
// real API server: a Service's type and a PersistentVolumeClaim's storage class become labels,
// follow a change of the field, and an absent field leaves the key unset; the admission policies
// render the same at create, where CEL sees the request's object.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ExplainReport } from '../../src/commands/explain.ts';
import { Labeller } from '../process/labeller.ts';
import { admission, apply, policiesSkip } from './admission.ts';
import { configFile, create, createNamespace, eventually, labelsOf, skip } from './cluster.ts';
import { adminClient } from './cluster.ts';

const service = (name: string, type: string) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name },
  spec: { type, ports: [{ port: 80, protocol: 'TCP' }] },
});
const claim = (name: string, storageClassName?: string) => ({
  apiVersion: 'v1',
  kind: 'PersistentVolumeClaim',
  metadata: { name },
  spec: {
    accessModes: ['ReadWriteOnce'],
    resources: { requests: { storage: '1Gi' } },
    ...(storageClassName === undefined ? {} : { storageClassName }),
  },
});

describe("templates reading the object's own fields", { skip }, () => {
  test("a Service's type and a claim's storage class become labels, follow a change, and an absent field sets nothing", async () => {
    const ns = await createNamespace('fields');
    await create(`/api/v1/namespaces/${ns}/services`, service('web', 'ClusterIP'));
    await create(`/api/v1/namespaces/${ns}/persistentvolumeclaims`, claim('data', 'fast'));
    await create(`/api/v1/namespaces/${ns}/persistentvolumeclaims`, claim('plain'));
    const config = configFile(`
kinds:
  - resource: svc
    namespaces: [${ns}]
    labels:
      example.com/service-type: "{{spec.type}}"
      example.com/first-port: "{{spec.ports[0].protocol}}-{{spec.ports[0].port}}"
  - resource: pvc
    namespaces: [${ns}]
    labels:
      example.com/storage-class: "{{spec.storageClassName}}"
      example.com/size: "{{spec.resources.requests.storage}}"
`);
    const labeller = new Labeller(['--config', config]);
    try {
      await eventually(
        async () =>
          (await labelsOf(`/api/v1/namespaces/${ns}/services/web`))['example.com/service-type'] === 'ClusterIP',
        'the Service labelled with its type',
      );
      assert.equal((await labelsOf(`/api/v1/namespaces/${ns}/services/web`))['example.com/first-port'], 'TCP-80');
      await eventually(
        async () =>
          (await labelsOf(`/api/v1/namespaces/${ns}/persistentvolumeclaims/data`))['example.com/storage-class'] ===
            'fast',
        'the claim labelled with its storage class',
      );
      // The claims are labelled each in its own reconcile, in no order: the other one may come later.
      await eventually(
        async () =>
          (await labelsOf(`/api/v1/namespaces/${ns}/persistentvolumeclaims/plain`))['example.com/size'] === '1Gi',
        'the claim without a storage class labelled with its size',
      );
      const plain = await labelsOf(`/api/v1/namespaces/${ns}/persistentvolumeclaims/plain`);
      assert.equal(plain['example.com/storage-class'], undefined, 'no storage class: the key is not set');
      // The field changes: the label follows.
      const client = await adminClient();
      await client.json('PATCH', `/api/v1/namespaces/${ns}/services/web`, {
        headers: { 'content-type': 'application/merge-patch+json' },
        body: JSON.stringify({ spec: { type: 'NodePort' } }),
      });
      await eventually(
        async () =>
          (await labelsOf(`/api/v1/namespaces/${ns}/services/web`))['example.com/service-type'] === 'NodePort',
        'the label to follow the type',
      );
      assert.ok(labeller.running);
      // explain names the field it read, and its value.
      const explained = await new Labeller(['explain', 'svc/web', '-n', ns, '--config', config, '-o', 'json']).exited;
      assert.equal(explained.code, 0, explained.stderr);
      const keys = (JSON.parse(explained.stdout) as ExplainReport).explanation?.keys ?? [];
      assert.deepEqual(keys.find((k) => k.key === 'example.com/service-type')?.inputs, [
        { from: 'field', path: 'spec.type', value: 'NodePort' },
      ]);
    } finally {
      await labeller.stop();
      labeller.kill();
    }
  });
});

describe("admission policies reading the object's own fields", { skip: await policiesSkip(skip) }, () => {
  test('a claim created gets its storage class label in the create response', async () => {
    const ns = await createNamespace('fields-admit');
    const config = configFile(`
kinds:
  - resource: pvc
    namespaces: [${ns}]
    labels:
      example.com/storage-class: "{{spec.storageClassName | default \\"none\\"}}"
      example.com/access: "{{spec.accessModes[0]}}"
`);
    const { stdout } = await admission(['--config', config, '--field-manager', 'labeller-fields-e2e']);
    await apply(stdout, 'labeller-fields-e2e');
    await eventually(
      async () => {
        const created = await create<{ metadata: { labels?: Record<string, string> } }>(
          `/api/v1/namespaces/${ns}/persistentvolumeclaims?dryRun=All`,
          claim(`probe-${Date.now()}`, 'fast'),
        );
        return created.metadata.labels?.['example.com/storage-class'] === 'fast';
      },
      'the policy to be in force',
      30_000,
      500,
    );
    const fast = await create<{ metadata: { labels?: Record<string, string> } }>(
      `/api/v1/namespaces/${ns}/persistentvolumeclaims`,
      claim('fast', 'fast'),
    );
    assert.deepEqual(
      [fast.metadata.labels?.['example.com/storage-class'], fast.metadata.labels?.['example.com/access']],
      ['fast', 'ReadWriteOnce'],
    );
    const plain = await create<{ metadata: { labels?: Record<string, string> } }>(
      `/api/v1/namespaces/${ns}/persistentvolumeclaims`,
      claim('plain'),
    );
    // No storage class in the request (the default one is set after admission's mutation): the default.
    assert.equal(plain.metadata.labels?.['example.com/storage-class'], 'none');
  });
});
