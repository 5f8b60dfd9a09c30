// A source in a ConfigMap, watched by name (a field selector, which RBAC limited to that name by
// resourceNames allows): one object, whole, and nothing else of its kind cached. Its data is the
// map, or one key of it holds the YAML or JSON document.
import type { ResourceApis } from '../kube/api.ts';
import type { PartialObjectMetadata } from '../apimachinery/objects.ts';
import type { ApiResource } from '../apimachinery/resource.ts';
import { sourceContent } from './content.ts';
import { Informer } from '../runtime/informer.ts';
import { objectKey, type Projection } from '../runtime/store.ts';
import type { Logger } from '../util/log.ts';
import { attempt, type Loaded, type Loader, parseContent } from './loader.ts';

/** What is kept of the ConfigMap: its data. */
interface Cached {
  readonly resourceVersion: string;
  readonly data: Readonly<Record<string, string>>;
}

const project: Projection<Cached> = Object.assign(
  (object: PartialObjectMetadata): Cached => ({
    resourceVersion: object.metadata.resourceVersion,
    data: (object as PartialObjectMetadata & { data?: Record<string, string> }).data ?? {},
  }),
  { version: (cached: Cached) => cached.resourceVersion },
);

export function configMapLoader(
  origin: { readonly namespace: string; readonly name: string; readonly key: string | undefined },
  configmaps: ApiResource,
  apis: ResourceApis,
  log: Logger,
): Loader {
  const where = `ConfigMap ${origin.namespace}/${origin.name}`;
  const read = (cached: Cached | undefined): Loaded | Error => {
    if (!cached) return new Error(`${where} does not exist`);
    if (origin.key === undefined) {
      const bytes = Object.values(cached.data).reduce((n, value) => n + Buffer.byteLength(value), 0);
      return attempt(() => ({ content: sourceContent(cached.data), bytes }));
    }
    const text = cached.data[origin.key];
    if (text === undefined) return new Error(`${where} has no key ${JSON.stringify(origin.key)}`);
    return attempt(() => parseContent(text));
  };
  return async (report, signal, once) => {
    const informer = new Informer<Cached>({
      name: `configmaps/${origin.namespace}/${origin.name}`,
      api: apis(configmaps, origin.namespace, true),
      project,
      watch: { fieldSelector: `metadata.name=${origin.name}` },
      onWatchError: (error) => report(new Error(`${where}: ${error.message}`)),
      // Read again once watched again: a watch that resumes brings no event when nothing changed,
      // and the source is readable again all the same.
      onWatchRecovered: () => report(read(informer.store.get(objectKey(origin)))),
      log: log.child({ kind: 'ConfigMap', controller: `source ${where}` }),
    });
    informer.subscribe((change) => {
      if (change.type === 'resync' && change.changed.length === 0 && change.removed.length === 0) {
        if (change.previous.size === 0) report(read(undefined));
        return;
      }
      report(read(informer.store.get(objectKey(origin))));
    });
    await (once ? informer.listOnce(signal).catch(() => {}) : informer.run(signal));
  };
}
