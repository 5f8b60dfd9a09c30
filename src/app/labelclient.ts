// The reconciler's LabelClient over the metadata API: a server-side apply of the label set,
// with API failures translated into what the labelling logic understands.
import type { ResourceApi } from '../kube/api.ts';
import { ApiError, type StatusCause } from '../kube/errors.ts';
import { type LabelClient, LabelConflict, ObjectGone } from '../labeller/reconcile.ts';

export function labelClient(api: Pick<ResourceApi, 'apply'>, fieldManager: string): LabelClient {
  return {
    async applyLabels(target, labels, { force, dryRun, signal }) {
      try {
        const applied = await api.apply(
          {
            apiVersion: target.apiVersion,
            kind: target.kind,
            metadata: {
              name: target.name,
              ...(target.namespace ? { namespace: target.namespace } : {}),
              uid: target.uid,
              labels,
            },
          },
          { fieldManager, force, dryRun, signal },
        );
        return { labels: applied.metadata.labels ?? {}, resourceVersion: applied.metadata.resourceVersion };
      } catch (error) {
        throw translate(error);
      }
    },
  };
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

/** A FieldManagerConflict cause as a label key and its owner: field `.metadata.labels.team`, message `conflict with "kubectl" …`. */
function owner(cause: StatusCause): { key: string; manager: string }[] {
  const key = /^\.metadata\.labels(?:\.(.+)|\[(.+)\])$/.exec(cause.field ?? '');
  const manager = /conflict with "([^"]+)"/.exec(cause.message ?? '');
  return key && manager ? [{ key: key[1] ?? key[2] ?? '', manager: manager[1] ?? '' }] : [];
}
