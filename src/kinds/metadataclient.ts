// The reconciler's MetadataClient over the metadata API: a server-side apply of the label and
// annotation sets, with API failures translated into what the labelling logic understands.
import type { ResourceApi } from '../kube/api.ts';
import { ApiError, type StatusCause } from '../kube/errors.ts';
import type { MetadataField } from '../config/model.ts';
import { type ApplyTarget, LabelConflict, type MetadataClient, ObjectGone, type Writable } from '../labelling/ports.ts';

/**
 * `api` is the resource's in a namespace ('' for all, or cluster-scoped); `writable` resolves
 * when this process may write (the field-manager guard's Lease held: guard/guard.ts).
 */
export function metadataClient(
  api: (namespace: string) => Pick<ResourceApi, 'apply' | 'list'>,
  fieldManager: string,
  writable?: Writable,
): MetadataClient {
  const everywhere = api('');
  return {
    async apply(target, { labels, annotations }, { force, dryRun, annotationKeys, signal }) {
      const waiting = dryRun ? undefined : writable?.(signal);
      if (waiting) await waiting;
      try {
        const applied = await everywhere.apply(
          {
            apiVersion: target.apiVersion,
            kind: target.kind,
            metadata: {
              ...metadataOf(target),
              // An empty map is left out: keys labeller owned and sends no more are removed either way.
              ...(Object.keys(labels).length > 0 ? { labels } : {}),
              ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
            },
          },
          { fieldManager, force, dryRun, signal },
        );
        return {
          labels: applied.metadata.labels ?? {},
          annotations: pick(applied.metadata.annotations, annotationKeys),
          resourceVersion: applied.metadata.resourceVersion,
        };
      } catch (error) {
        throw translate(error);
      }
    },
    // A list of one by name, not a get: `list` is a right labeller has, in each namespace it watches.
    async annotations(target, keys, signal) {
      const { items } = await api(target.namespace).list({
        fieldSelector: `metadata.name=${target.name}`,
        signal,
      });
      const object = items.find((item) => item.metadata.uid === target.uid);
      if (!object) throw new ObjectGone(`${target.name} is gone`);
      return pick(object.metadata.annotations, keys);
    },
  };
}

function metadataOf(target: ApplyTarget) {
  return { name: target.name, ...(target.namespace ? { namespace: target.namespace } : {}), uid: target.uid };
}

/** Only the keys labeller writes or owns: the rest of an object's annotations is not kept. */
function pick(
  annotations: Readonly<Record<string, string>> | undefined,
  keys: readonly string[],
): Record<string, string> {
  const picked: Record<string, string> = {};
  for (const key of keys) {
    const value = annotations?.[key];
    if (value !== undefined) picked[key] = value;
  }
  return picked;
}

function translate(error: unknown): unknown {
  if (!(error instanceof ApiError)) return error;
  if (error.causes.some((c) => c.reason === 'FieldManagerConflict')) {
    return new LabelConflict(
      error.causes.map((c) => c.message ?? c.field ?? '').join('; '),
      error.causes.flatMap(owner),
      { cause: error },
    );
  }
  // The uid guard: 409 "uid mismatch" when the object is gone, 422 "metadata.uid ... immutable"
  // when another object took its name; 404 for good measure.
  if (
    error.status === 404 || (error.status === 409 && /uid mismatch/.test(error.message)) ||
    (error.status === 422 && /metadata\.uid/.test(error.message))
  ) {
    return new ObjectGone(error.message, { cause: error });
  }
  return error;
}

/** A FieldManagerConflict cause as a key and its owner: field `.metadata.labels.team`, message `conflict with "kubectl" …`. */
function owner(cause: StatusCause): { field: MetadataField; key: string; manager: string }[] {
  const key = /^\.metadata\.(labels|annotations)(?:\.(.+)|\[(.+)\])$/.exec(cause.field ?? '');
  const manager = /conflict with "([^"]+)"/.exec(cause.message ?? '');
  return key && manager
    ? [{
      field: key[1] === 'labels' ? 'labels' : 'annotations',
      key: key[2] ?? key[3] ?? '',
      manager: manager[1] ?? '',
    }]
    : [];
}
