// scripts/chartdocs.ts: chart/README.md is what the chart's values.yaml, schema and Chart.yaml
// say, and the check fails, naming the fix, when it is stale or when a value has no description.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { chartReadme, describedValues } from '../../scripts/chartdocs.ts';

const work = mkdtempSync(join(tmpdir(), 'labeller-chartdocs-'));
after(() => rmSync(work, { recursive: true, force: true }));

/** `chartdocs --check` on a copy of the chart changed by `change`. */
function check(name: string, change: (chart: string) => void): { status: number | null; stderr: string } {
  const chart = join(work, name);
  cpSync('chart', chart, { recursive: true });
  change(chart);
  const result = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/chartdocs.ts', '--check', '--chart', chart], {
    encoding: 'utf8',
  });
  return { status: result.status, stderr: result.stderr };
}

test('chart/README.md is current, and lists every value with its type and default', () => {
  const { readme, errors } = chartReadme('chart');
  assert.deepEqual(errors, []);
  assert.equal(readFileSync('chart/README.md', 'utf8'), readme, 'run npm run chartdocs');
  assert.match(readme, /^\| `conflicts` \| string, one of `force`, `skip` \| `"force"` \| When another field manager/m);
  assert.match(readme, /^\| `image\.digest` \| string \| `""` \| Image digest/m);
  assert.match(readme, /^\| `leaderElection\.leaseDuration` \| string \| `"15s"` \|/m);
  assert.match(readme, /^### Availability$/m);
});

test('--check passes on the chart as it is, and fails, naming the fix, once a description changes', () => {
  assert.deepEqual(check('same', () => {}), { status: 0, stderr: '' });
  const stale = check('stale', (chart) => {
    const values = join(chart, 'values.yaml');
    writeFileSync(values, readFileSync(values, 'utf8').replace('# -- Image pull policy.', '# -- How to pull.'));
  });
  assert.equal(stale.status, 1);
  assert.match(stale.stderr, /README\.md is stale: run `npm run chartdocs` and commit it/);
});

test('a value without a # -- description fails the check, naming it', () => {
  const undocumented = check(
    'undocumented',
    (chart) => appendFileSync(join(chart, 'values.yaml'), '\nnewThing:\n  size: 3\n'),
  );
  assert.equal(undocumented.status, 1);
  assert.match(undocumented.stderr, /values\.yaml: newThing\.size has no `# --` description/);
});

test('descriptions: nested keys by path, continued over comment lines, in the sections of the banners', () => {
  const sections = describedValues([
    '# -----------------------------------------',
    '# First',
    '# what it is about',
    '# -----------------------------------------',
    '',
    '# -- one line',
    '# and its continuation',
    'a: 1',
    'b:',
    '  # -- nested',
    '  c: [x]',
    '  # a plain comment before an undescribed key',
    '  d: 2',
    '# -----------------------------------------',
    '# Second',
    '# -----------------------------------------',
    'e:',
    '  f:',
    '    # -- deeper',
    '    g: true',
  ].join('\n'));
  assert.deepEqual(sections, [
    {
      title: 'First',
      text: 'what it is about',
      rows: [{ path: ['a'], description: 'one line and its continuation' }, {
        path: ['b', 'c'],
        description: 'nested',
      }],
    },
    { title: 'Second', text: '', rows: [{ path: ['e', 'f', 'g'], description: 'deeper' }] },
  ]);
});
