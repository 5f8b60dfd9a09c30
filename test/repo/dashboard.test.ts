// chart/dashboards/labeller.json against Grafana's published schema and against labeller's
// metrics. @grafana/schema ships TypeScript types generated from Grafana's CUE schema, not a JSON
// Schema, and a JSON import would widen every string to `string` (failing enum fields and
// skipping the unknown-field check), so the dashboard is written out as an object literal with
// `satisfies GrafanaDashboard` (test/repo/grafana.ts) and checked by tsc. At run time: the
// schema version is the one Grafana's package writes, every query reads the chosen Prometheus,
// names metrics labeller exports and scopes them with the namespace and job variables, rates
// take $__rate_interval, and the panels tile the grid.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { defaultDashboard } from '@grafana/schema';
import { Metrics } from '../../src/metrics/metrics.ts';
import type { GrafanaDashboard, PrometheusQuery } from './grafana.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const FILE = 'chart/dashboards/labeller.json';
const text = readFileSync(join(ROOT, FILE), 'utf8');
// The shape is what the tsc test checks; this is only how the rest of the file reads it.
const dashboard = JSON.parse(text) as GrafanaDashboard;
const panels = dashboard.panels;
const queries: { panel: string; query: PrometheusQuery }[] = panels.flatMap((panel) =>
  'targets' in panel ? panel.targets.map((query) => ({ panel: panel.title ?? '', query })) : []
);
/** The API server's metric the protection panel reads (labeller's protecting policies, by name). */
const API_SERVER_PROTECTION = 'apiserver_validating_admission_policy_check_total';
/** What the labeller's metrics are scoped by in every query: the dashboard's variables. */
const SCOPE = ['namespace=~"$namespace"', 'job=~"$job"'];

const work = mkdtempSync(join(tmpdir(), 'labeller-dashboard-'));
after(() => rmSync(work, { recursive: true, force: true }));

