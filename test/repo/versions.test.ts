// The Kubernetes versions the chart admits are the ones CI tests: chart/Chart.yaml's kubeVersion
// starts at the minor of the oldest version .ci/run runs the e2e suite on, which is older than
// the default of test/controlplane/build.sh (the newest, which runs the whole suite).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';

const read = (path: string): string => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const minor = (version: string | undefined): number => Number(/^v?1\.(\d+)\./.exec(version ?? '')?.[1] ?? NaN);

describe('tested Kubernetes versions', () => {
  test("the chart's kubeVersion starts at the oldest version CI tests; build.sh's default is newer", () => {
    const oldest = /^OLDEST_K8S_VERSION=(v1\.\d+\.\d+)$/m.exec(read('.ci/run'))?.[1];
    const newest = /^K8S_VERSION="\$\{LABELLER_K8S_VERSION:-(v1\.\d+\.\d+)\}"$/m.exec(
      read('test/controlplane/build.sh'),
    )?.[1];
    const floor = /^kubeVersion: ">=(1\.\d+\.0)-0"$/m.exec(read('chart/Chart.yaml'))?.[1];
    assert.ok(oldest && newest && floor, `found ${oldest}, ${newest}, ${floor}`);
    assert.equal(minor(`v${floor}`), minor(oldest), `kubeVersion >=${floor} but .ci/run tests ${oldest}`);
    assert.ok(minor(newest) > minor(oldest), `build.sh's default ${newest} is newer than ${oldest}`);
  });
});
