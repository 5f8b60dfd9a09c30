// The chart's configReload: live (default) leaves the pods running on a config change, for
// labeller to apply the mounted ConfigMap's new content itself; restart rolls them.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { containers, EXAMPLES, type Manifest, only, render } from './helm.ts';

const podAnnotations = (deployment: Manifest) =>
  (deployment['spec'] as { template: { metadata: { annotations?: Record<string, string> } } }).template.metadata
    .annotations ?? {};

describe('chart: configReload', () => {
  test('live: no config checksum on the pods, and the ConfigMap mounted as a folder (a subPath mount is never updated); restart: the checksum rolls them', async () => {
    for (const file of EXAMPLES) {
      const live = only(await render({ files: [file] }), 'Deployment');
      assert.equal(podAnnotations(live)['checksum/config'], undefined, file);
      const [container] = containers(live);
      const mount = (container?.['volumeMounts'] as { name: string; mountPath: string; subPath?: string }[]).find((m) =>
        m.name === 'config'
      );
      assert.ok(mount && mount.subPath === undefined, `${file}: the config folder is mounted whole`);
      const args = container?.args ?? [];
      assert.ok(args.includes(`--config=${mount.mountPath}/kinds.yaml`), `${file}: labeller reads the mounted file`);
      const restart = only(await render({ files: [file], values: { configReload: 'restart' } }), 'Deployment');
      assert.match(podAnnotations(restart)['checksum/config'] ?? '', /^[0-9a-f]{64}$/, file);
    }
  });
});