/** The metric names labeller's registry exports. */
async function exported(): Promise<Set<string>> {
  const exposition = await new Metrics().registry.metrics();
  return new Set([...exposition.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
}

describe(FILE, () => {
  test("satisfies Grafana's Dashboard type and its stat and time series panels' options (@grafana/schema, by tsc)", () => {
    // The JSON starts on line 2, so an error's line is the JSON's line + 1.
    const check = join(work, 'check.ts');
    writeFileSync(
      check,
      `import type { GrafanaDashboard } from ${JSON.stringify(join(ROOT, 'test/repo/grafana.ts'))};\n` +
        `export const dashboard = (${text.trimEnd()}) satisfies GrafanaDashboard;\n`,
    );
    const tsconfig = JSON.parse(readFileSync(join(ROOT, 'tsconfig.json'), 'utf8')) as {
      compilerOptions: Record<string, unknown>;
    };
    writeFileSync(join(work, 'package.json'), '{"type": "module"}\n');
    writeFileSync(
      join(work, 'tsconfig.json'),
      JSON.stringify({ compilerOptions: { ...tsconfig.compilerOptions, types: [] }, files: [check] }),
    );
    const run = spawnSync(
      process.execPath,
      [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(work, 'tsconfig.json')],
      { encoding: 'utf8' },
    );
    const errors = `${run.stdout}${run.stderr}`.replace(
      /\S*check\.ts\((\d+),(\d+)\)/g,
      (_, line: string, column: string) => `${FILE}:${Number(line) - 1}:${column}`,
    );
    assert.equal(run.status, 0, errors);
  });

  test("carries the schema version Grafana's package writes, a uid, and a Prometheus data source variable", () => {
    assert.equal(dashboard.schemaVersion, defaultDashboard.schemaVersion);
    assert.match(dashboard.uid ?? '', /^[A-Za-z0-9_-]{1,40}$/);
    const variables = dashboard.templating?.list ?? [];
    const datasource = variables.find((v) => v.name === 'datasource');
    assert.deepEqual([datasource?.type, datasource?.query], ['datasource', 'prometheus']);
    for (const name of ['namespace', 'job']) {
      const variable = variables.find((v) => v.name === name);
      assert.equal(variable?.type, 'query', name);
      assert.equal(variable.includeAll && variable.allValue, '.*', `${name}: All matches series without the label too`);
    }
  });

  test('every panel and query reads the chosen Prometheus', () => {
    for (const panel of panels) {
      if (panel.type === 'row') continue;
      assert.deepEqual(panel.datasource, { type: 'prometheus', uid: '${datasource}' }, panel.title);
    }
    assert.ok(queries.length >= 14, `${queries.length} queries`);
    for (const { panel, query } of queries) {
      assert.deepEqual(query.datasource, { type: 'prometheus', uid: '${datasource}' }, panel);
    }
  });

  test('queries name only metrics labeller exports, each scoped by $namespace and $job; rates take $__rate_interval', async () => {
    const names = await exported();
    const used = new Set<string>();
    for (const { panel, query } of queries) {
      const selectors = [...query.expr.matchAll(/([A-Za-z_:][A-Za-z0-9_:]*)\{([^}]*)\}/g)];
      assert.ok(selectors.length > 0, `${panel}: ${query.expr}`);
      for (const [, name, matchers] of selectors) {
        used.add(name!);
        // The API server's own count of what labeller's protecting policies did: scoped by their names.
        if (name === API_SERVER_PROTECTION) {
          assert.ok(
            matchers!.includes('policy=~".+-protect-.+"'),
            `${panel}: ${name} not scoped to labeller's policies`,
          );
          continue;
        }
        assert.ok(names.has(name!), `${panel}: ${name} is not a metric of src/metrics/metrics.ts`);
        for (const scope of SCOPE) assert.ok(matchers!.includes(scope), `${panel}: ${name} lacks ${scope}`);
      }
      for (const [range] of query.expr.matchAll(/\[[^\]]*\]/g)) {
        assert.equal(range, '[$__rate_interval]', `${panel}: ${query.expr}`);
      }
      const refIds = queries.filter((q) => q.panel === panel).map((q) => q.query.refId);
      assert.equal(new Set(refIds).size, refIds.length, `${panel}: refIds are unique`);
    }
    for (
      const name of [
        'labeller_ready',
        'leader_election_master_status',
        'labeller_source_up',
        'labeller_source_last_success_timestamp_seconds',
        'labeller_objects_managed',
        'labeller_objects_pending',
        'labeller_objects_conflicting',
        'labeller_objects_held',
        'labeller_coverage_ratio',
        'rest_client_requests_total',
        'labeller_labels_applied_total',
        'labeller_watch_restarts_total',
        'workqueue_depth',
        'labeller_kinds_skipped',
        'labeller_shard_owned_ratio',
        'labeller_shard_members',
        'labeller_retakes_total',
        API_SERVER_PROTECTION,
      ]
    ) {
      assert.ok(used.has(name), `no panel shows ${name}`);
    }
  });

  test('panel ids are unique and the panels tile the 24-column grid without overlapping', () => {
    const ids = panels.map((p) => p.id);
    assert.equal(new Set(ids).size, ids.length);
    const cells = new Map<string, string>();
    for (const panel of panels) {
      const at = panel.gridPos;
      assert.ok(at && at.x >= 0 && at.w > 0 && at.x + at.w <= 24 && at.h > 0, `${panel.title}: ${JSON.stringify(at)}`);
      for (let x = at.x; x < at.x + at.w; x++) {
        for (let y = at.y; y < at.y + at.h; y++) {
          const other = cells.get(`${x},${y}`);
          assert.equal(other, undefined, `${panel.title} overlaps ${other}`);
          cells.set(`${x},${y}`, panel.title ?? '');
        }
      }
    }
  });
});
