// A labelled kind for unit tests: a real reconciler's plans and traces over a map of cached
// objects the test changes, saying each change as a running kind does (onChange).
import { resource } from '../../apimachinery/testing/resources.ts';
import type { ConflictPolicy } from '../../config/model.ts';
import { compileTemplate } from '../../config/template.ts';
import type { FightTracker } from '../../labelling/fights.ts';
import type { LabelledObject } from '../../labelling/object.ts';
import type { MetadataClient, RelatedView } from '../../labelling/ports.ts';
import { Reconciler } from '../../labelling/reconcile.ts';
import { createLogger } from '../../util/log.ts';
import type { TrackedKind } from '../tracker.ts';

const noClient: MetadataClient = {
  apply: () => Promise.reject(new Error('reports never write labels')),
  remove: () => Promise.reject(new Error('reports never write labels')),
  annotations: () => Promise.reject(new Error('reports never read')),
};

export interface KindOptions {
  readonly labels: Record<string, string>;
  readonly conflicts?: ConflictPolicy;
  /** What each object's namespace relation reads: a namespace labelled `team: red` unless given. */
  readonly view?: (object: LabelledObject) => RelatedView;
  readonly fights?: FightTracker;
  /** The resource: pods unless given. */
  readonly plural?: string;
  readonly kind?: string;
  readonly namespaced?: boolean;
  /** When its caches have listed: at once unless given. */
  readonly synced?: Promise<void>;
}

export interface TestKind extends TrackedKind {
  readonly controller: TrackedKind['controller'] & { readonly synced: Promise<void> };
  /** Puts `object` in the cache (or replaces it), and says so. */
  set(object: LabelledObject): void;
  /** Takes the object under `key` out of the cache, and says so. */
  drop(key: string): void;
  /** How many objects have been planned. */
  readonly planned: number;
}

export function testKind(options: KindOptions): TestKind {
  const { labels, conflicts = 'skip', plural = 'pods', kind = 'Pod', namespaced = true } = options;
  const view = options.view ??
    ((object: LabelledObject): RelatedView => ({
      objects: {
        namespace: { kind: 'Namespace', name: object.namespace, labels: { team: 'red' }, annotations: {} },
      },
      held: new Map(),
    }));
  const reconciler = new Reconciler({
    kind: { apiVersion: 'v1', kind, resource: plural, group: '' },
    labels: new Map(Object.entries(labels).map(([key, source]) => [key, compileTemplate(source)])),
    conflicts,
    dryRun: false,
    client: noClient,
    log: createLogger({ level: 'error', format: 'json', write: () => {} }),
    related: view,
    fights: options.fights,
  });
  const objects = new Map<string, LabelledObject>();
  const listeners = new Set<(key: string | undefined) => void>();
  const say = (key: string) => {
    for (const listener of listeners) listener(key);
  };
  let planned = 0;
  return {
    resolved: {
      kind: {
        where: 'kinds.yaml: kinds[0]',
        resource: plural,
        namespaces: [],
        selector: undefined,
        labels: reconcilerLabels(labels),
        annotations: new Map(),
        conflicts,
      },
      resource: resource('', plural, kind, { namespaced }),
    },
    controller: {
      name: plural,
      get: (key) => objects.get(key),
      keys: () => objects.keys(),
      synced: options.synced ?? Promise.resolve(),
    },
    plan: (object) => {
      planned++;
      return reconciler.plan(object);
    },
    explain: (object) => ({ plan: reconciler.plan(object), traces: reconciler.trace(object) }),
    onChange: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    set: (object) => {
      objects.set(object.key, object);
      say(object.key);
    },
    drop: (key) => {
      objects.delete(key);
      say(key);
    },
    get planned() {
      return planned;
    },
  };
}

function reconcilerLabels(labels: Record<string, string>) {
  return new Map(Object.entries(labels).map(([key, source]) => [key, compileTemplate(source)]));
}
