// The reconciler's MetadataClient over the metadata API: a server-side apply of the label and
// annotation sets, a JSON Patch removing keys no manager owns, with API failures translated into
// what the labelling logic understands.
import jsonpatch from 'fast-json-patch';
import type { JsonPatchOperation, ResourceApi } from '../kube/api.ts';
import type { MetadataApplyConfiguration } from '../apimachinery/objects.ts';
import type { Written } from '../apimachinery/writeanswer.ts';
import { ApiError, type StatusCause } from '../apimachinery/errors.ts';
import type { MetadataField } from '../config/model.ts';
import { markerKeys } from '../labelling/admitted.ts';
import {
  type AppliedMetadata,
  type ApplyTarget,
  type Claimed,
  LabelConflict,
  type MetadataClient,
  NotClaimed,
  ObjectChanged,
  ObjectGone,
  type Writable,
} from '../labelling/ports.ts';

/**
 * `api` is the resource's in a namespace ('' for all, or cluster-scoped); `writable` resolves
 * when this process may write (the field-manager guard's Lease held: guard/guard.ts); `claimed`
 * is asked as each write is sent, after that wait: a write whose claim lapsed meanwhile is not
 * sent (NotClaimed).
 */
export function metadataClient(
  api: (namespace: string) => Pick<ResourceApi, 'apply' | 'patch' | 'list'>,
  fieldManager: string,
  writable?: Writable,
  claimed?: Claimed,
): MetadataClient {
  const everywhere = api('');
  const markerNames = markerKeys(fieldManager);
  const claim = (target: ApplyTarget): void => {
    const lapsed = claimed?.(target);
    if (lapsed) throw new NotClaimed(`not written: ${lapsed}`);
  };
  /** Undefined when the write may go now (most writes: no promise made), else when it may. */
  const mayWrite = (target: ApplyTarget, dryRun: boolean, signal: AbortSignal | undefined) => {
    if (dryRun) return undefined;
    const waiting = writable?.(signal);
    if (waiting) return waiting.then(() => claim(target));
    claim(target);
    return undefined;
  };
  return {
    async apply(target, { labels, annotations }, { force, dryRun, annotationKeys, signal }) {
      const waiting = mayWrite(target, dryRun, signal);
      if (waiting) await waiting;
      const metadata = metadataOf(target);
      // An empty map is left out: keys labeller owned and sends no more are removed either way.
      if (hasKeys(labels)) metadata.labels = labels;
      if (hasKeys(annotations)) metadata.annotations = annotations;
      try {
        const applied = await everywhere.apply(
          { apiVersion: target.apiVersion, kind: target.kind, metadata },
          { fieldManager, force, dryRun, signal },
        );
        return new Applied(applied, annotationKeys);
      } catch (error) {
        throw translate(error);
      }
    },
    async remove(target, version, keys, { markers, dryRun, annotationKeys, signal }) {
      const waiting = mayWrite(target, dryRun, signal);
      if (waiting) await waiting;
      const path = (field: MetadataField, key: string) => `/metadata/${field}/${jsonpatch.escapePathComponent(key)}`;
      const operations: JsonPatchOperation[] = [
        // The uid, as the apply's guard; the version, so that only what the cache saw is removed.
        { op: 'test', path: '/metadata/uid', value: target.uid },
        { op: 'test', path: '/metadata/resourceVersion', value: version },
        ...keys.labels.map((key) => ({ op: 'remove' as const, path: path('labels', key) })),
        ...keys.annotations.map((key) => ({ op: 'remove' as const, path: path('annotations', key) })),
        ...markers.map((field) => ({ op: 'remove' as const, path: path('annotations', markerNames[field]) })),
      ];
      try {
        const patched = await everywhere.patch(target.name, target.namespace, operations, {
          fieldManager,
          dryRun,
          signal,
        });
        return new Applied(patched, annotationKeys);
      } catch (error) {
        // A failed test (or a removal of a key gone meanwhile): the object is not what the cache saw.
        if (error instanceof ApiError && error.status === 422) {
          throw error.message.includes('/metadata/uid')
            ? new ObjectGone(error.message, { cause: error })
            : new ObjectChanged(error.message, { cause: error });
        }
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

/** The apply's metadata, to which its maps are added. */
type ApplyMetadata = {
  -readonly [K in keyof MetadataApplyConfiguration['metadata']]: MetadataApplyConfiguration['metadata'][K];
};

function metadataOf(target: ApplyTarget): ApplyMetadata {
  return target.namespace
    ? { name: target.name, namespace: target.namespace, uid: target.uid }
    : { name: target.name, uid: target.uid };
}

function hasKeys(map: Readonly<Record<string, string>>): boolean {
  for (const _ in map) return true;
  return false;
}

/**
 * What a write answered: its version, and the object's labels and its annotations of `keys`, read
 * from the answer only when asked for (a patch printed: a dry run, a debug log).
 */
class Applied implements AppliedMetadata {
  readonly #answer: Written;
  readonly #keys: readonly string[];
  #annotations: Record<string, string> | undefined;

  constructor(answer: Written, keys: readonly string[]) {
    this.#answer = answer;
    this.#keys = keys;
  }

  get resourceVersion(): string {
    return this.#answer.resourceVersion;
  }

  get labels(): Readonly<Record<string, string>> {
    return this.#answer.metadata.labels ?? {};
  }

  get annotations(): Readonly<Record<string, string>> {
    return (this.#annotations ??= pick(this.#answer.metadata.annotations, this.#keys));
  }
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
