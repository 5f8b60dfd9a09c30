import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Denial } from '../kube/access.ts';
import type { ApiResource } from '../apimachinery/resource.ts';
import { groupResource } from '../apimachinery/resource.ts';
import { BUILTINS } from '../apimachinery/testing/resources.ts';
import { buildConfig } from '../config/overlay.ts';
import { createLogger } from '../util/log.ts';
import { controllerName, type ResolvedKind } from './resolve.ts';
import { KindAccess } from './access.ts';

const config = buildConfig({ kinds: ['*'], labels: { a: 'b' }, namespaces: ['shop', 'web'] });
const kindOf = (plural: string): ResolvedKind => {
  const resource = BUILTINS.find((r) => r.resource === plural)!;
  return { kind: { ...config.everyKind!.kind, resource: groupResource(resource) }, resource };
};

function setup(denied: (resource: ApiResource, namespace: string) => readonly string[] | Error) {
  const asked: string[] = [];
  const lines: { level: string; msg: string; [field: string]: unknown }[] = [];
  const log = createLogger({ level: 'info', format: 'json', write: (line) => lines.push(JSON.parse(line)) });
  const access = new KindAccess(async (resource, namespaces) => {
    asked.push(groupResource(resource));
    const denials: Denial[] = [];
    for (const namespace of namespaces) {
      const verbs = denied(resource, namespace);
      if (verbs instanceof Error) throw verbs;
      denials.push(...verbs.map((verb) => ({ verb, namespace })));
    }
    return denials;
  }, log);
  return { access, asked, lines };
}

test('a kind labeller may not use is skipped and said once, with the verbs missing and the rule to grant; the others start', async () => {
  let secrets: readonly string[] = ['patch'];
  const { access, asked, lines } = setup((r, namespace) =>
    r.resource === 'secrets' ? secrets : r.resource === 'pods' && namespace === 'web' ? ['list', 'watch', 'patch'] : []
  );
  const kinds = ['configmaps', 'secrets', 'pods', 'deployments'].map(kindOf);
  const admitted = await access.admit(kinds, () => false);
  assert.deepEqual(admitted.map(controllerName), ['configmaps/shop,web', 'deployments.apps/shop,web']);
  const warnings = lines.filter((l) => l.level === 'warn');
  assert.deepEqual(warnings.map((l) => [l.msg, l['kind'], l['missing']]), [
    ['kind skipped: labeller may not use it', 'secrets', 'patch'],
    ['kind skipped: labeller may not use it', 'pods', 'list,watch,patch'],
  ]);
  assert.equal(
    warnings[0]!['grant'],
    'grant {apiGroups: [""], resources: [secrets], verbs: [patch]} in a Role in namespaces shop, web bound to labeller, or exclude secrets',
  );
  assert.match(String(warnings[1]!['grant']), /in a Role in namespace web bound to labeller/);
  assert.deepEqual(access.skipped.map((s) => [s.resource, s.verbs]), [['secrets', 'patch'], [
    'pods',
    'list,watch,patch',
  ]]);
  assert.match(access.notes().join('\n'), /^secrets: skipped, labeller may not patch; grant/m);

  // Applied again: the kinds running are not asked again, the skipped ones are, and said no more.
  asked.length = 0;
  const running = new Set(admitted.map(controllerName));
  await access.admit(kinds, (name) => running.has(name));
  assert.deepEqual(asked.sort(), ['pods', 'secrets']);
  assert.equal(lines.filter((l) => l.level === 'warn').length, 2);

  // Granted: started, and said so.
  secrets = [];
  const now = await access.admit(kinds, (name) => running.has(name));
  assert.ok(now.some((kind) => kind.resource.resource === 'secrets'));
  assert.deepEqual(lines.at(-1)?.['kind'], 'secrets');
  assert.equal(lines.at(-1)?.msg, 'kind allowed now; watching it');
  assert.deepEqual(access.skipped.map((s) => s.resource), ['pods']);
  // A kind skipped that is no longer asked for (a CRD removed) is forgotten.
  await access.admit([kindOf('configmaps')], () => false);
  assert.deepEqual(access.skipped, []);
});

test('a review that cannot be made skips nothing: said once, the kinds start', async () => {
  const { access, lines } = setup(() => new Error('403 Forbidden: selfsubjectaccessreviews'));
  const kinds = ['configmaps', 'secrets'].map(kindOf);
  assert.equal((await access.admit(kinds, () => false)).length, 2);
  assert.equal((await access.admit(kinds, () => false)).length, 2);
  assert.deepEqual(lines.map((l) => l.msg), [
    'cannot ask the API server what labeller may do; starting kinds unchecked',
  ]);
});
