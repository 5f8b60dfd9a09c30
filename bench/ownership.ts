// The cost of labeller_objects_managed/pending: a scrape reads a controller's counts
// (src/labelling/counts.ts). Synthetic objects, no cluster: the first scrape plans every
// object, later ones only objects marked changed since; one object in a hundred is replaced
// between scrapes, as a watch would, then none. Prints the figures.
//   node --import tsx bench/ownership.ts [--n 100000] [--scrapes 5]
import { parseArgs } from 'node:util';
import { CacheCounter } from '../src/labelling/counts.ts';
import { type LabelledObject, NOT_ADMITTED } from '../src/labelling/object.ts';
import { Reconciler } from '../src/labelling/reconcile.ts';
import { compileTemplate } from '../src/config/template.ts';
import { createLogger } from '../src/util/log.ts';

const { values } = parseArgs({
  options: { n: { type: 'string', default: '100000' }, scrapes: { type: 'string', default: '5' } },
});
const n = Number(values.n);
const labels = { team: 'platform', 'example.com/name': '{{name}}', 'example.com/app': '{{labels.app}}' };
const reconciler = new Reconciler({
  kind: { apiVersion: 'v1', kind: 'ConfigMap', resource: 'configmaps', group: '' },
  labels: new Map(Object.entries(labels).map(([key, source]) => [key, compileTemplate(source)])),
  conflicts: 'force',
  dryRun: false,
  client: {
    apply: () => Promise.reject(new Error('not used')),
    remove: () => Promise.reject(new Error('not used')),
    annotations: () => Promise.reject(new Error('not used')),
  },
  log: createLogger({ level: 'error', format: 'json', write: () => {} }),
});
const object = (i: number): LabelledObject => {
  const name = `cm-${i}`;
  // Nine in ten converged, the rest missing a label.
  const current = i % 10 === 0
    ? { app: 'web', team: 'platform' }
    : { app: 'web', team: 'platform', 'example.com/name': name, 'example.com/app': 'web' };
  return {
    key: `bench/${name}`,
    name,
    namespace: 'bench',
    uid: `uid-${i}`,
    resourceVersion: '1',
    labels: current,
    annotations: {},
    deleting: false,
    admitted: NOT_ADMITTED,
    ownedLabels: i % 10 === 0 ? ['team'] : Object.keys(labels),
    ownedAnnotations: [],
  };
};
const cache = new Map(Array.from({ length: n }, (_, i) => [`bench/cm-${i}`, object(i)]));
// With the config's labels, as a controller counts (coverage too).
const counter = new CacheCounter((o) => reconciler.plan(o), Object.keys(labels), {
  get: (key) => cache.get(key),
  keys: () => cache.keys(),
});

const timed = (): [number, ReturnType<CacheCounter['read']>] => {
  const started = performance.now();
  const counts = counter.read();
  return [performance.now() - started, counts];
};
const [first, { counts }] = timed();
console.log(
  `N = ${n}: first scrape ${first.toFixed(1)} ms (${
    ((first * 1e6) / n).toFixed(0)
  } ns per object); managed ${counts.managed}, pending ${counts.pending}`,
);
for (let s = 1; s <= Number(values.scrapes); s++) {
  for (let i = 0; i < n; i += 100) {
    const replaced = object(i);
    cache.set(replaced.key, replaced);
    counter.changed(replaced.key);
  }
  const [ms] = timed();
  console.log(`scrape ${s} (1 % of objects replaced): ${ms.toFixed(1)} ms`);
}
for (let s = 1; s <= Number(values.scrapes); s++) {
  const [ms] = timed();
  console.log(`scrape ${s} (nothing changed): ${ms.toFixed(2)} ms`);
}
