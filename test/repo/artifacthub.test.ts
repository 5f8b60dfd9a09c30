// chart/Chart.yaml's Artifact Hub annotations (https://artifacthub.io/docs/topics/annotations/helm/)
// are in the formats Artifact Hub documents and agree with the rest of the chart: the image the
// default values run, the package's licence, its version (links at its tag, prerelease), and an
// entry per kind of change the version's CHANGELOG section has.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { load } from 'js-yaml';

const read = (path: string): string => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');

interface Chart {
  readonly version: string;
  readonly appVersion: string;
  readonly home: string;
  readonly annotations: Record<string, string>;
}

const chart = load(read('chart/Chart.yaml')) as Chart;
const annotation = (name: string): unknown => {
  const text = chart.annotations[`artifacthub.io/${name}`];
  assert.equal(typeof text, 'string', `artifacthub.io/${name} is a string`);
  return load(text!);
};

/** The kinds of change Artifact Hub takes; Keep a Changelog's headings are the same words. */
const KINDS = ['added', 'changed', 'deprecated', 'removed', 'fixed', 'security'];

describe("chart/Chart.yaml's Artifact Hub annotations", () => {
  test('images: the image the default values run, for both platforms the image is built for', () => {
    const values = load(read('chart/values.yaml')) as { image: { repository: string; tag: string; digest: string } };
    assert.equal(values.image.tag, '');
    assert.equal(values.image.digest, '');
    assert.deepEqual(annotation('images'), [{
      name: 'labeller',
      image: `${values.image.repository}:${chart.appVersion}`,
      platforms: ['linux/amd64', 'linux/arm64'],
    }]);
    // scripts/release.sh pins it to the pushed index by digest: it finds exactly one line to set.
    assert.equal(read('chart/Chart.yaml').match(/^ {6}image: /gm)?.length, 1);
  });

  test("license, prerelease, operator and containsSecurityUpdates: the package's licence and version, boolean strings", () => {
    const pkg = JSON.parse(read('package.json')) as { license: string; version: string };
    assert.equal(chart.annotations['artifacthub.io/license'], pkg.license);
    assert.match(read('LICENSE'), /Apache License\s+Version 2\.0/);
    assert.equal(chart.annotations['artifacthub.io/prerelease'], String(chart.version.includes('-')));
    for (const flag of ['prerelease', 'operator', 'containsSecurityUpdates']) {
      assert.match(chart.annotations[`artifacthub.io/${flag}`] ?? '', /^(true|false)$/, flag);
    }
  });

  test("links: named https URLs under the chart's home, at this version's tag, and a support link", () => {
    const links = annotation('links') as { name: string; url: string }[];
    assert.ok(Array.isArray(links) && links.length > 0);
    for (const link of links) {
      assert.deepEqual(Object.keys(link).sort(), ['name', 'url']);
      assert.ok(link.url.startsWith(`${chart.home}/`), link.url);
      const tag = /\/(?:tree|blob)\/([^/]+)\//.exec(link.url)?.[1];
      if (tag !== undefined) assert.equal(tag, `v${chart.appVersion}`, link.url);
    }
    assert.ok(links.some((link) => link.name === 'support'), 'a link named support (Artifact Hub highlights it)');
  });

  test("changes: {kind, description} entries of Artifact Hub's kinds, one kind at least for each heading of the version's CHANGELOG section", () => {
    const changes = annotation('changes') as { kind: string; description: string }[];
    assert.ok(Array.isArray(changes) && changes.length > 0);
    for (const change of changes) {
      assert.deepEqual(Object.keys(change).sort(), ['description', 'kind']);
      assert.ok(KINDS.includes(change.kind), `kind ${change.kind}`);
      assert.ok(change.description.length > 0 && !change.description.includes('\n'));
    }
    // The version's section once released (docs/release.md), the Unreleased one until then.
    const sections = read('CHANGELOG.md').split(/^## /m);
    const section = sections.find((s) => s.startsWith(`[${chart.version}]`)) ??
      sections.find((s) => s.startsWith('[Unreleased]')) ?? '';
    const headings = [...section.matchAll(/^### (\w+)$/gm)].map((m) => m[1]!.toLowerCase());
    assert.ok(headings.length > 0);
    assert.deepEqual([...new Set(changes.map((c) => c.kind))].sort(), headings.filter((h) => KINDS.includes(h)).sort());
  });
});
