import assert from 'node:assert/strict';
import { test } from 'node:test';
import { anchors, brokenLinks, documents } from '../../scripts/linkcheck.ts';

test("headings' anchors are GitHub's: lowercased, punctuation dropped, repeats numbered, code fences ignored", () => {
  const markdown = [
    '# labeller',
    '## What labeller owns: `labeller status`',
    '## Modes: continuous, --once, --dry-run',
    '## Set up and test',
    '```sh',
    '# not a heading',
    '```',
    '## Set up and test',
  ].join('\n');
  assert.deepEqual([...anchors(markdown)], [
    'labeller',
    'what-labeller-owns-labeller-status',
    'modes-continuous---once---dry-run',
    'set-up-and-test',
    'set-up-and-test-1',
  ]);
});

test('every relative link of the README and docs/ resolves, anchors included', () => {
  assert.ok(documents().includes('README.md') && documents().some((d) => d.startsWith('docs/')));
  assert.deepEqual(documents().flatMap(brokenLinks), []);
});
